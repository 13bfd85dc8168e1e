package mcp

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/tool"
)

// problems returns the fields of the problems err reports.
func problems(t *testing.T, err error) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range unjoin(err) {
		var fe *FieldError
		require.ErrorAs(t, e, &fe)
		require.ErrorIs(t, e, ErrInvalidConfig)
		out[fe.Field] = fe.Problem
	}
	return out
}

func TestServerConfigValidate(t *testing.T) {
	t.Parallel()
	retry := &tool.Retry{Attempts: 3, BackoffSeconds: 1}
	cases := []struct {
		name string
		cfg  ServerConfig
		want []string // fields with a problem
	}{
		{"stdio", ServerConfig{Name: "files", Command: []string{"/bin/files-mcp", "--root", "/srv"}, Env: map[string]string{"ROOT": "/srv"}, EnvFrom: map[string]string{"TOKEN": "FILES_TOKEN"}}, nil},
		{"http", ServerConfig{Name: "web", URL: "https://mcp.example.com/mcp", HeadersEnv: map[string]string{"Authorization": "WEB_TOKEN"}, ReplayPolicy: "safe", Retry: retry, Permission: "allow", Tools: []string{"search"}}, nil},
		{"both", ServerConfig{Name: "x", Command: []string{"a"}, URL: "http://h/"}, []string{"command"}},
		{"neither", ServerConfig{Name: "x"}, []string{"command"}},
		{"no name", ServerConfig{Command: []string{"a"}}, []string{"name"}},
		{"bad name", ServerConfig{Name: "a b", Command: []string{"a"}}, []string{"name"}},
		{"empty program", ServerConfig{Name: "x", Command: []string{""}}, []string{"command[0]"}},
		{"bad url", ServerConfig{Name: "x", URL: "ftp://h/"}, []string{"url"}},
		{"url credentials", ServerConfig{Name: "x", URL: "http://u:p@h/"}, []string{"url"}},
		{"env with url", ServerConfig{Name: "x", URL: "http://h/", Env: map[string]string{"A": "b"}, EnvFrom: map[string]string{"B": "C"}}, []string{"env", "env_from"}},
		{"headers with command", ServerConfig{Name: "x", Command: []string{"a"}, HeadersEnv: map[string]string{"X-Key": "KEY"}}, []string{"headers_env"}},
		{"header value not a name", ServerConfig{Name: "x", URL: "http://h/", HeadersEnv: map[string]string{"Authorization": "Bearer abc"}}, []string{"headers_env.Authorization"}},
		{"env_from value not a name", ServerConfig{Name: "x", Command: []string{"a"}, EnvFrom: map[string]string{"T": "s3cr3t value"}}, []string{"env_from.T"}},
		{"env and env_from clash", ServerConfig{Name: "x", Command: []string{"a"}, Env: map[string]string{"T": "v"}, EnvFrom: map[string]string{"T": "V"}}, []string{"env_from.T"}},
		{"bad policy and permission", ServerConfig{Name: "x", Command: []string{"a"}, ReplayPolicy: "always", Permission: "maybe"}, []string{"replay_policy", "permission"}},
		{"retry with manual", ServerConfig{Name: "x", Command: []string{"a"}, Retry: retry}, []string{"retry"}},
		{"bad retry", ServerConfig{Name: "x", Command: []string{"a"}, ReplayPolicy: "idempotent", Retry: &tool.Retry{}}, []string{"retry.attempts"}},
		{"negative timeout", ServerConfig{Name: "x", Command: []string{"a"}, TimeoutSeconds: -1}, []string{"timeout_seconds"}},
		{"duplicate allow-list", ServerConfig{Name: "x", Command: []string{"a"}, Tools: []string{"a", "a", ""}}, []string{"tools[1]", "tools[2]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			got := problems(t, err)
			var fields []string
			for f := range got {
				fields = append(fields, f)
			}
			require.ElementsMatch(t, c.want, fields, "%v", err)
		})
	}
}

func TestServerConfigValidateHidesSecrets(t *testing.T) {
	t.Parallel()
	cfg := ServerConfig{Name: "x", URL: "http://h/", HeadersEnv: map[string]string{"Authorization": "Bearer abc123"}}
	err := cfg.Validate()
	require.Error(t, err)
	require.NotContains(t, err.Error(), "abc123")
	cfg = ServerConfig{Name: "x", Command: []string{"a"}, EnvFrom: map[string]string{"T": "hunter2 value"}}
	require.NotContains(t, cfg.Validate().Error(), "hunter2")
}

func TestValidateServers(t *testing.T) {
	t.Parallel()
	err := ValidateServers([]ServerConfig{
		{Name: "files", Command: []string{"a"}},
		{Name: "files", URL: "http://h/"},
		{Name: "web", URL: "http://h/", ReplayPolicy: "never"},
	})
	got := problems(t, err)
	require.Equal(t, map[string]string{
		"mcp_servers[1].name":          `duplicate MCP server name "files"`,
		"mcp_servers[2].replay_policy": `unknown replay policy "never" (want manual, safe or idempotent)`,
	}, got)
	require.NoError(t, ValidateServers(nil))
}

func TestMayBeBridged(t *testing.T) {
	t.Parallel()
	cfgs := []ServerConfig{{Name: "my files"}, {Name: "web"}}
	require.True(t, MayBeBridged("my_files_read", cfgs))
	require.True(t, MayBeBridged("web_search", cfgs))
	require.False(t, MayBeBridged("search", cfgs))
	require.False(t, MayBeBridged("web_search", nil))
}

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	c := ServerConfig{Name: "x", Command: []string{"a"}}.WithDefaults()
	require.InDelta(t, 60.0, c.TimeoutSeconds, 0)
	require.Equal(t, tool.PermissionAsk, c.Permission)
	require.Equal(t, tool.PolicyManual, c.ReplayPolicy)
	require.True(t, errors.Is(&FieldError{}, ErrInvalidConfig))
}
