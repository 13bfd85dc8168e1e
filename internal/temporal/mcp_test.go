package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"hxd/internal/agent"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// mcpServer is an in-process MCP server over streamable HTTP (the go-sdk's
// handler), as internal/mcp's tests build them: tools echo, meta (returns
// the execution key of its _meta), image and throttle, or the tools named
// to newMCPServer (each echoes).
type mcpServer struct {
	server *sdk.Server
	url    string

	mu    sync.Mutex
	keys  []string // execution keys of the calls, in order
	lists int      // tools/list requests
}

// mcpObjectSchema is the input schema of the test tools.
var mcpObjectSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)

func newMCPServer(t *testing.T, names ...string) *mcpServer {
	t.Helper()
	s := &mcpServer{server: sdk.NewServer(&sdk.Implementation{Name: "hxd-temporal-test", Version: "1"}, nil)}
	s.server.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "tools/list" {
				s.mu.Lock()
				s.lists++
				s.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	if len(names) == 0 {
		names = []string{"echo", "meta", "image", "throttle"}
	}
	for _, n := range names {
		s.addTool(n, "Tool "+n+".")
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.server }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.url = srv.URL + "/mcp"
	return s
}

// addTool adds (or replaces) the tool name with description desc.
func (s *mcpServer) addTool(name, desc string) {
	s.server.AddTool(&sdk.Tool{Name: name, Description: desc, InputSchema: mcpObjectSchema},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			key, _ := req.Params.Meta[mcp.MetaExecutionKey].(string)
			s.mu.Lock()
			s.keys = append(s.keys, key)
			s.mu.Unlock()
			var args struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			text := func(v string) *sdk.CallToolResult {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: v}}}
			}
			switch name {
			case "meta":
				return text(key), nil
			case "image":
				return &sdk.CallToolResult{Content: []sdk.Content{
					&sdk.TextContent{Text: "a chart"},
					&sdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG-not-really")},
				}}, nil
			case "throttle":
				return text(`{"error":"upstream said slow down","status":429}`), nil
			}
			return text(args.Text), nil
		})
}

func (s *mcpServer) seenKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys)
}

func (s *mcpServer) listCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// mcpAgent is a scripted agent whose only tools come from MCP server
// "files" at url.
func mcpAgent(url string, srv mcp.ServerConfig, script ...model.ScriptStep) *agent.Definition {
	def := scriptedAgent("mcp-agent", nil, script...)
	srv.Name, srv.URL = "files", url
	if srv.Permission == "" {
		srv.Permission = tool.PermissionAllow
	}
	def.MCPServers = []mcp.ServerConfig{srv}
	return def
}

