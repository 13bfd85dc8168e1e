package mcp

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/model"
	"hxd/internal/tool"
)

// testEnv is the environment hxd "has" in the tests (LookupEnvFunc).
var testEnv = map[string]string{
	"PATH":            "/usr/bin:/bin",
	"HOME":            "/home/hxd-test",
	"HXD_TEST_TOKEN":  "Bearer sekrit-token",
	"HXD_TEST_FROM":   "value-from-hxd",
	"HXD_TEST_UNUSED": "never-passed",
}

// lookupTestEnv reads testEnv.
func lookupTestEnv(k string) (string, bool) {
	v, ok := testEnv[k]
	return v, ok
}

// newManager returns a Manager closed at the end of the test.
func newManager(t *testing.T) *Manager {
	t.Helper()
	m := NewManager(Options{Logger: hxtest.Logger(t), LookupEnvFunc: lookupTestEnv})
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

// stdioConfig is a stdio server running the test binary in mode.
func stdioConfig(t *testing.T, name, mode string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return ServerConfig{Name: name, Command: []string{exe}, Env: map[string]string{serverModeEnv: mode}}
}

// discoverTool discovers cfg and returns the tool registered as name.
func discoverTool(t *testing.T, m *Manager, cfg ServerConfig, name string) tool.Tool {
	t.Helper()
	pinned, err := m.Discover(t.Context(), "agent", cfg)
	require.NoError(t, err)
	i := slices.IndexFunc(pinned, func(p PinnedTool) bool { return p.Name == name })
	require.GreaterOrEqual(t, i, 0, "tool %s not discovered", name)
	tl, err := NewTool(m, "agent", cfg, pinned[i])
	require.NoError(t, err)
	return tl
}

// call runs one attempt of tl with input.
func call(t *testing.T, tl tool.Tool, key, input string) (tool.Outcome, error) {
	t.Helper()
	return tl.Call(t.Context(), tool.Invocation{
		SessionID: "s", RunID: "r", ExecutionKey: key, Attempt: 1,
		Call: model.ToolCall{ID: "c1", Name: tl.Config().Name, Input: json.RawMessage(input)},
	})
}

// text returns a result's text content.
func text(t *testing.T, out tool.Outcome) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(out.Result.Content, &s), "content %s", out.Result.Content)
	return s
}

// currentPID returns the pid of the stdio child of (agent, server).
func currentPID(t *testing.T, m *Manager, server string) int {
	t.Helper()
	m.mu.Lock()
	c := m.conns[connKey{"agent", server}]
	m.mu.Unlock()
	require.NotNil(t, c)
	l := c.live()
	require.NotNil(t, l)
	return l.child.cmd.Process.Pid
}

// requireGone fails unless pid no longer exists.
func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "pid %d still exists", pid)
}

func TestDiscoverStreamableHTTP(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamable")
	m := newManager(t)
	cfg := ServerConfig{Name: "web", URL: srv.url, HeadersEnv: map[string]string{"Authorization": "HXD_TEST_TOKEN"}}
	pinned, err := m.Discover(t.Context(), "agent", cfg)
	require.NoError(t, err)
	require.Len(t, pinned, 11)
	echo := pinned[slices.IndexFunc(pinned, func(p PinnedTool) bool { return p.ToolName == "echo" })]
	require.Equal(t, PinnedTool{
		Name: "web_echo", ToolName: "echo", Description: "[MCP:web] Echo the text.",
		InputSchema: json.RawMessage(`{"properties":{"fifo":{"type":"string"},"text":{"type":"string"}},"type":"object"}`),
		Server:      "web", Transport: TransportStreamableHTTP,
	}, echo)
	// The pin is data: it survives a JSON round trip unchanged.
	b, err := json.Marshal(pinned)
	require.NoError(t, err)
	var back []PinnedTool
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, pinned, back)

	headers := srv.seenHeaders()
	require.NotEmpty(t, headers)
	for _, h := range headers {
		require.Equal(t, "Bearer sekrit-token", h.Get("Authorization"))
	}
}

