package tool

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		// want lists substrings of the error; empty means valid.
		want []string
	}{
		{name: "builtin defaults", cfg: Config{Name: "echo"}},
		{name: "named builtin", cfg: Config{Name: "say", Builtin: "echo"}},
		{name: "webhook", cfg: Config{Name: "hook", Kind: KindWebhook, URL: "https://example.com/x"}},
		{name: "client", cfg: Config{Name: "ask_user", Kind: KindClient, Permission: PermissionAsk}},
		{name: "all fields", cfg: Config{
			Name: "overdue_balance", Kind: KindBuiltin, ReplayPolicy: PolicySafe, Permission: PermissionDeny,
			TimeoutSeconds: 30, Retry: &Retry{Attempts: 2, BackoffSeconds: 1}, Concurrent: true,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"account":{"type":"string"}},"required":["account"]}`),
		}},
		{name: "missing name", cfg: Config{Builtin: "echo"}, want: []string{"name: required"}},
		{name: "bad name", cfg: Config{Name: "has space", Builtin: "echo"}, want: []string{`name: "has space" must match`}},
		{name: "long name", cfg: Config{Name: string(make([]byte, 65)), Builtin: "echo"}, want: []string{"name:"}},
		{name: "unknown kind", cfg: Config{Name: "x", Kind: "webhok"}, want: []string{`kind: unknown kind "webhok"`}},
		{name: "unknown builtin", cfg: Config{Name: "nope"}, want: []string{`builtin: unknown builtin "nope"`}},
		{name: "builtin on webhook", cfg: Config{Name: "x", Kind: KindWebhook, URL: "http://h/", Builtin: "echo"}, want: []string{"builtin: only allowed"}},
		{name: "webhook without url", cfg: Config{Name: "x", Kind: KindWebhook}, want: []string{"url: required"}},
		{name: "webhook bad scheme", cfg: Config{Name: "x", Kind: KindWebhook, URL: "ftp://h/x"}, want: []string{`url: scheme "ftp"`}},
		{name: "webhook no host", cfg: Config{Name: "x", Kind: KindWebhook, URL: "http:///x"}, want: []string{"url: host is missing"}},
		{name: "url on builtin", cfg: Config{Name: "echo", URL: "http://h/"}, want: []string{"url: only allowed"}},
		{name: "bad policy", cfg: Config{Name: "echo", ReplayPolicy: "always"}, want: []string{`replay_policy: unknown replay policy "always"`}},
		{name: "bad permission", cfg: Config{Name: "echo", Permission: "maybe"}, want: []string{`permission: unknown permission "maybe"`}},
		{name: "negative timeout", cfg: Config{Name: "echo", TimeoutSeconds: -1}, want: []string{"timeout_seconds: must not be negative"}},
		{name: "bad retry", cfg: Config{Name: "echo", Retry: &Retry{BackoffSeconds: -1, MaxBackoffSeconds: -1}}, want: []string{
			"retry.attempts: must be at least 1", "retry.backoff_seconds", "retry.max_backoff_seconds",
		}},
		{name: "schema not object", cfg: Config{Name: "echo", InputSchema: json.RawMessage(`true`)}, want: []string{"input_schema: must be a JSON object"}},
		{name: "schema wrong type", cfg: Config{Name: "echo", InputSchema: json.RawMessage(`{"type":"string"}`)}, want: []string{`input_schema: type must be "object"`}},
		{name: "schema does not compile", cfg: Config{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":5}}}`)}, want: []string{"input_schema: invalid schema"}},
		{name: "schema external ref", cfg: Config{Name: "echo", InputSchema: json.RawMessage(`{"$ref":"file:///etc/passwd"}`)}, want: []string{"input_schema: invalid schema"}},
		{name: "schema not json", cfg: Config{Name: "echo", InputSchema: json.RawMessage(`{`)}, want: []string{"input_schema: not valid JSON"}},
		{name: "several problems", cfg: Config{Kind: "x", Permission: "y"}, want: []string{"name: required", "kind:", "permission:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateConfig(tt.cfg)
			_, newErr := New(tt.cfg, Options{})
			if len(tt.want) == 0 {
				require.NoError(t, err)
				require.NoError(t, newErr)
				return
			}
			require.Error(t, err)
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorIs(t, newErr, ErrInvalidConfig)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
			var fe *FieldError
			require.True(t, errors.As(err, &fe))
		})
	}
}

