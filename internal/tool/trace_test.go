package tool

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/model"
)

// TestWebhookTraceparent: with tracing on (the propagator Setup
// installs), a webhook call carries the traceparent of its context; a
// context without a span sends none. (It sets the global propagator, so
// it does not run in parallel.)
func TestWebhookTraceparent(t *testing.T) {
	spanCtx := hxtest.TracedContext(t, t.Context())
	b := setupWebhook(t, 5, reply(200, `{"content":"ok"}`))
	inv := Invocation{SessionID: "s", RunID: "r", ExecutionKey: "r:1:c1", Attempt: 1,
		Call: model.ToolCall{ID: "c1", Name: "hook", Input: json.RawMessage(`{}`)}}
	for _, ctx := range []context.Context{spanCtx, t.Context()} {
		_, err := b.tool.Call(ctx, inv)
		require.NoError(t, err)
	}
	seen := b.requests()
	require.Len(t, seen, 2)
	require.Equal(t, hxtest.TraceParent, seen[0].traceparent)
	require.Empty(t, seen[1].traceparent)
}
