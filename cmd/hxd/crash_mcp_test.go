package main

// MCP process-lifetime guarantees (issue 21): hxd SIGKILLed with an MCP
// call in flight resumes by the server's replay policy; a stdio MCP child
// never outlives a SIGKILLed hxd; a graceful stop waits for the children.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/mcp"
)

// mcpLingerServerCmd makes this test binary the demo MCP server over its
// stdio (the stdio child of the tests below). After stdin closes it
// lingers forever when HXD_TEST_MCP_LINGER=1 (a server that ignores EOF:
// only the parent-death signal ends it), or, when HXD_TEST_MCP_EXITED
// names a file, takes a moment to shut down, writes the file and exits 0.
const mcpLingerServerCmd = "mcp-linger-server"

func init() {
	if len(os.Args) == 2 && os.Args[1] == mcpLingerServerCmd {
		os.Exit(runLingerServer())
	}
}

// runLingerServer serves the demo tools until stdin closes, then lingers
// or exits as the environment says.
func runLingerServer() int {
	if err := mcp.RunDemoServer(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "linger server:", err)
	}
	if os.Getenv("HXD_TEST_MCP_LINGER") == "1" {
		for {
			time.Sleep(time.Hour)
		}
	}
	if p := os.Getenv("HXD_TEST_MCP_EXITED"); p != "" {
		// A slow graceful shutdown: a parent that does not wait kills us
		// (Pdeathsig) before the file is written.
		time.Sleep(300 * time.Millisecond)
		if err := os.WriteFile(p, []byte("exited\n"), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "linger server:", err)
			return 1
		}
	}
	return 0
}

// slowMCPServer is an in-process streamable-HTTP MCP server whose tool
// `wait` blocks on its first call (until the test ends) and answers every
// later one; it records the execution key of each call's _meta.
type slowMCPServer struct {
	url     string
	arrived chan struct{} // closed when the first call arrives
	release chan struct{} // closed at cleanup: the blocked call returns

	mu   sync.Mutex
	keys []string
}

func newSlowMCPServer(t *testing.T) *slowMCPServer {
	t.Helper()
	s := &slowMCPServer{arrived: make(chan struct{}), release: make(chan struct{})}
	server := sdk.NewServer(&sdk.Implementation{Name: "slow", Version: "1"}, nil)
	server.AddTool(&sdk.Tool{Name: "wait", Description: "Answer, slowly the first time.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			key, _ := req.Params.Meta[mcp.MetaExecutionKey].(string)
			s.mu.Lock()
			s.keys = append(s.keys, key)
			n := len(s.keys)
			s.mu.Unlock()
			if n == 1 {
				close(s.arrived)
				select {
				case <-ctx.Done():
				case <-s.release:
				}
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "too late"}}, IsError: true}, nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "waited " + strconv.Itoa(n)}}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(func() {
		srv.Close()
		// The SIGKILLed hxd never ended its MCP session: end it here.
		for ss := range server.Sessions() {
			_ = ss.Close()
		}
	})
	t.Cleanup(func() { close(s.release) }) // runs first
	s.url = srv.URL + "/mcp"
	return s
}

func (s *slowMCPServer) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// writeAgentFile writes one agent file into a new agents folder.
func writeAgentFile(t *testing.T, name, body string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(body), 0o600))
	return dir
}