func TestDiscoverAllowList(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamable")
	m := newManager(t)
	cfg := ServerConfig{Name: "web", URL: srv.url, Tools: []string{"pid", "echo"}}
	pinned, err := m.Discover(t.Context(), "agent", cfg)
	require.NoError(t, err)
	var names []string
	for _, p := range pinned {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"web_echo", "web_pid"}, names) // server order

	cfg.Tools = []string{"echo", "read_file", "search"}
	_, err = m.Discover(t.Context(), "agent", cfg)
	require.ErrorIs(t, err, ErrUnknownTool)
	var me *MissingToolsError
	require.ErrorAs(t, err, &me)
	require.Equal(t, []string{"read_file", "search"}, me.Tools)
	require.Contains(t, err.Error(), `"read_file"`)
	require.Contains(t, err.Error(), `"web"`)
}

func TestPinnedListOutlivesServerChange(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamable")
	m := newManager(t)
	cfg := ServerConfig{Name: "web", URL: srv.url}
	pinned, err := m.Discover(t.Context(), "agent", cfg)
	require.NoError(t, err)
	before, err := json.Marshal(pinned)
	require.NoError(t, err)

	srv.server.RemoveTools("fail", "image")
	again, err := m.Discover(t.Context(), "agent", cfg)
	require.NoError(t, err)
	require.Len(t, again, len(pinned)-2, "the server's list changed")

	after, err := json.Marshal(pinned)
	require.NoError(t, err)
	require.JSONEq(t, string(before), string(after))
	// A tool of the old pin is still built and called from the pin.
	i := slices.IndexFunc(pinned, func(p PinnedTool) bool { return p.ToolName == "echo" })
	tl, err := NewTool(m, "agent", cfg, pinned[i])
	require.NoError(t, err)
	out, err := call(t, tl, "k1", `{"text":"still here"}`)
	require.NoError(t, err)
	require.Equal(t, "still here", text(t, out))
	// A pinned tool the server dropped answers with an error result.
	i = slices.IndexFunc(pinned, func(p PinnedTool) bool { return p.ToolName == "fail" })
	gone, err := NewTool(m, "agent", cfg, pinned[i])
	require.NoError(t, err)
	out, err = call(t, gone, "k2", `{}`)
	require.NoError(t, err)
	require.True(t, out.Result.IsError)
	require.Contains(t, text(t, out), `MCP server "web" refused the call: JSON-RPC error`)
}

func TestDiscoverUnavailable(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamable")
	m := newManager(t)
	cases := map[string]ServerConfig{
		"http": {Name: "gone", URL: "http://127.0.0.1:1/mcp?token=url-secret", HeadersEnv: map[string]string{"Authorization": "HXD_TEST_TOKEN"}},
		"stdio exits": func() ServerConfig {
			c := stdioConfig(t, "gone", "exit")
			c.EnvFrom = map[string]string{"TOKEN": "HXD_TEST_FROM"}
			return c
		}(),
		"stdio missing program": {Name: "gone", Command: []string{filepath.Join(t.TempDir(), "no-such-server")}},
		"env_from unset":        {Name: "gone", Command: []string{"/bin/true"}, EnvFrom: map[string]string{"TOKEN": "HXD_TEST_NOT_SET"}},
		"headers_env unset":     {Name: "gone", URL: srv.url, HeadersEnv: map[string]string{"Authorization": "HXD_TEST_NOT_SET"}},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := m.Discover(t.Context(), name, cfg)
			require.ErrorIs(t, err, ErrUnavailable)
			var ue *UnavailableError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, "gone", ue.Server)
			msg := err.Error()
			require.Contains(t, msg, `"gone"`)
			for _, secret := range []string{"sekrit", "url-secret", "value-from-hxd"} {
				require.NotContains(t, msg, secret)
			}
		})
	}
}

func TestDiscoverSSEFallback(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "sse")
	m := newManager(t)
	cfg := ServerConfig{Name: "legacy", URL: srv.url}
	tl := discoverTool(t, m, cfg, "legacy_echo")
	out, err := call(t, tl, "k1", `{"text":"over sse"}`)
	require.NoError(t, err)
	require.Equal(t, "over sse", text(t, out))
	pinned, err := m.Discover(t.Context(), "agent", cfg)
	require.NoError(t, err)
	require.Equal(t, TransportSSE, pinned[0].Transport)
}

