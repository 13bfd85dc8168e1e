package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/mcp"
	"hxd/internal/tool"
)

// withMCP is a valid agent file declaring two MCP servers, whose script
// calls a bridged tool (checked only when a session is created).
const withMCP = `
name: a
version: v1
model:
  provider: scripted
  script:
    - tool_calls: [{id: c1, name: files_read_file, input: {path: /x}}]
    - text: done
mcp_servers:
  - name: files
    command: [/usr/local/bin/files-mcp, --root, /srv/data]
    env: {FILES_ROOT: /srv/data}
    env_from: {FILES_TOKEN: FILES_MCP_TOKEN}
    tools: [read_file, search]
  - name: web
    url: http://127.0.0.1:9100/mcp
    headers_env: {Authorization: WEB_MCP_TOKEN}
    timeout_seconds: 30
    permission: allow
    replay_policy: idempotent
    retry: {attempts: 2, backoff_seconds: 1}
`

func TestLoadMCPServers(t *testing.T) {
	t.Parallel()
	d, err := Load(strings.NewReader(withMCP), "agents/mcp.yaml")
	require.NoError(t, err)
	require.Equal(t, []mcp.ServerConfig{
		{
			Name: "files", Command: []string{"/usr/local/bin/files-mcp", "--root", "/srv/data"},
			Env: map[string]string{"FILES_ROOT": "/srv/data"}, EnvFrom: map[string]string{"FILES_TOKEN": "FILES_MCP_TOKEN"},
			Tools: []string{"read_file", "search"},
		},
		{
			Name: "web", URL: "http://127.0.0.1:9100/mcp", HeadersEnv: map[string]string{"Authorization": "WEB_MCP_TOKEN"},
			TimeoutSeconds: 30, Permission: tool.PermissionAllow, ReplayPolicy: tool.PolicyIdempotent,
			Retry: &tool.Retry{Attempts: 2, BackoffSeconds: 1},
		},
	}, d.MCPServers)
}

func TestLoadMCPServersBad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		want       []string
	}{
		{name: "command and url", file: strings.Replace(withMCP, "    env: {FILES_ROOT", "    url: http://h/\n    env: {FILES_ROOT", 1),
			want: []string{"mcp_servers[0].command: give exactly one of command (stdio) or url (HTTP), not both"}},
		{name: "bad replay policy", file: strings.Replace(withMCP, "replay_policy: idempotent", "replay_policy: sometimes", 1),
			want: []string{`mcp_servers[1].replay_policy: unknown replay policy "sometimes" (want manual, safe or idempotent)`}},
		{name: "duplicate server", file: strings.Replace(withMCP, "name: web", "name: files", 1),
			want: []string{`mcp_servers[1].name: duplicate MCP server name "files"`}},
		{name: "secret in headers_env", file: strings.Replace(withMCP, "WEB_MCP_TOKEN", "Bearer S3cret", 1),
			want: []string{"mcp_servers[1].headers_env.Authorization: must name an environment variable, never hold the value"}},
		{name: "unknown field", file: strings.Replace(withMCP, "permission: allow", "permision: allow", 1),
			want: []string{"mcp_servers[1].permision: unknown field"}},
		{name: "script names a tool no server can bridge", file: strings.Replace(withMCP, "name: files_read_file", "name: other_read", 1),
			want: []string{`model.script[0].tool_calls[0].name: unknown tool "other_read"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(strings.NewReader(tt.file), "agents/mcp.yaml")
			require.ErrorIs(t, err, ErrInvalidDefinition)
			lines := strings.Split(err.Error(), "\n")
			for _, w := range tt.want {
				require.Contains(t, lines, "agents/mcp.yaml: "+w)
			}
			require.NotContains(t, err.Error(), "S3cret")
		})
	}
}