// TestCrashMCPInFlight: hxd is SIGKILLed while the MCP server holds the
// call (the request went out, no answer came back); a fresh process on the
// same database resumes by the server's replay policy: manual makes the
// call uncertain and the run awaits a decision; safe sends the call again,
// once, with the same execution key in _meta, and the run completes. The
// journal is gap-free and the export verifies.
func TestCrashMCPInFlight(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"safe", "manual"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			srv := newSlowMCPServer(t)
			name := "mcp-slow-" + policy
			agents := writeAgentFile(t, name, fmt.Sprintf(`name: %s
version: v1
model:
  provider: scripted
  script:
    - tool_calls: [{id: s1, name: slow_wait, input: {text: abc}}]
    - text: done
mcp_servers:
  - name: slow
    url: %s
    permission: allow
    replay_policy: %s
    timeout_seconds: 60
`, name, srv.url, policy))
			db := filepath.Join(t.TempDir(), "hxd.db")

			p1 := startHxd(t, "process 1", db, agents)
			sid := p1.createSession(name)
			code, m := p1.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "go"})
			require.Equal(t, http.StatusAccepted, code, m)
			rid := m["run_id"].(string)
			select {
			case <-srv.arrived:
			case <-time.After(30 * time.Second):
				t.Fatal("the MCP call never reached the server")
			}
			p1.kill()

			key := rid + ":1:s1"
			p := startHxd(t, "final process", db, agents)
			run := p.settle(rid)
			if policy == "manual" {
				require.Equal(t, "awaiting_input", run["status"], run)
				pending := run["pending"].([]any)
				require.Len(t, pending, 1, run)
				entry := pending[0].(map[string]any)
				require.Equal(t, "uncertain", entry["status"], entry)
				require.Equal(t, key, entry["execution_key"], entry)
				require.Equal(t, "manual", entry["policy"], entry)
				require.Equal(t, 1, count(p.eventTypes(rid), "recovery_required"))
				require.Equal(t, []string{key}, srv.calls(), "a manual call in flight is never sent again by itself")
				code, m := p.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/tools/"+url.PathEscape(key)+"/resolve",
					map[string]any{"resume": true, "result": map[string]any{"tool_call_id": "s1", "content": "checked by operator", "is_error": false}})
				require.Equal(t, http.StatusOK, code, m)
				run = p.settle(rid)
			}
			require.Equal(t, "completed", run["status"], run)
			require.Equal(t, "done", run["output"], run)
			p.stop()

			recs := readJournal(t, db, rid) // gap-free, and the export verifies
			trace := boundaryTrace(recs)
			var started []string
			for _, r := range ofKind(recs, journal.KindToolStarted, key) {
				started = append(started, r.AttemptID)
			}
			returned := ofKind(recs, journal.KindToolReturned, key)
			require.Len(t, ofKind(recs, journal.KindToolProcessed, key), 1, trace)
			if policy == "manual" {
				require.Equal(t, []string{key}, srv.calls())
				require.Equal(t, []string{"1"}, started, trace)
				require.Empty(t, returned, trace)
				require.Len(t, ofKind(recs, journal.KindToolResolved, key), 1, trace)
				return
			}
			require.Equal(t, []string{key, key}, srv.calls(), "safe: sent again once, with the same execution key")
			require.Equal(t, []string{"1", "2"}, started, trace)
			require.Len(t, returned, 1, trace)
			require.Equal(t, "2", returned[0].AttemptID, trace)
			require.Contains(t, string(returned[0].Payload), "waited 2")
		})
	}
}

// lingerAgent is an agent whose stdio MCP server is this test binary as
// mcpLingerServerCmd with env.
func lingerAgent(t *testing.T, env map[string]string) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	envJSON, err := json.Marshal(env)
	require.NoError(t, err)
	return writeAgentFile(t, "mcp-linger", fmt.Sprintf(`name: mcp-linger
version: v1
model:
  provider: scripted
  script:
    - text: hi
mcp_servers:
  - name: linger
    command: [%q, %s]
    env: %s
    permission: allow
`, exe, mcpLingerServerCmd, envJSON))
}

// procStat is what /proc/<pid>/stat says of a process: its parent, state
// and start time (to tell a reused pid apart).
type procStat struct {
	ppid  int
	state string
	start string
}

// readProcStat reads /proc/<pid>/stat; ok is false once the pid is gone.
func readProcStat(pid int) (procStat, bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')') // comm may hold spaces
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, false
	}
	return procStat{ppid: ppid, state: f[0], start: f[19]}, true
}

// mcpChildOf returns the pid and start time of the linger server that is
// a child of parent.
func mcpChildOf(t *testing.T, parent int) (int, string) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readProcStat(pid)
		if !ok || st.ppid != parent {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), mcpLingerServerCmd) {
			return pid, st.start
		}
	}
	t.Fatalf("no %s child of hxd pid %d", mcpLingerServerCmd, parent)
	return 0, ""
}

// requireGone waits (≤ 10 s) until the process pid started at start is
// gone or a zombie, and fails otherwise (killing it, so nothing leaks).
func requireGone(t *testing.T, pid int, start string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, ok := readProcStat(pid)
		if !ok || st.start != start || st.state == "Z" {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("MCP server pid %d still alive (state %s, parent %d)", pid, st.state, st.ppid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCrashMCPNoOrphanChild: a stdio MCP server of a SIGKILLed hxd does
// not live on, even one that ignores its closed stdin: hxd's children get
// SIGKILL when hxd dies (Pdeathsig).
func TestCrashMCPNoOrphanChild(t *testing.T) {
	t.Parallel()
	agents := lingerAgent(t, map[string]string{"HXD_TEST_MCP_LINGER": "1"})
	p := startHxd(t, "hxd", filepath.Join(t.TempDir(), "hxd.db"), agents)
	p.createSession("mcp-linger") // connects: the server runs
	pid, start := mcpChildOf(t, p.cmd.Process.Pid)
	p.kill()
	requireGone(t, pid, start)
}

// TestServeMCPStopWaitsForChildren: on SIGTERM `hxd serve` closes its MCP
// connections and waits for its stdio children: the server saw its stdin
// close and finished its own (slow) shutdown before hxd exited 0.
func TestServeMCPStopWaitsForChildren(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "exited")
	agents := lingerAgent(t, map[string]string{"HXD_TEST_MCP_EXITED": marker})
	p := startHxd(t, "hxd", filepath.Join(t.TempDir(), "hxd.db"), agents)
	p.createSession("mcp-linger")
	pid, start := mcpChildOf(t, p.cmd.Process.Pid)
	p.stop() // exit code 0
	_, err := os.Stat(marker)
	require.NoError(t, err, "hxd exited before its MCP server finished exiting")
	requireGone(t, pid, start)
}