// newMCPManager returns a Manager closed with the test.
func newMCPManager(t *testing.T) *mcp.Manager {
	t.Helper()
	m := mcp.NewManager(mcp.Options{Logger: quietSlog(t)})
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// newMCPEngine returns an engine over a fake client with the agents of reg
// and the MCP manager m (nil: none).
func newMCPEngine(t *testing.T, reg *agent.Registry, m *mcp.Manager) (*Engine, *fakeClient) {
	t.Helper()
	fc := &fakeClient{}
	eng, err := NewEngine(EngineConfig{Client: fc, Agents: reg, Index: &MemoryRunIndex{}, MCP: m})
	require.NoError(t, err)
	return eng, fc
}

// registry returns a registry holding defs.
func registry(t *testing.T, defs ...*agent.Definition) *agent.Registry {
	t.Helper()
	reg := agent.NewRegistry()
	for _, d := range defs {
		require.NoError(t, reg.Register(d))
	}
	return reg
}

// TestMCPCreateSessionPinsTools: CreateSession lists the server's tools
// (the allow-list keeps two) and starts the workflow with them pinned in
// its input; GetSession reports them (get_session).
func TestMCPCreateSessionPinsTools(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	def := mcpAgent(srv.url, mcp.ServerConfig{Tools: []string{"meta", "echo"}},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "files_meta", `{}`)}})
	eng, fc := newMCPEngine(t, registry(t, def), newMCPManager(t))

	created, err := eng.CreateSession(as("alice"), runtime.CreateSessionParams{Agent: def.Ref(), SessionID: "s1"})
	require.NoError(t, err)
	require.Len(t, fc.inputs, 1)
	pinned := fc.inputs[0].MCPTools
	require.Equal(t, pinned, created.MCPTools, "the created session shows its pinned tools")
	var names []string
	for _, p := range pinned {
		names = append(names, p.Name)
		require.Equal(t, "files", p.Server)
		require.Equal(t, mcp.TransportStreamableHTTP, p.Transport)
		require.Equal(t, "[MCP:files] Tool "+p.ToolName+".", p.Description)
		require.JSONEq(t, string(mcpObjectSchema), string(p.InputSchema))
	}
	require.Equal(t, []string{"files_echo", "files_meta"}, names, "the allow-listed tools, in the server's order")

	// The workflow input carries them across the wire.
	raw, err := json.Marshal(fc.inputs[0])
	require.NoError(t, err)
	var back SessionInput
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Equal(t, pinned, back.MCPTools)

	fc.query = func(_, queryType string, _ []any) (any, error) {
		return SessionInfo{SessionID: "s1", Agent: def.Ref(), Owner: "alice", Status: StatusIdle, MCPTools: pinned}, nil
	}
	sess, err := eng.GetSession(as("alice"), "s1")
	require.NoError(t, err)
	require.Equal(t, pinned, sess.MCPTools, "GET /sessions/{id} shows them")
	_, err = eng.GetSession(as("mallory"), "s1")
	require.ErrorIs(t, err, runtime.ErrNotFound)
}

// TestMCPCreateSessionUnavailable: a server that cannot be reached fails
// the creation with mcp.ErrUnavailable, naming the server, and no workflow
// starts; an engine without an MCP manager refuses with runtime.ErrMCPTools.
func TestMCPCreateSessionUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadURL := "http://" + ln.Addr().String() + "/mcp"
	require.NoError(t, ln.Close())
	def := mcpAgent(deadURL, mcp.ServerConfig{TimeoutSeconds: 5, HeadersEnv: map[string]string{"Authorization": "FILES_TOKEN"}},
		model.ScriptStep{Text: "hi"})
	withSecret := mcp.NewManager(mcp.Options{Logger: quietSlog(t), LookupEnvFunc: func(name string) (string, bool) {
		return "Bearer s3cret", name == "FILES_TOKEN"
	}})
	t.Cleanup(func() { _ = withSecret.Close() })

	for _, tc := range []struct {
		name   string
		m      *mcp.Manager
		is     error
		detail string
	}{
		{"unreachable", withSecret, mcp.ErrUnavailable, `MCP server "files" is unavailable`},
		{"no manager", nil, runtime.ErrMCPTools, "does not run MCP servers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng, fc := newMCPEngine(t, registry(t, def), tc.m)
			_, err := eng.CreateSession(as("alice"), runtime.CreateSessionParams{Agent: def.Ref(), SessionID: "s1"})
			require.ErrorIs(t, err, tc.is)
			var pe *runtime.PublicError
			require.ErrorAs(t, err, &pe)
			require.Contains(t, pe.Detail, tc.detail)
			require.NotContains(t, pe.Detail, "s3cret", "the detail hides the headers")
			require.Empty(t, fc.inputs, "no workflow started")
		})
	}
}

