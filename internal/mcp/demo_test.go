package mcp

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDemoServer(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	cfg := stdioConfig(t, "demo", "demo")
	pinned, err := m.Discover(t.Context(), "agent", cfg)
	require.NoError(t, err)
	var names []string
	for _, p := range pinned {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	require.Equal(t, []string{"demo_upper", "demo_word_count"}, names)

	wc := discoverTool(t, m, cfg, "demo_word_count")
	out, err := call(t, wc, "k1", `{"text":"the quick brown fox"}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"words":4}`, string(out.Result.Content))
	require.Error(t, wc.ValidateInput(json.RawMessage(`{"text":4}`)))

	up := discoverTool(t, m, cfg, "demo_upper")
	out, err = call(t, up, "k2", `{"text":"mcp"}`)
	require.NoError(t, err)
	require.Equal(t, "MCP", text(t, out))
}
