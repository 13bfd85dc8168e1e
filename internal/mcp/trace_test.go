package mcp

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/telemetry/propagate"
)

// TestHTTPTraceparent: with tracing on (the propagator Setup installs),
// the requests of an MCP HTTP call carry the traceparent of its context.
// (It sets the global propagator, so it does not run in parallel.)
func TestHTTPTraceparent(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagate.Propagator())
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })

	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(t.Context(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	srv := startHTTPServer(t, "streamable")
	m := newManager(t)
	_, err := m.Discover(ctx, "agent", ServerConfig{Name: "web", URL: srv.url, HeadersEnv: map[string]string{"Authorization": "HXD_TEST_TOKEN"}})
	require.NoError(t, err)
	var parents []string
	for _, h := range srv.seenHeaders() {
		parents = append(parents, h.Get("traceparent"))
	}
	require.True(t, slices.Contains(parents, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "traceparents seen: %q", parents)
}