func TestProtocol20251125Sessions(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "stateful-2025")
	m := newManager(t)
	cfg := ServerConfig{Name: "old", URL: srv.url}
	tl := discoverTool(t, m, cfg, "old_meta")
	out, err := call(t, tl, "run:1:c1", `{}`)
	require.NoError(t, err)
	require.Equal(t, "run:1:c1", text(t, out))

	m.mu.Lock()
	l := m.conns[connKey{"agent", "old"}].cur
	m.mu.Unlock()
	require.Equal(t, "2025-11-25", l.session.InitializeResult().ProtocolVersion)
	require.NotEmpty(t, l.session.ID(), "a stateful server gives a session id")
	var withSession int
	for _, h := range srv.seenHeaders() {
		if h.Get("Mcp-Session-Id") == l.session.ID() {
			withSession++
		}
	}
	require.Positive(t, withSession)
}

func TestCallResults(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamable")
	m := newManager(t)
	cfg := ServerConfig{Name: "web", URL: srv.url}
	pinned, err := m.Discover(t.Context(), "agent", cfg)
	require.NoError(t, err)
	tools := map[string]tool.Tool{}
	for _, p := range pinned {
		tl, err := NewTool(m, "agent", cfg, p)
		require.NoError(t, err)
		tools[p.ToolName] = tl
	}

	t.Run("text", func(t *testing.T) {
		out, err := call(t, tools["echo"], "k-echo", `{"text":"{\"json\":\"stays text\"}"}`)
		require.NoError(t, err)
		require.False(t, out.Result.IsError)
		require.Equal(t, "c1", out.Result.ToolCallID)
		require.Equal(t, `{"json":"stays text"}`, text(t, out))
	})
	t.Run("meta execution key", func(t *testing.T) {
		out, err := call(t, tools["meta"], "run-7:3:call-9", `{}`)
		require.NoError(t, err)
		require.Equal(t, "run-7:3:call-9", text(t, out))
		require.Contains(t, srv.calls.all(), "run-7:3:call-9")
	})
	t.Run("isError", func(t *testing.T) {
		out, err := call(t, tools["fail"], "k-fail", `{}`)
		require.NoError(t, err)
		require.True(t, out.Result.IsError)
		require.Equal(t, "the input is wrong", text(t, out))
	})
	t.Run("transient body", func(t *testing.T) {
		out, err := call(t, tools["throttle"], "k-throttle", `{}`)
		var f *tool.Failure
		require.ErrorAs(t, err, &f)
		require.True(t, f.Transient)
		require.False(t, f.MayHaveRun)
		require.Equal(t, "TransientToolError", f.Type)
		require.NotContains(t, f.Message, "slow down", "the body stays out of the message")
		require.Equal(t, `{"error":"upstream said slow down","status":429}`, text(t, out))
	})
	t.Run("image", func(t *testing.T) {
		out, err := call(t, tools["image"], "k-image", `{}`)
		require.NoError(t, err)
		require.Equal(t, []tool.Artifact{{MediaType: "image/png", Data: pngBytes}}, out.Artifacts)
		require.Equal(t, "a chart\n[artifact 1: image image/png, "+strconv.Itoa(len(pngBytes))+" bytes]", text(t, out))
	})
	t.Run("structured", func(t *testing.T) {
		out, err := call(t, tools["structured"], "k-structured", `{}`)
		require.NoError(t, err)
		require.JSONEq(t, `{"n":1}`, string(out.Result.Content))
	})
	t.Run("input validated against the pin", func(t *testing.T) {
		require.NoError(t, tools["echo"].ValidateInput(json.RawMessage(`{"text":"x"}`)))
		require.ErrorContains(t, tools["echo"].ValidateInput(json.RawMessage(`{"text":5}`)), "/text")
	})
	t.Run("config", func(t *testing.T) {
		c := tools["echo"].Config()
		require.Equal(t, "web_echo", c.Name)
		require.Equal(t, KindMCP, c.Kind)
		require.Equal(t, tool.PermissionAsk, c.Permission)
		require.Equal(t, tool.PolicyManual, c.ReplayPolicy)
		require.InDelta(t, 60.0, c.TimeoutSeconds, 0)
		require.Equal(t, DefaultRetry, *c.Retry)
		require.Equal(t, "[MCP:web] Echo the text.", tools["echo"].Spec().Description)
	})
}

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamable")
	m := newManager(t)
	cfg := ServerConfig{Name: "web", URL: srv.url, TimeoutSeconds: 0.2}
	tl := discoverTool(t, m, cfg, "web_block")
	_, err := call(t, tl, "k1", `{}`)
	var f *tool.Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, "TimeoutError", f.Type)
	require.True(t, f.MayHaveRun)
	require.True(t, f.Transient)

	// The connection still serves the next call.
	echo := discoverTool(t, m, cfg, "web_echo")
	out, err := call(t, echo, "k2", `{"text":"after"}`)
	require.NoError(t, err)
	require.Equal(t, "after", text(t, out))
}

