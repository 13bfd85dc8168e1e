package mcp

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStdioBinaryFromTestdata: a stdio server built from testdata as a
// program of its own (go-sdk only, no hxd code) is discovered, pinned and
// called through the Manager; the execution key reaches it in _meta.
func TestStdioBinaryFromTestdata(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "stdioserver")
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	build := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, "./testdata/stdioserver")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	m := newManager(t)
	cfg := ServerConfig{Name: "stamps", Command: []string{bin}}
	pinned, err := m.Discover(t.Context(), "agent", cfg)
	require.NoError(t, err)
	require.Len(t, pinned, 1)
	require.Equal(t, "stamps_stamp", pinned[0].Name)
	require.Equal(t, TransportStdio, pinned[0].Transport)

	tl, err := NewTool(m, "agent", cfg, pinned[0])
	require.NoError(t, err)
	res, err := call(t, tl, "run-1:1:c1", `{"text":"hello"}`)
	require.NoError(t, err)
	require.False(t, res.Result.IsError)
	require.Equal(t, "hello @run-1:1:c1", text(t, res))
}
