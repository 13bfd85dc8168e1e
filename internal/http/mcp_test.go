package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/http/api"
	"hxd/internal/mcp"
	hxruntime "hxd/internal/runtime"
)

// TestMCPAgentShowsServersWithoutSecrets: an agent's MCP servers are
// shown with their transport, permission, replay policy and allow-list;
// commands, env values, variable names of secrets and URLs never are.
func TestMCPAgentShowsServersWithoutSecrets(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	def := agentFixture()
	def.MCPServers = []mcp.ServerConfig{
		{Name: "files", Command: []string{"/opt/files-mcp", "--root", "/srv/secret-root"}, Env: map[string]string{"FILES_ROOT": "literal-env-value"},
			EnvFrom: map[string]string{"FILES_TOKEN": "FILES_MCP_TOKEN"}, Tools: []string{"read_file"}},
		{Name: "web", URL: "https://mcp.example/mcp?token=query-secret", HeadersEnv: map[string]string{"Authorization": "WEB_MCP_TOKEN"},
			Permission: "allow", ReplayPolicy: "idempotent", TimeoutSeconds: 5},
	}
	tb.svc.AgentFunc = func(string, string) (*agent.Definition, error) { return def, nil }
	tb.svc.AgentsFunc = func() []*agent.Definition { return []*agent.Definition{def} }
	for _, path := range []string{"/agents/demo/v1", "/agents"} {
		resp, data := tb.do(t, request{method: "GET", path: path})
		require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", data)
		for _, secret := range []string{"files-mcp", "secret-root", "literal-env-value", "FILES_MCP_TOKEN", "FILES_TOKEN", "FILES_ROOT",
			"mcp.example", "query-secret", "WEB_MCP_TOKEN", "Authorization"} {
			require.NotContains(t, string(data), secret, path)
		}
		var a api.Agent
		if path == "/agents" {
			a = decode[api.AgentList](t, data).Items[0]
		} else {
			a = decode[api.Agent](t, data)
		}
		require.NotNil(t, a.McpServers, path)
		got := *a.McpServers
		require.Len(t, got, 2)
		require.Equal(t, api.AgentMCPServer{Name: "files", Transport: "stdio", Permission: "ask", ReplayPolicy: "manual", TimeoutSeconds: 60,
			Tools: &[]string{"read_file"}}, got[0])
		require.Equal(t, api.AgentMCPServer{Name: "web", Transport: "http", Permission: "allow", ReplayPolicy: "idempotent", TimeoutSeconds: 5}, got[1])
	}
}

// TestMCPSessionShowsPinnedTools: the session resource carries the pinned
// MCP tools ([] without).
func TestMCPSessionShowsPinnedTools(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	pinned := mcp.PinnedTool{Name: "files_read_file", ToolName: "read_file", Description: "[MCP:files] Read a file",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`), Server: "files", Transport: "stdio"}
	tb.svc.GetSessionFunc = func(_ context.Context, id string) (*hxruntime.Session, error) {
		s := sessionFixture()
		if id == "s1" {
			s.MCPTools = []mcp.PinnedTool{pinned}
		}
		return s, nil
	}
	resp, data := tb.do(t, request{method: "GET", path: "/sessions/s1"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", data)
	s := decode[api.Session](t, data)
	require.Equal(t, []api.MCPTool{{Name: pinned.Name, ToolName: pinned.ToolName, Description: pinned.Description,
		InputSchema: pinned.InputSchema, Server: "files", Transport: "stdio"}}, s.McpTools)

	_, data = tb.do(t, request{method: "GET", path: "/sessions/s2"})
	require.JSONEq(t, `[]`, string(decode[map[string]json.RawMessage](t, data)["mcp_tools"]))
}

// TestMCPSessionCreationProblems: an unreachable server is 422
// mcp_unavailable naming the server; tools that cannot be pinned are 422
// mcp_tools_invalid.
func TestMCPSessionCreationProblems(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var fail error
	tb.svc.CreateSessionFunc = func(context.Context, hxruntime.CreateSessionParams) (*hxruntime.Session, error) { return nil, fail }
	body := `{"agent":{"name":"demo","version":"v1"}}`

	ue := &mcp.UnavailableError{Server: "files", Reason: "connection refused"}
	fail = &hxruntime.PublicError{Err: fmt.Errorf("discover: %w", ue), Detail: ue.Error()}
	resp, data := tb.do(t, request{method: "POST", path: "/sessions", body: body})
	p := requireProblem(t, resp, data, http.StatusUnprocessableEntity, "mcp_unavailable")
	require.NotNil(t, p.Detail)
	require.Contains(t, *p.Detail, `"files"`)

	fail = &hxruntime.PublicError{Err: fmt.Errorf("%w: %w", hxruntime.ErrMCPTools, mcp.ErrNameClash), Detail: "clash"}
	resp, data = tb.do(t, request{method: "POST", path: "/sessions", body: body})
	requireProblem(t, resp, data, http.StatusUnprocessableEntity, "mcp_tools_invalid")
}
