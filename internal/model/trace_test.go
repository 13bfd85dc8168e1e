package model

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

// TestProviderTraceparent: with tracing on (the propagator Setup
// installs), a model request carries the traceparent of its context, and
// the caller's client is left as it was. (It sets the global propagator,
// so it does not run in parallel.)
func TestProviderTraceparent(t *testing.T) {
	ctx := hxtest.TracedContext(t, t.Context())

	b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) {
		stream(w, textStream("Hello there.", "end_turn"))
	}, nil)
	_, err := b.provider.Complete(ctx, hi())
	require.NoError(t, err)
	_, err = b.provider.Complete(t.Context(), hi())
	require.NoError(t, err)
	_, header := b.request(t, 0)
	require.Equal(t, hxtest.TraceParent, header.Get("traceparent"))
	_, header = b.request(t, 1)
	require.Empty(t, header.Get("traceparent"))

	o := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		sse(w,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		)
	}, nil)
	_, err = o.provider.Complete(ctx, hi())
	require.NoError(t, err)
	_, header = o.lastRequest(t)
	require.Equal(t, hxtest.TraceParent, header.Get("traceparent"))
	// The client passed in Options is not changed.
	_, same := b.srv.Client().Transport.(*http.Transport)
	require.True(t, same, "the caller's client keeps its transport")
}