func TestNewCustomBuiltin(t *testing.T) {
	t.Parallel()
	cfg := Config{Name: "custom"}
	require.ErrorIs(t, ValidateConfig(cfg), ErrInvalidConfig)
	_, err := New(cfg, Options{Builtins: map[string]BuiltinFunc{"custom": echo}})
	require.NoError(t, err)
}

func TestNewAppliesDefaults(t *testing.T) {
	t.Parallel()
	tl, err := New(Config{Name: "echo", Description: "Echo."}, Options{})
	require.NoError(t, err)
	cfg := tl.Config()
	require.Equal(t, KindBuiltin, cfg.Kind)
	require.Equal(t, PolicyManual, cfg.ReplayPolicy)
	require.Equal(t, PermissionAllow, cfg.Permission)
	require.InDelta(t, 300.0, cfg.TimeoutSeconds, 0)
	require.Equal(t, &DefaultRetry, cfg.Retry)
	spec := tl.Spec()
	require.Equal(t, "echo", spec.Name)
	require.Equal(t, "Echo.", spec.Description)
	require.JSONEq(t, `{"type":"object"}`, string(spec.InputSchema))
}

func TestValidateInput(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","properties":{"account":{"type":"string"},"limit":{"type":"integer"}},"required":["account"],"additionalProperties":false}`)
	tl, err := New(Config{Name: "overdue_balance", InputSchema: schema}, Options{})
	require.NoError(t, err)
	tests := []struct {
		name  string
		input string
		want  string // exact error text; empty means valid
	}{
		{name: "valid", input: `{"account":"demo"}`},
		{name: "valid with optional", input: `{"account":"demo","limit":3}`},
		{name: "missing property", input: `{}`, want: `input does not match schema: missing property "account"`},
		{name: "empty input", input: ``, want: `input does not match schema: missing property "account"`},
		{name: "wrong type", input: `{"account":5}`, want: `input does not match schema: at /account: got number, want string`},
		{name: "extra property", input: `{"account":"a","x":1}`, want: `input does not match schema: unexpected properties "x"`},
		{name: "two problems", input: `{"limit":"x"}`, want: `input does not match schema: missing property "account"; at /limit: got string, want integer`},
		{name: "not json", input: `{"account":`, want: `input is not valid JSON`},
		{name: "not an object", input: `[1]`, want: `input does not match schema: got array, want object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tl.ValidateInput(json.RawMessage(tt.input))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestResultHelpers(t *testing.T) {
	t.Parallel()
	require.Equal(t, `"a <b> & \"c\"\n"`, string(TextContent("a <b> & \"c\"\n")))
	r := ErrorResult("c1", "boom")
	require.Equal(t, "c1", r.ToolCallID)
	require.True(t, r.IsError)
	require.Equal(t, `"boom"`, string(r.Content))
}

func TestValidateInputConcurrent(t *testing.T) {
	t.Parallel()
	tl, err := New(Config{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","required":["text"]}`)}, Options{})
	require.NoError(t, err)
	done := make(chan error, 16)
	for i := range 16 {
		go func() {
			if i%2 == 0 {
				done <- tl.ValidateInput(json.RawMessage(`{"text":"x"}`))
				return
			}
			if err := tl.ValidateInput(json.RawMessage(`{}`)); err == nil {
				done <- errors.New("invalid input accepted")
				return
			}
			done <- nil
		}()
	}
	for range 16 {
		require.NoError(t, <-done)
	}
}
