package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeMCPDemoEndToEnd: `serve --demo` registers the mcp-demo agent,
// whose MCP server is this binary run as `hxd mcp-demo-server` (stdio); a
// recorded session pins its tools, the scripted model calls the bridged
// upper, the result reaches the model, and the run's export
// verifies (over HTTP and with `hxd verify`).
func TestServeMCPDemoEndToEnd(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"))

	resp, body := d.do(t, http.MethodGet, "/agents/mcp-demo/v1", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	servers := decode(t, body)["mcp_servers"].([]any)
	require.Len(t, servers, 1)
	srv := servers[0].(map[string]any)
	require.Equal(t, "demo", srv["name"])
	require.Equal(t, "stdio", srv["transport"])
	require.NotContains(t, string(body), mcpDemoServerCmd, "the command is never shown")

	resp, body = d.do(t, http.MethodPost, "/sessions", map[string]any{
		"agent": map[string]string{"name": "mcp-demo", "version": "v1"}, "recording": true,
	})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sess := decode(t, body)
	sid := sess["session_id"].(string)
	var names []string
	for _, m := range sess["mcp_tools"].([]any) {
		tl := m.(map[string]any)
		names = append(names, tl["name"].(string))
		require.Equal(t, "demo", tl["server"])
		require.Equal(t, "stdio", tl["transport"])
	}
	require.ElementsMatch(t, []string{"demo_word_count", "demo_upper"}, names)
	resp, body = d.do(t, http.MethodGet, "/sessions/"+sid, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Len(t, decode(t, body)["mcp_tools"], 2)

	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs?wait=30", map[string]any{"message": "How many words?"})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	run := decode(t, body)
	require.Equal(t, "completed", run["status"], string(body))
	require.Equal(t, "The MCP server answered: HELLO FROM AN MCP SERVER", run["output"])
	rid := run["run_id"].(string)

	resp, body = d.do(t, http.MethodGet, "/runs/"+rid+"/events?after=0", nil, "Accept", "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"content":"HELLO FROM AN MCP SERVER"`, "the server's result reaches the run")

	resp, data := export(t, d, rid, map[string]any{"include_payloads": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	rep := verifyOverHTTP(t, d, data)
	require.True(t, rep.Valid, "%+v", rep)
	require.True(t, rep.Complete, "%+v", rep)
	path := filepath.Join(t.TempDir(), "mcp.hx")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	res := runCLI(t, "verify", path)
	require.Equal(t, 0, res.code, "%s%s", res.stdout, res.stderr)
}

// TestServeMCPUnreachable: a session of an agent whose MCP server cannot
// be started is 422 mcp_unavailable naming the server, without its
// command or environment.
func TestServeMCPUnreachable(t *testing.T) {
	t.Parallel()
	agents := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(agents, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(agents, "down.yaml"), []byte(`name: mcp-down
version: v1
model:
  provider: scripted
  script:
    - text: hi
mcp_servers:
  - name: gone
    command: [/nonexistent/mcp-server-binary, --token-file, /secret/path]
    env: {GONE_TOKEN: literal-secret-value}
`), 0o600))
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), "--agents", agents)
	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]string{"name": "mcp-down", "version": "v1"}})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "mcp_unavailable")
	require.Contains(t, string(body), `gone`)
	for _, secret := range []string{"literal-secret-value", "/secret/path"} {
		require.NotContains(t, string(body), secret)
	}
}
