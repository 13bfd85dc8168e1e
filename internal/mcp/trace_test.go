package mcp

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

// TestHTTPTraceparent: with tracing on (the propagator Setup installs),
// the requests of an MCP HTTP call carry the traceparent of its context.
// (It sets the global propagator, so it does not run in parallel.)
func TestHTTPTraceparent(t *testing.T) {
	ctx := hxtest.TracedContext(t, t.Context())
	srv := startHTTPServer(t, "streamable")
	m := newManager(t)
	_, err := m.Discover(ctx, "agent", ServerConfig{Name: "web", URL: srv.url, HeadersEnv: map[string]string{"Authorization": "HXD_TEST_TOKEN"}})
	require.NoError(t, err)
	var parents []string
	for _, h := range srv.seenHeaders() {
		parents = append(parents, h.Get("traceparent"))
	}
	require.True(t, slices.Contains(parents, hxtest.TraceParent), "traceparents seen: %q", parents)
}