func TestStdioChildEnv(t *testing.T) {
	t.Setenv("HXD_TEST_PARENT_SECRET", "parent-secret")
	m := newManager(t)
	cfg := stdioConfig(t, "files", "test")
	cfg.Env["LITERAL"] = "lit"
	cfg.EnvFrom = map[string]string{"FROM_HXD": "HXD_TEST_FROM"}
	tl := discoverTool(t, m, cfg, "files_env")
	out, err := call(t, tl, "k1", `{}`)
	require.NoError(t, err)
	env := strings.Split(text(t, out), "\n")
	slices.Sort(env)
	require.Equal(t, []string{
		"FROM_HXD=value-from-hxd",
		"HOME=/home/hxd-test",
		serverModeEnv + "=test",
		"LITERAL=lit",
		"PATH=/usr/bin:/bin",
	}, env)
}

func TestStdioKilledMidCallRestarts(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	cfg := stdioConfig(t, "files", "test")
	block := discoverTool(t, m, cfg, "files_block")
	pidTool := discoverTool(t, m, cfg, "files_pid")
	first := currentPID(t, m, "files")

	fifo := filepath.Join(t.TempDir(), "started")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	type result struct {
		out tool.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := call(t, block, "k1", `{"fifo":`+strconv.Quote(fifo)+`}`)
		done <- result{out, err}
	}()
	f, err := os.Open(fifo) // blocks until the child opened it
	require.NoError(t, err)
	line, err := bufio.NewReader(f).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "started\n", line)
	require.NoError(t, f.Close())

	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	res := <-done
	var fl *tool.Failure
	require.ErrorAs(t, res.err, &fl)
	require.Equal(t, "ConnectionError", fl.Type)
	require.True(t, fl.MayHaveRun, "the call was in flight")
	require.True(t, fl.Transient)

	// The next call restarts the child.
	out, err := call(t, pidTool, "k2", `{}`)
	require.NoError(t, err)
	second, err := strconv.Atoi(text(t, out))
	require.NoError(t, err)
	require.NotEqual(t, first, second)
	require.Equal(t, second, currentPID(t, m, "files"))
	requireGone(t, first)
}

func TestStdioFloodIsCutOff(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	cfg := stdioConfig(t, "files", "test")
	flood := discoverTool(t, m, cfg, "files_flood")
	echo := discoverTool(t, m, cfg, "files_echo")
	first := currentPID(t, m, "files")

	_, err := call(t, flood, "k1", `{}`)
	var f *tool.Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, "MCPError", f.Type)
	require.True(t, f.MayHaveRun)
	require.ErrorIs(t, err, ErrReplyTooLarge)
	require.Contains(t, f.Message, "cut off")
	requireGone(t, first)

	out, err := call(t, echo, "k2", `{"text":"back"}`)
	require.NoError(t, err)
	require.Equal(t, "back", text(t, out))

	// Garbage on stdout breaks the connection too; the next call restarts.
	second := currentPID(t, m, "files")
	_, err = call(t, flood, "k3", `{"text":"garbage"}`)
	require.ErrorAs(t, err, &f)
	require.Equal(t, "ConnectionError", f.Type)
	require.True(t, f.MayHaveRun)
	out, err = call(t, echo, "k4", `{"text":"back again"}`)
	require.NoError(t, err)
	require.Equal(t, "back again", text(t, out))
	require.NotEqual(t, second, currentPID(t, m, "files"))
	requireGone(t, second)
}

