package runtime_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
	"hxd/internal/mcp"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/store/sqlite"
	"hxd/internal/tool"
)

// mcpServer is an in-process MCP server over streamable HTTP whose tools
// echo, fail, throttle (a transient body) and image record the execution
// key of every call.
type mcpServer struct {
	server *sdk.Server
	url    string
	mu     sync.Mutex
	keys   map[string][]string // tool → execution keys seen
}

func (s *mcpServer) seen(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys[name]...)
}

var mcpObjectSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)

// addTool adds a tool answering with h.
func (s *mcpServer) addTool(name string, h func(args map[string]string) *sdk.CallToolResult) {
	s.server.AddTool(&sdk.Tool{Name: name, Description: "The " + name + " tool.", InputSchema: mcpObjectSchema},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			key, _ := req.Params.Meta[mcp.MetaExecutionKey].(string)
			s.mu.Lock()
			s.keys[name] = append(s.keys[name], key)
			s.mu.Unlock()
			args := map[string]string{}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return h(args), nil
		})
}

func mcpText(s string, isError bool) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}, IsError: isError}
}

var mcpPNG = []byte("\x89PNG\r\n\x1a\nnot-really-an-image")

func startMCPServer(t *testing.T) *mcpServer {
	t.Helper()
	s := &mcpServer{server: sdk.NewServer(&sdk.Implementation{Name: "hxd-runtime-test", Version: "1"}, nil), keys: map[string][]string{}}
	s.addTool("echo", func(a map[string]string) *sdk.CallToolResult { return mcpText("echo: "+a["text"], false) })
	s.addTool("fail", func(map[string]string) *sdk.CallToolResult { return mcpText("the input is wrong", true) })
	s.addTool("throttle", func(map[string]string) *sdk.CallToolResult {
		return mcpText(`{"error":"upstream said slow down","status":429}`, false)
	})
	s.addTool("image", func(map[string]string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a chart"}, &sdk.ImageContent{MIMEType: "image/png", Data: mcpPNG}}}
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.server }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/mcp"
	return s
}

// mcpAgent is an agent whose scripted model makes the given calls (one
// step each), then answers "done"; its one MCP server is srv ("mx").
func mcpAgent(name string, cfg mcp.ServerConfig, calls ...model.ToolCall) *agent.Definition {
	var steps []model.ScriptStep
	for _, c := range calls {
		steps = append(steps, model.ScriptStep{ToolCalls: []model.ToolCall{c}})
	}
	steps = append(steps, model.ScriptStep{Text: "done"})
	return &agent.Definition{
		Name: name, Version: "v1",
		Model:      model.Config{Provider: "scripted", Script: steps},
		MCPServers: []mcp.ServerConfig{cfg},
	}
}

// setupMCP is setup with an MCP manager, closed at cleanup after the
// runtime stops.
func setupMCP(t *testing.T, defs ...*agent.Definition) *testBundle {
	t.Helper()
	m := mcp.NewManager(mcp.Options{Logger: hxtest.Logger(t)})
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return setupCfg(t, func(c *hxruntime.Config) { c.MCP = m }, defs...)
}

func call(id, name, text string) model.ToolCall {
	return model.ToolCall{ID: id, Name: name, Input: json.RawMessage(`{"text":"` + text + `"}`)}
}

// toolResultOf returns the tool.returned payload of the entry whose call id is id.
func toolReturned(t *testing.T, recs []journal.Record, id string) model.ToolResult {
	t.Helper()
	for _, r := range ofKind(recs, journal.KindToolReturned) {
		var res model.ToolResult
		require.NoError(t, json.Unmarshal(r.Payload, &res))
		if res.ToolCallID == id {
			return res
		}
	}
	t.Fatalf("no tool.returned for call %s", id)
	return model.ToolResult{}
}

// TestMCPToolsPinnedPerSession: a session pins the server's tools at
// creation (session resource, run.started), and the model sees exactly
// that list even after the server lists more; a call's result reaches the
// model and the execution key travels in _meta.
func TestMCPToolsPinnedPerSession(t *testing.T) {
	t.Parallel()
	srv := startMCPServer(t)
	def := mcpAgent("mcp-pin", mcp.ServerConfig{Name: "mx", URL: srv.url, Permission: "allow", ReplayPolicy: "safe", Tools: []string{"echo", "fail"}},
		call("c1", "mx_echo", "hi"))
	tb := setupMCP(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	require.Len(t, sess.MCPTools, 2)
	require.Equal(t, "mx_echo", sess.MCPTools[0].Name)
	require.Equal(t, "echo", sess.MCPTools[0].ToolName)
	require.Equal(t, "mx", sess.MCPTools[0].Server)
	require.Equal(t, "streamable_http", sess.MCPTools[0].Transport)
	got, err := tb.rt.GetSession(ctx, sess.ID)
	require.NoError(t, err)
	require.Equal(t, sess.MCPTools, got.MCPTools)

	// The server changes its list: the session keeps the pinned one.
	srv.server.RemoveTools("fail")
	srv.addTool("fresh", func(map[string]string) *sdk.CallToolResult { return mcpText("new", false) })

	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	recs := journalOf(t, tb, res.RunID)

	started := ofKind(recs, journal.KindRunStarted)
	require.Len(t, started, 1)
	var sp struct {
		MCPTools []mcp.PinnedTool `json:"mcp_tools"`
	}
	require.NoError(t, json.Unmarshal(started[0].Payload, &sp))
	require.Equal(t, sess.MCPTools, sp.MCPTools)

	for _, r := range ofKind(recs, journal.KindModelStarted) {
		var req model.Request
		require.NoError(t, json.Unmarshal(r.Payload, &req))
		var names []string
		for _, s := range req.Tools {
			names = append(names, s.Name)
		}
		require.Equal(t, []string{"mx_echo", "mx_fail"}, names, "the model sees the pinned list")
	}
	out := toolReturned(t, recs, "c1")
	require.False(t, out.IsError)
	require.Contains(t, string(out.Content), "echo: hi")
	keys := srv.seen("echo")
	require.Len(t, keys, 1)
	require.NotEmpty(t, keys[0], "the execution key travels in _meta")

	// The result reaches the model: the second model request holds it.
	reqs := ofKind(recs, journal.KindModelStarted)
	require.Len(t, reqs, 2)
	require.Contains(t, string(reqs[1].Payload), "echo: hi")

	// A new session of the same agent pins the server's new list.
	sess2, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref()})
	require.Error(t, err, "the allow-list names fail, which the server no longer has")
	require.ErrorIs(t, err, hxruntime.ErrMCPTools)
	require.ErrorIs(t, err, mcp.ErrUnknownTool)
	require.Nil(t, sess2)
}

