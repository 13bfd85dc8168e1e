package tool

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/model"
	"hxd/internal/telemetry/propagate"
)

// TestWebhookTraceparent: with tracing on (the propagator Setup
// installs), a webhook call carries the traceparent of its context; a
// context without a span sends none. (It sets the global propagator, so
// it does not run in parallel.)
func TestWebhookTraceparent(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagate.Propagator())
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })

	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	spanCtx := trace.ContextWithSpanContext(t.Context(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	b := setupWebhook(t, 5, reply(200, `{"content":"ok"}`))
	inv := Invocation{SessionID: "s", RunID: "r", ExecutionKey: "r:1:c1", Attempt: 1,
		Call: model.ToolCall{ID: "c1", Name: "hook", Input: json.RawMessage(`{}`)}}
	for _, ctx := range []context.Context{spanCtx, t.Context()} {
		_, err := b.tool.Call(ctx, inv)
		require.NoError(t, err)
	}
	seen := b.requests()
	require.Len(t, seen, 2)
	require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", seen[0].traceparent)
	require.Empty(t, seen[1].traceparent)
}