func TestCloseWaitsForChildren(t *testing.T) {
	t.Parallel()
	m := NewManager(Options{Logger: hxtest.Logger(t), LookupEnvFunc: lookupTestEnv})
	var pids []int
	for _, name := range []string{"one", "two"} {
		cfg := stdioConfig(t, name, "test")
		tl := discoverTool(t, m, cfg, name+"_echo")
		_, err := call(t, tl, "k", `{"text":"x"}`)
		require.NoError(t, err)
		pids = append(pids, currentPID(t, m, name))
	}
	// Two agents share nothing: each gets its own child.
	_, err := m.Discover(t.Context(), "other-agent", stdioConfig(t, "one", "test"))
	require.NoError(t, err)
	m.mu.Lock()
	pids = append(pids, m.conns[connKey{"other-agent", "one"}].cur.child.cmd.Process.Pid)
	m.mu.Unlock()
	require.Len(t, pids, 3)

	require.NoError(t, m.Close())
	for _, pid := range pids {
		requireGone(t, pid)
	}
	_, err = m.Discover(t.Context(), "agent", stdioConfig(t, "one", "test"))
	require.ErrorIs(t, err, ErrClosed)
}

func TestSharedConnectionPerAgent(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	cfg := stdioConfig(t, "files", "test")
	a := discoverTool(t, m, cfg, "files_pid")
	b := discoverTool(t, m, cfg, "files_pid") // a second session of the same agent
	outA, err := call(t, a, "k1", `{}`)
	require.NoError(t, err)
	outB, err := call(t, b, "k2", `{}`)
	require.NoError(t, err)
	require.Equal(t, text(t, outA), text(t, outB))
}

func TestCallAfterCloseFails(t *testing.T) {
	t.Parallel()
	srv := startHTTPServer(t, "streamable")
	m := NewManager(Options{Logger: hxtest.Logger(t)})
	cfg := ServerConfig{Name: "web", URL: srv.url}
	tl := discoverTool(t, m, cfg, "web_echo")
	require.NoError(t, m.Close())
	_, err := call(t, tl, "k1", `{"text":"x"}`)
	var f *tool.Failure
	require.ErrorAs(t, err, &f)
	require.False(t, f.MayHaveRun)
	require.True(t, errors.Is(err, ErrClosed))
}

func TestReplyOverLimit(t *testing.T) {
	t.Parallel()
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		m := newManager(t)
		cfg := stdioConfig(t, "files", "test")
		big := discoverTool(t, m, cfg, "files_big")
		first := currentPID(t, m, "files")
		_, err := call(t, big, "k1", `{}`)
		var f *tool.Failure
		require.ErrorAs(t, err, &f)
		require.Equal(t, "MCPError", f.Type)
		require.True(t, f.MayHaveRun)
		require.ErrorIs(t, err, ErrReplyTooLarge)
		requireGone(t, first)
	})
	t.Run("streamable HTTP", func(t *testing.T) {
		t.Parallel()
		srv := startHTTPServer(t, "streamable")
		m := newManager(t)
		cfg := ServerConfig{Name: "web", URL: srv.url}
		big := discoverTool(t, m, cfg, "web_big")
		_, err := call(t, big, "k1", `{}`)
		var f *tool.Failure
		require.ErrorAs(t, err, &f)
		require.True(t, f.MayHaveRun)
		// The next call gets a new connection.
		echo := discoverTool(t, m, cfg, "web_echo")
		out, err := call(t, echo, "k2", `{"text":"fine"}`)
		require.NoError(t, err)
		require.Equal(t, "fine", text(t, out))
	})
}