// TestMCPResults: isError is an error result; an image becomes an
// artifact; a transient body is retried with the same execution key and,
// once retries run out, the server's result is what the model sees; a
// long result spills to an artifact.
func TestMCPResults(t *testing.T) {
	t.Parallel()
	srv := startMCPServer(t)
	def := mcpAgent("mcp-results", mcp.ServerConfig{Name: "mx", URL: srv.url, Permission: "allow", ReplayPolicy: "idempotent",
		Retry: &tool.Retry{Attempts: 2, RetryErrorResults: true}},
		call("c1", "mx_fail", ""), call("c2", "mx_image", ""), call("c3", "mx_throttle", ""), call("c4", "mx_echo", strings.Repeat("x", 500)))
	def.MaxResultChars = 200
	tb := setupMCP(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	recs := journalOf(t, tb, res.RunID)

	failed := toolReturned(t, recs, "c1")
	require.True(t, failed.IsError)
	require.Contains(t, string(failed.Content), "the input is wrong")

	img := toolReturned(t, recs, "c2")
	require.Contains(t, string(img.Content), "artifact://")
	require.NotContains(t, string(img.Content), "iVBOR", "the image bytes are not inline")

	throttled := toolReturned(t, recs, "c3")
	require.Contains(t, string(throttled.Content), "upstream said slow down", "the server's body is what the model sees")
	keys := srv.seen("throttle")
	require.Len(t, keys, 2, "retried under the server's retry policy")
	require.Equal(t, keys[0], keys[1], "with the same execution key")
	require.Len(t, ofKind(recs, journal.KindToolFailed), 2)

	// A result over max_result_chars spills as any other.
	require.Contains(t, string(toolReturned(t, recs, "c4").Content), strings.Repeat("x", 500))
	var spilled bool
	for _, r := range ofKind(recs, journal.KindToolProcessed) {
		var res model.ToolResult
		require.NoError(t, json.Unmarshal(r.Payload, &res))
		if res.ToolCallID == "c4" {
			require.Less(t, len(res.Content), 400)
			require.Contains(t, string(res.Content), "artifact://")
			spilled = true
		}
	}
	require.True(t, spilled)
}

// TestMCPApprovalGated: an MCP tool of a server with permission ask
// awaits approval, then runs once approved.
func TestMCPApprovalGated(t *testing.T) {
	t.Parallel()
	srv := startMCPServer(t)
	def := mcpAgent("mcp-ask", mcp.ServerConfig{Name: "mx", URL: srv.url}, call("c1", "mx_echo", "hi"))
	tb := setupMCP(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref()})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusAwaitingInput, res.Status)
	require.Len(t, res.Pending, 1)
	require.Equal(t, hxruntime.ToolApproval, res.Pending[0].Status)
	require.Empty(t, srv.seen("echo"), "nothing is called before the approval")
	_, err = tb.rt.Approve(ctx, hxruntime.ApproveParams{SessionID: sess.ID, ExecutionKey: res.Pending[0].ExecutionKey, Allow: true, Resume: true})
	require.NoError(t, err)
	res = waitRun(t, tb, res.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Len(t, srv.seen("echo"), 1)
}

