package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
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

// TestCrashMCPAfterDispatch: a crash-matrix point for an MCP tool. hxd
// exits (42) right after committing tool.dispatched of a bridged call; a
// fresh process on the same database rebuilds the session's tools from
// the pinned list and resumes: safe (the mcp-demo agent) re-executes the
// call and completes; manual awaits a decision (uncertain), and completes
// once resolved.
func TestCrashMCPAfterDispatch(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	manual := fmt.Sprintf(`name: mcp-manual
version: v1
model:
  provider: scripted
  script:
    - tool_calls: [{id: u1, name: demo_upper, input: {text: abc}}]
    - text: done
mcp_servers:
  - name: demo
    command: [%q, %s]
    permission: allow
    replay_policy: manual
`, exe, mcpDemoServerCmd)
	for _, tc := range []struct{ agent, policy, want string }{
		{"mcp-demo", "safe", "HELLO FROM AN MCP SERVER"}, {"mcp-manual", "manual", "ABC"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			agents := filepath.Join(t.TempDir(), "agents")
			require.NoError(t, os.MkdirAll(agents, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(agents, "mcp-manual.yaml"), []byte(manual), 0o600))
			db := filepath.Join(t.TempDir(), "hxd.db")
			argv := []string{"serve", "--demo", "--addr", "127.0.0.1:0", "--db", db, "--agents", agents,
				"--workdir", filepath.Dir(db), "--shutdown-timeout", "500ms"}

			p1 := spawnHxdArgs(t, "process 1", argv, "HXD_CRASH_AFTER=tool.dispatched")
			p1.awaitListening()
			sid := p1.createSession(tc.agent)
			_, _, _ = p1.try(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "go"})
			require.Equal(t, 42, p1.waitExit(15*time.Second))

			p := spawnHxdArgs(t, "final process", argv)
			p.awaitListening()
			rid := p.latestRunID(sid)
			run := p.settle(rid)
			if tc.policy == "manual" {
				require.Equal(t, "awaiting_input", run["status"], run)
				pending := run["pending"].([]any)
				require.Len(t, pending, 1, run)
				entry := pending[0].(map[string]any)
				require.Equal(t, "uncertain", entry["status"], entry)
				key := entry["execution_key"].(string)
				code, m := p.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/tools/"+url.PathEscape(key)+"/resolve",
					map[string]any{"resume": true, "retry": true})
				require.Equal(t, http.StatusOK, code, m)
				run = p.settle(rid)
			}
			require.Equal(t, "completed", run["status"], run)
			recs := readJournal(t, db, rid)
			var returned []string
			for _, r := range recs {
				if r.Kind == journal.KindToolReturned {
					returned = append(returned, string(r.Payload))
				}
			}
			require.Len(t, returned, 1, boundaryTrace(recs))
			require.Contains(t, returned[0], tc.want, "the call ran after the restart")
			p.stop()
		})
	}
}
