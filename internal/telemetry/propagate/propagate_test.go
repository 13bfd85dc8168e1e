package propagate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/telemetry/propagate"
)

// TestInjectTransport: with the propagator Setup installs, a request whose
// context holds a span carries its traceparent, and its own headers are
// left alone; without a span nothing is added. (It sets the global
// propagator, so it does not run in parallel.)
func TestInjectTransport(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagate.Propagator())
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })

	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
	}))
	defer srv.Close()
	client := &http.Client{Transport: propagate.InjectTransport(nil)}

	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	spanCtx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	for _, tc := range []struct {
		name     string
		withSpan bool
		want     string
	}{
		{"span", true, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"no span", false, ""},
	} {
		ctx := context.Background()
		if tc.withSpan {
			ctx = spanCtx
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if h := <-got; h != tc.want {
			t.Errorf("%s: traceparent %q, want %q", tc.name, h, tc.want)
		}
		if req.Header.Get("traceparent") != "" {
			t.Errorf("%s: the caller's request was changed", tc.name)
		}
	}

	h := http.Header{}
	propagate.Inject(spanCtx, h)
	if h.Get("traceparent") == "" {
		t.Error("Inject wrote no traceparent")
	}
}