// TestMCPCreateSessionChecks: the discovered tools are checked before the
// workflow starts: the allow-list names real tools, bridged names clash
// neither with the agent's tools nor across servers, and a scripted
// model's bridged tool names exist.
func TestMCPCreateSessionChecks(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	clashA := newMCPServer(t, "two_x")
	clashB := newMCPServer(t, "x")
	m := newMCPManager(t)
	script := func(name string) model.ScriptStep {
		return model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", name, `{}`)}}
	}
	for _, tc := range []struct {
		name   string
		def    func() *agent.Definition
		also   error
		detail string
	}{
		{
			name: "allow-list names a missing tool",
			def: func() *agent.Definition {
				return mcpAgent(srv.url, mcp.ServerConfig{Tools: []string{"echo", "nope"}}, script("files_echo"))
			},
			also: mcp.ErrUnknownTool, detail: `MCP server "files" has no tool "nope"`,
		},
		{
			name: "clash with an agent tool",
			def: func() *agent.Definition {
				d := mcpAgent(srv.url, mcp.ServerConfig{}, script("files_echo"))
				d.Tools = []agent.ToolDef{{Config: tool.Config{Name: "files_echo", Description: "mine", Kind: tool.KindClient}}}
				return d
			},
			also: mcp.ErrNameClash, detail: `tool "echo" of MCP server "files" has the name of one of the agent's tools`,
		},
		{
			name: "clash across servers",
			def: func() *agent.Definition {
				d := mcpAgent(clashA.url, mcp.ServerConfig{}, script("one_two_x"))
				d.MCPServers = []mcp.ServerConfig{
					{Name: "one", URL: clashA.url, Permission: tool.PermissionAllow},
					{Name: "one_two", URL: clashB.url, Permission: tool.PermissionAllow},
				}
				return d
			},
			also: mcp.ErrNameClash, detail: `MCP servers "one" and "one_two" both give a tool named "one_two_x"`,
		},
		{
			name: "script names a tool no server has",
			def:  func() *agent.Definition { return mcpAgent(srv.url, mcp.ServerConfig{}, script("files_nope")) },
			also: mcp.ErrUnknownScriptedTool, detail: `"files_nope"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def := tc.def()
			eng, fc := newMCPEngine(t, registry(t, def), m)
			_, err := eng.CreateSession(as("alice"), runtime.CreateSessionParams{Agent: def.Ref(), SessionID: "s1"})
			require.ErrorIs(t, err, runtime.ErrMCPTools)
			if tc.also != nil {
				require.ErrorIs(t, err, tc.also)
			}
			var pe *runtime.PublicError
			require.ErrorAs(t, err, &pe)
			require.Contains(t, pe.Detail, tc.detail)
			require.Empty(t, fc.inputs, "no workflow started")
		})
	}
}

// mcpSession creates def's session through an engine (fake client) with
// its own MCP manager, as `hxd serve` does, and returns the harness of a
// worker with another manager (`hxd worker`) running the workflow from
// the input the engine started it with.
func mcpSession(t *testing.T, def *agent.Definition, artifacts ArtifactStore) *harness {
	t.Helper()
	h := newHarness(t, def, harnessOpts{mcp: newMCPManager(t), artifacts: artifacts})
	eng, fc := newMCPEngine(t, h.reg, newMCPManager(t))
	_, err := eng.CreateSession(as("alice"), runtime.CreateSessionParams{Agent: def.Ref(), SessionID: "s-1"})
	require.NoError(t, err)
	require.Len(t, fc.inputs, 1)
	h.input = fc.inputs[0]
	return h
}

// toolResults returns the tool_result blocks of a model request.
func toolResults(req model.Request) []model.ContentBlock {
	var out []model.ContentBlock
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if b.Type == model.BlockToolResult {
				out = append(out, b)
			}
		}
	}
	return out
}

// TestMCPWorkflowCallsPinnedTools: the scripted model calls a bridged
// tool; the tool activity calls the server with the entry's execution key
// in _meta, without listing its tools, and the result reaches the next
// model request. The server changed its tool list after the session was
// created: the workflow still shows the model the pinned list.
func TestMCPWorkflowCallsPinnedTools(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	def := mcpAgent(srv.url, mcp.ServerConfig{},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "files_meta", `{}`), toolCall("c2", "files_echo", `{"text":"hi"}`)}},
		model.ScriptStep{Text: "done"},
	)
	h := mcpSession(t, def, nil)
	pinned := h.input.MCPTools
	require.Len(t, pinned, 4)
	listed := srv.listCalls()

	// The server changes its list: echo's description, a new tool, one gone.
	srv.addTool("echo", "A new description.")
	srv.addTool("added", "Added later.")
	srv.server.RemoveTools("throttle")

	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(time.Hour)

	r := h.getRun("run-1")
	assertStatus(t, r, runtime.StatusCompleted)
	req := h.lastModelInput().Request
	var specs []model.ToolSpec
	for _, p := range pinned {
		specs = append(specs, model.ToolSpec{Name: p.Name, Description: p.Description, InputSchema: p.InputSchema})
	}
	require.Equal(t, specs, req.Tools, "the model sees the pinned list, not the server's new one")
	require.Contains(t, req.Tools[0].Description, "Tool echo.")

	key := runtime.ExecutionKey("run-1", 1, "c1")
	results := toolResults(req)
	require.Len(t, results, 2)
	require.Equal(t, "c1", results[0].ToolUseID)
	require.JSONEq(t, string(tool.TextContent(key)), string(results[0].Content), "meta's result is the execution key its _meta carried")
	require.JSONEq(t, `"hi"`, string(results[1].Content))
	require.Equal(t, []string{key, runtime.ExecutionKey("run-1", 1, "c2")}, srv.seenKeys())
	require.Equal(t, listed, srv.listCalls(), "the run never listed the server's tools")
	require.Equal(t, 2, h.count(ActivityTool), "each bridged call is a tool activity")
	require.Equal(t, pinned, h.getSession().MCPTools)
}

// TestMCPWorkflowTransientRetriedSameKey: a throttled result of a safe
// server is retried (a new tool activity attempt) with the same execution
// key; once the retries are used up, the result itself reaches the model.
func TestMCPWorkflowTransientRetriedSameKey(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	def := mcpAgent(srv.url, mcp.ServerConfig{
		ReplayPolicy: tool.PolicySafe, Retry: &tool.Retry{Attempts: 2, BackoffSeconds: 0.01},
	},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "files_throttle", `{}`)}},
		model.ScriptStep{Text: "done"},
	)
	h := mcpSession(t, def, nil)
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(time.Hour)

	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	key := runtime.ExecutionKey("run-1", 1, "c1")
	require.Equal(t, []string{key, key}, srv.seenKeys(), "two attempts, one execution key")
	results := toolResults(h.lastModelInput().Request)
	require.Len(t, results, 1)
	require.Contains(t, string(results[0].Content), "upstream said slow down")
}

// TestMCPWorkflowImageArtifact: an image a bridged tool returns is stored
// as an artifact owned by the session's owner, and the model sees its
// reference.
func TestMCPWorkflowImageArtifact(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	def := mcpAgent(srv.url, mcp.ServerConfig{},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "files_image", `{}`)}},
		model.ScriptStep{Text: "done"},
	)
	store := &memStore{}
	h := mcpSession(t, def, store)
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(time.Hour)

	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	digest := sha256Hex("\x89PNG-not-really")
	data, err := store.GetOwned(context.Background(), "alice", digest)
	require.NoError(t, err)
	require.Equal(t, "\x89PNG-not-really", string(data))
	results := toolResults(h.lastModelInput().Request)
	require.Len(t, results, 1)
	require.Contains(t, string(results[0].Content), "artifact://"+digest)
}

// TestMCPWorkerClosesManager: the worker's MCP connections close with it
// (Activities.Close): a call after it fails without reaching the server.
func TestMCPWorkerClosesManager(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	def := mcpAgent(srv.url, mcp.ServerConfig{}, model.ScriptStep{Text: "hi"})
	reg := registry(t, def)
	a := NewActivities(WorkerDeps{Agents: reg})
	registered, err := reg.Get(def.Ref())
	require.NoError(t, err)
	pinned, err := a.mcp.Discover(context.Background(), def.Ref().String(), registered.MCPServers[0])
	require.NoError(t, err)
	b, err := a.bind(def.Ref(), ConfigHash(mustConfig(t, registered)))
	require.NoError(t, err)
	tl, err := a.mcpTool(b, pinned[0])
	require.NoError(t, err)
	require.NoError(t, a.Close())
	_, err = tl.Call(context.Background(), tool.Invocation{ExecutionKey: "k", Call: model.ToolCall{ID: "c1", Name: pinned[0].Name, Input: json.RawMessage(`{}`)}})
	var f *tool.Failure
	require.True(t, errors.As(err, &f), "err = %v", err)
	require.ErrorIs(t, err, mcp.ErrClosed)
	require.Empty(t, srv.seenKeys())
}

func mustConfig(t *testing.T, def *agent.Definition) json.RawMessage {
	t.Helper()
	raw, err := AgentConfig(def)
	require.NoError(t, err)
	return raw
}

// quietSlog logs warnings and errors to the test log.
func quietSlog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// TestMCPNewWorkerStopClosesManager: the worker NewWorker returns closes
// its MCP manager when it stops.
func TestMCPNewWorkerStopClosesManager(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	def := mcpAgent(srv.url, mcp.ServerConfig{}, model.ScriptStep{Text: "hi"})
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Logger: quietLogger(t)})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	m := newMCPManager(t)
	_, err = m.Discover(context.Background(), def.Ref().String(), def.MCPServers[0])
	require.NoError(t, err, "the manager works before the worker stops")
	w := NewWorker(c, "mcp-test", WorkerDeps{Agents: registry(t, def), MCP: m})
	w.Stop()
	_, err = m.Discover(context.Background(), def.Ref().String(), def.MCPServers[0])
	require.ErrorIs(t, err, mcp.ErrClosed)
}

// TestMCPWorkflowApprovalGated: a bridged tool of a server with
// permission ask waits for an approval before the server is called; once
// allowed, the call runs and its result reaches the model.
func TestMCPWorkflowApprovalGated(t *testing.T) {
	t.Parallel()
	srv := newMCPServer(t)
	def := mcpAgent(srv.url, mcp.ServerConfig{Permission: tool.PermissionAsk},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "files_echo", `{"text":"hi"}`)}},
		model.ScriptStep{Text: "done"},
	)
	h := mcpSession(t, def, nil)
	h.submit(time.Second, "req-1", "run-1", "go")
	var waiting runtime.RunResult
	var calledWhileWaiting []string
	h.at(time.Minute, func() { waiting, calledWhileWaiting = h.getRun("run-1"), srv.seenKeys() })
	key := runtime.ExecutionKey("run-1", 1, "c1")
	allow := true
	res := h.update(2*time.Minute, UpdateResolve, "res-1", ResolveRequest{Key: key, Allow: &allow, Resume: true})
	h.run(time.Hour)

	assertStatus(t, waiting, runtime.StatusAwaitingInput)
	require.Len(t, waiting.Pending, 1)
	require.Equal(t, key, waiting.Pending[0].ExecutionKey)
	require.Equal(t, runtime.ToolApproval, waiting.Pending[0].Status)
	require.Empty(t, calledWhileWaiting, "the server is not called before the approval")
	var rr ResolveResult
	res.decode(t, &rr)
	assertStatus(t, rr.Run, runtime.StatusCompleted)
	require.Equal(t, []string{key}, srv.seenKeys())
	results := toolResults(h.lastModelInput().Request)
	require.Len(t, results, 1)
	require.JSONEq(t, `"hi"`, string(results[0].Content))
}