// TestMCPSessionRefused: session creation fails for an unreachable
// server (mcp.ErrUnavailable), a bridged name clashing with an own tool,
// a scripted call of a bridged tool the server lacks, and a process
// without an MCP manager.
func TestMCPSessionRefused(t *testing.T) {
	t.Parallel()
	srv := startMCPServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadURL := "http://" + ln.Addr().String() + "/mcp"
	require.NoError(t, ln.Close())

	unreachable := mcpAgent("mcp-down", mcp.ServerConfig{Name: "mx", URL: deadURL, TimeoutSeconds: 5})
	clash := mcpAgent("mcp-clash", mcp.ServerConfig{Name: "mx", URL: srv.url})
	clash.Tools = []agent.ToolDef{{Config: tool.Config{Name: "mx_echo", Kind: "builtin", Builtin: "count"}}}
	scripted := mcpAgent("mcp-script", mcp.ServerConfig{Name: "mx", URL: srv.url}, call("c1", "mx_nope", ""))
	tb := setupMCP(t, unreachable, clash, scripted)
	ctx := context.Background()

	_, err = tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: unreachable.Ref()})
	require.ErrorIs(t, err, mcp.ErrUnavailable)
	require.Contains(t, err.Error(), `"mx"`, "the error names the server")

	_, err = tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: clash.Ref()})
	require.ErrorIs(t, err, hxruntime.ErrMCPTools)
	require.ErrorIs(t, err, mcp.ErrNameClash)

	_, err = tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: scripted.Ref()})
	require.ErrorIs(t, err, hxruntime.ErrMCPTools)
	require.ErrorIs(t, err, mcp.ErrUnknownScriptedTool)
	require.True(t, strings.Contains(err.Error(), "mx_nope"))

	plain := setup(t, clash)
	_, err = plain.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: clash.Ref()})
	require.ErrorIs(t, err, hxruntime.ErrMCPTools, "no MCP manager: refused")
}

// TestMCPPinnedAcrossRestart: another runtime on the same database (a
// restart: a new process, a new MCP manager) drives the session with the
// tools pinned at its creation, rebuilt from the stored list, although
// the server lists more tools by then.
func TestMCPPinnedAcrossRestart(t *testing.T) {
	t.Parallel()
	srv := startMCPServer(t)
	def := mcpAgent("mcp-restart", mcp.ServerConfig{Name: "mx", URL: srv.url, Permission: "allow", ReplayPolicy: "safe"},
		call("c1", "mx_echo", "hi"))
	a := setupMCP(t, def)
	ctx := context.Background()
	sess, err := a.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusCompleted, runToEnd(t, a, sess.ID, "one").Status)

	// The server lists one more tool now: a new listing would differ.
	srv.addTool("fresh", func(map[string]string) *sdk.CallToolResult { return mcpText("new", false) })

	st, err := sqlite.Open(ctx, sqlite.Config{Path: a.path, Logger: hxtest.Logger(t)})
	require.NoError(t, err)
	reg := agent.NewRegistry()
	require.NoError(t, reg.Register(def))
	m := mcp.NewManager(mcp.Options{Logger: hxtest.Logger(t)})
	b, err := hxruntime.New(hxruntime.Config{Store: st, Agents: reg, Logger: hxtest.Logger(t), MCP: m,
		SleepFunc: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Stop(context.Background()))
		require.NoError(t, m.Close())
		require.NoError(t, st.Close())
	})
	run, created, err := b.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("two")})
	require.NoError(t, err)
	require.True(t, created)
	res, err := b.WaitRun(ctx, run.RunID, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)

	var pinned []string
	for _, p := range sess.MCPTools {
		pinned = append(pinned, p.Name)
	}
	require.Equal(t, []string{"mx_echo", "mx_fail", "mx_image", "mx_throttle"}, pinned)
	recs := journalOf(t, a, res.RunID)
	for _, r := range ofKind(recs, journal.KindModelStarted) {
		var req model.Request
		require.NoError(t, json.Unmarshal(r.Payload, &req))
		var names []string
		for _, s := range req.Tools {
			names = append(names, s.Name)
		}
		require.Equal(t, pinned, names, "the pinned list, not a new listing")
	}
	require.Contains(t, string(toolReturned(t, recs, "c1").Content), "echo: hi")
	require.Len(t, srv.seen("echo"), 2)
}
