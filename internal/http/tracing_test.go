package http_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	hxhttp "hxd/internal/http"
	"hxd/internal/http/api"
	hxruntime "hxd/internal/runtime"
)

// tracedSetup is setup with a tracer provider recording every span (or
// none, with sampler NeverSample).
func tracedSetup(t *testing.T, sampler sdktrace.Sampler) (*testBundle, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tb := setup(t, func(c *hxhttp.Config) { c.TracerProvider = tp })
	tb.svc.GetSessionFunc = func(context.Context, string) (*hxruntime.Session, error) { return nil, hxruntime.ErrNotFound }
	return tb, rec
}

// serverSpan is the one ended span of kind server. It closes the server
// first: a client may read the response before the handler returned and
// ended its span, and Close waits for the handlers.
func serverSpan(t *testing.T, tb *testBundle, rec *tracetest.SpanRecorder) sdktrace.ReadOnlySpan {
	t.Helper()
	tb.srv.Close()
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind().String() == "server" {
			out = append(out, s)
		}
	}
	require.Len(t, out, 1, "server spans")
	return out[0]
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestTracingServerSpan: a request's server span is named after the
// route template, continues the caller's traceparent, and the problem
// answering it carries its trace id.
func TestTracingServerSpan(t *testing.T) {
	t.Parallel()
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name      string
		path      string
		header    map[string]string
		wantName  string
		wantRoute string
		wantTrace string // "" = a new trace
	}{
		{name: "route template", path: "/sessions/s-1", wantName: "GET /sessions/{session_id}", wantRoute: "/sessions/{session_id}"},
		{name: "caller's trace", path: "/sessions/s-1", header: map[string]string{"traceparent": caller},
			wantName: "GET /sessions/{session_id}", wantRoute: "/sessions/{session_id}", wantTrace: "4bf92f3577b34da6a3ce929d0e0e4736"},
		{name: "no route", path: "/no/such/path", wantName: "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb, rec := tracedSetup(t, sdktrace.AlwaysSample())
			resp, body := tb.do(t, request{method: http.MethodGet, path: tt.path, header: tt.header})
			p := requireProblem(t, resp, body, http.StatusNotFound, "not_found")
			span := serverSpan(t, tb, rec)
			require.Equal(t, tt.wantName, span.Name())
			route, ok := attr(span, "http.route")
			if tt.wantRoute == "" {
				require.False(t, ok, "http.route of an unrouted request")
			} else {
				require.Equal(t, tt.wantRoute, route.AsString())
			}
			tid := span.SpanContext().TraceID().String()
			require.NotNil(t, p.TraceId, "problem without trace_id: %s", body)
			require.Equal(t, tid, *p.TraceId)
			if tt.wantTrace != "" {
				require.Equal(t, tt.wantTrace, tid)
				require.Equal(t, "00f067aa0ba902b7", span.Parent().SpanID().String())
			} else {
				require.False(t, span.Parent().IsValid(), "a request without traceparent starts a trace")
			}
		})
	}
}

// TestTracingOffNoTraceID: without a tracer provider, or with the span
// not sampled, a problem has no trace_id, whatever traceparent came in.
func TestTracingOffNoTraceID(t *testing.T) {
	t.Parallel()
	hdr := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		tb.svc.GetSessionFunc = func(context.Context, string) (*hxruntime.Session, error) { return nil, hxruntime.ErrNotFound }
		resp, body := tb.do(t, request{method: http.MethodGet, path: "/sessions/s-1", header: hdr})
		require.Nil(t, requireProblem(t, resp, body, http.StatusNotFound, "not_found").TraceId)
	})
	t.Run("not sampled", func(t *testing.T) {
		t.Parallel()
		tb, rec := tracedSetup(t, sdktrace.NeverSample())
		resp, body := tb.do(t, request{method: http.MethodGet, path: "/sessions/s-1"})
		require.Nil(t, requireProblem(t, resp, body, http.StatusNotFound, "not_found").TraceId)
		tb.srv.Close()
		require.Empty(t, rec.Ended())
	})
}

// TestTracingVerifySpan: bundle verification is an hxd.verify span under
// the request's.
func TestTracingVerifySpan(t *testing.T) {
	t.Parallel()
	tb, rec := tracedSetup(t, sdktrace.AlwaysSample())
	resp, body := tb.upload(t, upload{path: "/bundles/verify", data: metadataBundle(t)})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.True(t, decode[api.VerificationReport](t, body).Valid)
	server := serverSpan(t, tb, rec)
	require.Equal(t, "POST /bundles/verify", server.Name())
	var verify sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "hxd.verify" {
			verify = s
		}
	}
	require.NotNil(t, verify, "no hxd.verify span")
	require.Equal(t, server.SpanContext().SpanID(), verify.Parent().SpanID())
	valid, _ := attr(verify, "hxd.bundle.valid")
	require.True(t, valid.AsBool())
}

// TestTracingSkipsProbes: the metrics scrape and the health probes make
// no span, while an API request beside them does.
func TestTracingSkipsProbes(t *testing.T) {
	t.Parallel()
	tb, rec := tracedSetup(t, sdktrace.AlwaysSample())
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		resp, _ := tb.do(t, request{method: http.MethodGet, path: path})
		require.NotEqual(t, http.StatusNotFound, resp.StatusCode, path)
	}
	resp, body := tb.do(t, request{method: http.MethodGet, path: "/sessions/s-1"})
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	require.Equal(t, "GET /sessions/{session_id}", serverSpan(t, tb, rec).Name(), "the one server span is the API request's")
}
