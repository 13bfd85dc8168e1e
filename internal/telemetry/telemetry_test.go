package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/telemetry"
)

// setEnv sets the OTEL_* variables of a case and clears the others Setup
// reads, so the machine's environment does not leak in.
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, name := range []string{"OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(name, env[name])
	}
	// Nothing listens there: spans are dropped by Shutdown's failed export.
	if env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "" {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	}
}

func TestSetup(t *testing.T) {
	tests := []struct {
		name        string
		enabled     bool
		env         map[string]string
		wantErr     error
		wantEnabled bool
		wantService string
		wantSampled bool
		wantAttr    attribute.KeyValue
	}{
		{name: "off", enabled: false, wantEnabled: false},
		{name: "on, defaults", enabled: true, wantEnabled: true, wantService: "hxd", wantSampled: true},
		{name: "OTEL_SDK_DISABLED wins", enabled: true, env: map[string]string{"OTEL_SDK_DISABLED": "TRUE"}, wantEnabled: false},
		{name: "OTEL_SDK_DISABLED=false", enabled: true, env: map[string]string{"OTEL_SDK_DISABLED": "false"}, wantEnabled: true, wantService: "hxd", wantSampled: true},
		{name: "grpc", enabled: true, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantEnabled: true, wantService: "hxd", wantSampled: true},
		{name: "unknown protocol", enabled: true, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: telemetry.ErrProtocol},
		{name: "traces protocol first", enabled: true, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "carrier-pigeon"}, wantErr: telemetry.ErrProtocol},
		{name: "unknown protocol while off", enabled: false, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantEnabled: false},
		{name: "service name and attributes", enabled: true,
			env:         map[string]string{"OTEL_SERVICE_NAME": "hxd-eu", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test"},
			wantEnabled: true, wantService: "hxd-eu", wantSampled: true, wantAttr: attribute.String("deployment.environment", "test")},
		{name: "sampler", enabled: true, env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"},
			wantEnabled: true, wantService: "hxd", wantSampled: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.env)
			ctx := context.Background()
			tel, err := telemetry.Setup(ctx, telemetry.Options{Enabled: tt.enabled, Version: "v-test"})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Setup error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond) // the export fails: nothing listens
			defer cancel()
			defer func() { _ = tel.Shutdown(sctx) }()
			if tel.Enabled() != tt.wantEnabled {
				t.Fatalf("Enabled() = %v, want %v", tel.Enabled(), tt.wantEnabled)
			}
			_, span := tel.TracerProvider().Tracer("test").Start(ctx, "s")
			defer span.End()
			if !tt.wantEnabled {
				if span.IsRecording() || span.SpanContext().IsValid() {
					t.Fatal("a disabled provider made a real span")
				}
				return
			}
			if span.SpanContext().IsSampled() != tt.wantSampled {
				t.Fatalf("sampled = %v, want %v", span.SpanContext().IsSampled(), tt.wantSampled)
			}
			ro, ok := span.(sdktrace.ReadOnlySpan)
			if !ok {
				if tt.wantSampled {
					t.Fatalf("span %T is not an SDK span", span)
				}
				return
			}
			res := ro.Resource()
			got, _ := res.Set().Value("service.name")
			if got.AsString() != tt.wantService {
				t.Errorf("service.name = %q, want %q", got.AsString(), tt.wantService)
			}
			if v, _ := res.Set().Value("service.version"); v.AsString() != "v-test" {
				t.Errorf("service.version = %q, want v-test", v.AsString())
			}
			if tt.wantAttr.Valid() {
				if v, _ := res.Set().Value(tt.wantAttr.Key); v != tt.wantAttr.Value {
					t.Errorf("%s = %v, want %v", tt.wantAttr.Key, v.String(), tt.wantAttr.Value.String())
				}
			}
		})
	}
}

// TestSetupExports: spans reach the OTLP/HTTP endpoint of the
// environment by Shutdown, as protobuf.
func TestSetupExports(t *testing.T) {
	got := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type")
	}))
	defer srv.Close()
	setEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL})
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, telemetry.Options{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.TracerProvider().Tracer("test").Start(ctx, "s")
	span.End()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-got:
		if want := "POST /v1/traces application/x-protobuf"; req != want {
			t.Fatalf("export request %q, want %q", req, want)
		}
	default:
		t.Fatal("Shutdown returned without exporting the span")
	}
}

func TestLogHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	spanCtx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	ctxs := map[string]context.Context{
		"span":         spanCtx,
		"no span":      context.Background(),
		"invalid span": trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}),
	}
	tests := []struct {
		name    string // of ctxs
		wantIDs bool
	}{
		{name: "span", wantIDs: true},
		{name: "no span"},
		{name: "invalid span"},
	}
	for _, tt := range tests {
		buf.Reset()
		log.InfoContext(ctxs[tt.name], "hello", "k", "v")
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("%s: %v: %s", tt.name, err, buf.String())
		}
		if line["component"] != "x" || line["k"] != "v" {
			t.Errorf("%s: attributes lost: %s", tt.name, buf.String())
		}
		if tt.wantIDs {
			if line["trace_id"] != tid.String() || line["span_id"] != sid.String() {
				t.Errorf("%s: trace_id/span_id = %v/%v, want %s/%s", tt.name, line["trace_id"], line["span_id"], tid, sid)
			}
		} else if _, ok := line["trace_id"]; ok {
			t.Errorf("%s: trace_id without a span: %s", tt.name, buf.String())
		}
	}
}
