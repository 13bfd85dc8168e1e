package agent

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/model"
	"hxd/internal/tool"
)

// minimal is a valid agent file the bad cases below edit.
const minimal = `
name: a
version: v1
model:
  provider: scripted
  script:
    - tool_calls: [{id: c1, name: echo, input: {text: hi}}]
    - text: done
tools:
  - name: echo
`

func TestLoadDesignExample(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/design-example.yaml")
	require.NoError(t, err)
	defer hxtest.Close(t, f)
	d, err := Load(f, "testdata/design-example.yaml")
	require.NoError(t, err)

	require.Equal(t, Ref{Name: "invoice-analyst", Version: "v1"}, d.Ref())
	require.Equal(t, "You analyse invoices.", d.SystemPrompt)
	require.Equal(t, 50, d.MaxIterations)
	require.Equal(t, model.ProviderOpenAI, d.Model.Provider)
	require.Equal(t, "gpt-4o-mini", d.Model.Model)
	require.Equal(t, "https://api.openai.com/v1", d.Model.BaseURL)
	require.Equal(t, "OPENAI_API_KEY", d.Model.APIKeyEnv)
	require.Equal(t, 4096, d.Model.MaxTokens)
	require.NotNil(t, d.Model.Temperature)
	require.Zero(t, *d.Model.Temperature)
	require.Equal(t, &RetryPolicy{Attempts: 4, BackoffSeconds: 0.5, MaxBackoffSeconds: 60}, d.Retry)
	require.Equal(t, "x (synthetic fixture)", ApplyAll(d.ResponseMiddleware, "x"))
	require.Equal(t, 12000, d.MaxResultChars, "default applied")

	require.Len(t, d.Tools, 1)
	tl := d.Tools[0]
	require.Equal(t, "overdue_balance", tl.Name)
	require.Equal(t, tool.KindWebhook, tl.Kind)
	require.Equal(t, "http://127.0.0.1:9000/overdue", tl.URL)
	require.Equal(t, tool.PolicySafe, tl.ReplayPolicy)
	require.Equal(t, tool.PermissionAllow, tl.Permission)
	require.InDelta(t, 30.0, tl.TimeoutSeconds, 0)
	require.Equal(t, &tool.DefaultRetry, tl.Retry, "default applied")
	require.JSONEq(t, `{"type":"object","properties":{"account":{"type":"string"}},"required":["account"]}`, string(tl.InputSchema))
	require.Equal(t, "card [card] ok", ApplyAll(tl.ResultMiddleware, "card 4111111111111111 ok"))

	_, err = tool.New(tl.Config, tool.Options{})
	require.NoError(t, err, "the loaded tool config builds a tool")
}

func TestLoadGood(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		file  string
		check func(t *testing.T, d *Definition)
	}{
		{name: "minimal", file: minimal, check: func(t *testing.T, d *Definition) {
			require.Equal(t, DefaultMaxIterations, d.MaxIterations)
			require.Equal(t, &DefaultRetry, d.Retry)
			require.Equal(t, DefaultMaxTokens, d.Model.MaxTokens)
			require.InDelta(t, DefaultModelTimeout, d.Model.TimeoutSeconds, 0)
			require.Equal(t, tool.KindBuiltin, d.Tools[0].Kind)
			require.Equal(t, "echo", d.Tools[0].Builtin)
			require.Equal(t, tool.PolicyManual, d.Tools[0].ReplayPolicy)
			require.JSONEq(t, `{"text":"hi"}`, string(d.Model.Script[0].ToolCalls[0].Input))
		}},
		{name: "json file", file: `{"name":"j","version":"1.0","model":{"provider":"openai","model":"gpt"},
			"tools":[{"name":"ask","kind":"client","permission":"ask"}]}`, check: func(t *testing.T, d *Definition) {
			require.Equal(t, Ref{Name: "j", Version: "1.0"}, d.Ref())
			require.Equal(t, tool.KindClient, d.Tools[0].Kind)
		}},
		{name: "anthropic with thinking", file: `
name: claude
version: v1
model: {provider: anthropic, model: claude-sonnet-4-5, api_key_env: ANTHROPIC_KEY, max_tokens: 8192, thinking: {budget_tokens: 2048}}
`, check: func(t *testing.T, d *Definition) {
			require.Equal(t, model.ProviderAnthropic, d.Model.Provider)
			require.Equal(t, "ANTHROPIC_KEY", d.Model.APIKeyEnv)
			require.Equal(t, &model.Thinking{BudgetTokens: 2048}, d.Model.Thinking)
		}},
		{name: "script input defaults to object", file: `
name: a
version: v1
model: {provider: scripted, script: [{tool_calls: [{id: c, name: sleep}]}]}
tools: [{name: sleep}]
`, check: func(t *testing.T, d *Definition) {
			require.Equal(t, json.RawMessage(`{}`), d.Model.Script[0].ToolCalls[0].Input)
		}},
		{name: "tool named builtin", file: `
name: a
version: v1
model: {provider: openai, model: m}
tools: [{name: say, builtin: echo, concurrent: true, retry: {attempts: 2, backoff_seconds: 0, max_backoff_seconds: 0}}]
max_session_duration_seconds: 60
`, check: func(t *testing.T, d *Definition) {
			require.True(t, d.Tools[0].Concurrent)
			require.Equal(t, 2, d.Tools[0].Retry.Attempts)
			require.InDelta(t, 60.0, d.MaxSessionDurationSeconds, 0)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := Load(strings.NewReader(tt.file), "agents/good.yaml")
			require.NoError(t, err)
			tt.check(t, d)
		})
	}
}

func TestLoadBad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		want []string // each a full problem line after "agents/bad.yaml: "
	}{
		{name: "unknown field", file: minimal + "max_iteration: 3\n", want: []string{`max_iteration: unknown field`}},
		{name: "unknown tool field", file: strings.Replace(minimal, "- name: echo", "- name: echo\n    replay: safe", 1),
			want: []string{`tools[0].replay: unknown field`}},
		// encoding/json matches keys case-insensitively: checked exactly.
		{name: "key in another case", file: strings.Replace(minimal, "name: a", "NAME: a", 1), want: []string{`NAME: unknown field`}},
		{name: "near-miss key", file: minimal + "System_Prompt: hi\n", want: []string{`System_Prompt: unknown field`}},
		{name: "nested key in another case", file: strings.Replace(minimal, "provider: scripted", "Provider: scripted", 1),
			want: []string{`model.Provider: unknown field`}},
		{name: "key twice", file: minimal + "name: b\n", want: []string{`invalid YAML: line 11: key "name" already set in map`}},
		{name: "second document", file: minimal + "---\nname: other\nbogus: 1\n", want: []string{"more than one YAML document (one agent per file)"}},
		{name: "wrong kind in the second tool", file: strings.Replace(minimal, "  - name: echo\n", "  - name: echo\n  - name: sleep\n    timeout_seconds: 'x'\n", 1),
			want: []string{"tools[1].timeout_seconds: got string, want number"}},
		{name: "bad provider", file: strings.Replace(minimal, "provider: scripted", "provider: openia", 1),
			want: []string{`model: unknown provider "openia" (want openai, anthropic or scripted)`, "model.script: only used by the scripted provider"}},
		{name: "anthropic without model", file: "name: a\nversion: v1\nmodel: {provider: anthropic}\n",
			want: []string{`model: model is required for provider "anthropic"`}},
		{name: "thinking budget too small", file: "name: a\nversion: v1\nmodel: {provider: anthropic, model: claude, thinking: {budget_tokens: 1000}}\n",
			want: []string{"model: thinking.budget_tokens must be at least 1024"}},
		{name: "thinking budget not below max_tokens", file: "name: a\nversion: v1\nmodel: {provider: anthropic, model: claude, max_tokens: 2048, thinking: {budget_tokens: 2048}}\n",
			want: []string{"model: thinking.budget_tokens must be less than max_tokens (2048)"}},
		{name: "thinking on openai", file: "name: a\nversion: v1\nmodel: {provider: openai, model: m, thinking: {budget_tokens: 2048}}\n",
			want: []string{`model: thinking is only supported by provider "anthropic"`}},
		// api_key_env names a variable; a value that cannot be one is likely the key itself, never echoed.
		{name: "api key in api_key_env", file: "name: a\nversion: v1\nmodel: {provider: openai, model: m, api_key_env: sk-pr0j-S3cretKey}\n",
			want: []string{"model.api_key_env: must name an environment variable (letters, digits and _, not starting with a digit), never hold the key itself"}},
		{name: "missing version", file: strings.Replace(minimal, "version: v1", "", 1), want: []string{"version: required"}},
		{name: "bad name", file: strings.Replace(minimal, "name: a\n", "name: a b\n", 1), want: []string{`name: "a b" must match ^[a-zA-Z0-9._-]{1,64}$`}},
		{name: "duplicate tool", file: minimal + "  - name: echo\n", want: []string{`tools[1].name: duplicate tool name "echo"`}},
		{name: "bad regex", file: minimal + "    result_middleware: [{regex_replace: {pattern: \"(\", replace: x}}]\n",
			want: []string{"tools[0].result_middleware[0].regex_replace.pattern: invalid regex: missing closing ): \"(\""}},
		{name: "middleware with both", file: minimal + "response_middleware: [{append_text: x, regex_replace: {pattern: a, replace: b}}]\n",
			want: []string{"response_middleware[0]: needs exactly one of append_text or regex_replace"}},
		{name: "middleware with none", file: minimal + "response_middleware: [{}]\n",
			want: []string{"response_middleware[0]: needs exactly one of append_text or regex_replace"}},
		{name: "bad kind", file: strings.Replace(minimal, "- name: echo", "- name: echo\n    kind: webhok", 1),
			want: []string{`tools[0].kind: unknown kind "webhok" (want builtin, webhook or client)`}},
		{name: "webhook without url", file: strings.Replace(minimal, "- name: echo", "- name: echo\n    kind: webhook", 1),
			want: []string{"tools[0].url: required for kind webhook"}},
		{name: "bad schema", file: strings.Replace(minimal, "- name: echo", "- name: echo\n    input_schema: {type: string}", 1),
			want: []string{`tools[0].input_schema: type must be "object"`}},
		{name: "script names unknown tool", file: strings.Replace(minimal, "name: echo, input", "name: ehco, input", 1),
			want: []string{`model.script[0].tool_calls[0].name: unknown tool "ehco"`}},
		{name: "script call without id", file: strings.Replace(minimal, "id: c1, ", "", 1),
			want: []string{"model.script[0].tool_calls[0].id: required"}},
		{name: "negative numbers", file: minimal + "max_iterations: -1\nmax_result_chars: -2\nretry: {attempts: 0, backoff_seconds: -1, max_backoff_seconds: 1}\n",
			want: []string{"max_iterations: must not be negative", "max_result_chars: must not be negative", "retry.attempts: must be at least 1", "retry.backoff_seconds: must not be negative"}},
		{name: "fail_after_deltas without fail_attempts", file: strings.Replace(minimal, "- text: done", "- {text: done now, fail_after_deltas: 1}", 1),
			want: []string{"model.script[1].fail_after_deltas: needs fail_attempts"}},
		{name: "fail_after_deltas beyond the text", file: strings.Replace(minimal, "- text: done", "- {text: done now, fail_attempts: 1, fail_after_deltas: 3}", 1),
			want: []string{"model.script[1].fail_after_deltas: exceeds the pieces of the step's text"}},
		{name: "retention not a duration", file: minimal + "retention: {finished_for: 30d}\n",
			want: []string{"retention.finished_for: must be a positive duration such as 720h"}},
		{name: "retention not positive", file: minimal + "retention: {finished_for: 0s}\n",
			want: []string{"retention.finished_for: must be a positive duration such as 720h"}},
		{name: "retention without finished_for", file: minimal + "retention: {}\n",
			want: []string{"retention.finished_for: must be a positive duration such as 720h"}},
		{name: "retention unknown key", file: minimal + "retention: {finished_for: 1h, keep: 2}\n",
			want: []string{"retention.keep: unknown field"}},
		{name: "wrong type", file: minimal + "max_iterations: many\n", want: []string{"max_iterations: got string, want integer"}},
		{name: "invalid yaml", file: "name: a\n  version: v1\n", want: []string{"invalid YAML: line 2: mapping values are not allowed in this context"}},
		{name: "empty file", file: "", want: []string{"empty agent file"}},
		{name: "several tool problems", file: strings.Replace(minimal, "- name: echo", "- name: echo\n    kind: webhok\n    permission: maybe\n    input_schema: {type: string}", 1),
			want: []string{`tools[0].kind: unknown kind "webhok" (want builtin, webhook or client)`, `tools[0].permission: unknown permission "maybe" (want allow, ask or deny)`, `tools[0].input_schema: type must be "object"`}},
		{name: "yaml boolean", file: strings.Replace(minimal, "name: a\n", "name: true\n", 1),
			want: []string{"name: got boolean, want string (YAML reads unquoted true and false as booleans; quote the value)"}},
		{name: "several problems", file: "name: a\nmodel: {provider: scripted}\ntools: [{name: x, kind: webhok}]\n", want: []string{
			"version: required", "model: scripted provider needs a non-empty script", `tools[0].kind: unknown kind "webhok" (want builtin, webhook or client)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(strings.NewReader(tt.file), "agents/bad.yaml")
			require.Error(t, err)
			require.ErrorIs(t, err, ErrInvalidDefinition)
			lines := strings.Split(err.Error(), "\n")
			for _, l := range lines {
				require.True(t, strings.HasPrefix(l, "agents/bad.yaml: "), "every problem names the file: %q", l)
			}
			for _, w := range tt.want {
				require.Contains(t, lines, "agents/bad.yaml: "+w)
			}
			require.NotContains(t, err.Error(), "Definition", "no Go type names")
			require.NotContains(t, err.Error(), "S3cret", "no secret echoed")
		})
	}
}

func TestValidateToolErrorsKeepCause(t *testing.T) {
	t.Parallel()
	_, err := Load(strings.NewReader(strings.Replace(minimal, "- name: echo", "- name: echo\n    kind: webhok", 1)), "x.yaml")
	require.ErrorIs(t, err, tool.ErrInvalidConfig)
	var fe *FieldError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, "tools[0].kind", fe.Field)
}

func TestLoadDir(t *testing.T) {
	t.Parallel()
	write := func(t *testing.T, dir, name, content string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}

	t.Run("good", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		write(t, dir, "b.yaml", minimal)
		write(t, dir, "a.yml", strings.Replace(minimal, "name: a\n", "name: z\n", 1))
		write(t, dir, "c.json", `{"name":"c","version":"v1","model":{"provider":"openai","model":"m"}}`)
		write(t, dir, "README.md", "not an agent")
		write(t, dir, ".hidden.yaml", "garbage: [")
		require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o700))
		defs, err := LoadDir(dir)
		require.NoError(t, err)
		var refs []string
		for _, d := range defs {
			refs = append(refs, d.Ref().String())
		}
		require.Equal(t, []string{"z@v1", "a@v1", "c@v1"}, refs, "file name order")
	})

	t.Run("mix", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		write(t, dir, "good.yaml", minimal)
		write(t, dir, "x.yaml", strings.Replace(minimal, "- name: echo", "- name: echo\n    kind: webhok", 1))
		write(t, dir, "y.yaml", "name: [")
		write(t, dir, "z.yaml", minimal)
		defs, err := LoadDir(dir)
		require.Nil(t, defs)
		require.Error(t, err)
		msg := err.Error()
		require.Contains(t, msg, filepath.Join(dir, "x.yaml")+`: tools[0].kind: unknown kind "webhok"`)
		require.Contains(t, msg, filepath.Join(dir, "y.yaml")+": invalid YAML")
		require.Contains(t, msg, filepath.Join(dir, "z.yaml")+": agent a@v1 is already defined in "+filepath.Join(dir, "good.yaml"))
		require.NotContains(t, msg, filepath.Join(dir, "good.yaml")+":")
	})

	t.Run("missing dir", func(t *testing.T) {
		t.Parallel()
		_, err := LoadDir(filepath.Join(t.TempDir(), "nope"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

func TestWithDefaultsCopies(t *testing.T) {
	t.Parallel()
	d := &Definition{Name: "a", Version: "v1", Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{{Text: "x"}}},
		Tools: []ToolDef{{Config: tool.Config{Name: "echo"}}}}
	c := d.WithDefaults()
	require.Empty(t, d.Tools[0].Kind, "the original is not modified")
	require.Zero(t, d.MaxIterations)
	require.Nil(t, d.Retry)
	require.Equal(t, tool.KindBuiltin, c.Tools[0].Kind)
	c.Model.Script[0].Text = "changed"
	require.Equal(t, "x", d.Model.Script[0].Text)
	require.Equal(t, c, c.WithDefaults(), "idempotent")
	require.NoError(t, d.Validate())
}

// TestLoadRefusesAtLoadTime (issue 20, item 5): an unknown provider, a
// missing model and an unset API key variable are refused when the file
// is loaded, each naming the file and the problem; the unset variable is
// named, and no environment value reaches a message.
func TestLoadRefusesAtLoadTime(t *testing.T) {
	t.Parallel()
	// env holds values that must never be shown, including one for a
	// variable an agent names but left empty.
	env := map[string]string{"OPENAI_API_KEY": "sk-0penAI-S3cret", "OTHER_KEY": "sk-other-S3cret", "EMPTY_KEY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name string
		file string
		want []string // each a full problem line after "agents/bad.yaml: "
		is   error    // wrapped besides ErrInvalidDefinition, if any
	}{
		{name: "unknown provider", file: "name: a\nversion: v1\nmodel: {provider: gemini, model: g}\n",
			want: []string{`model: unknown provider "gemini" (want openai, anthropic or scripted)`}, is: model.ErrInvalidConfig},
		{name: "no provider", file: "name: a\nversion: v1\nmodel: {model: g}\n",
			want: []string{"model: provider is required"}, is: model.ErrInvalidConfig},
		{name: "no model section", file: "name: a\nversion: v1\n",
			want: []string{"model: provider is required"}, is: model.ErrInvalidConfig},
		{name: "openai without model", file: "name: a\nversion: v1\nmodel: {provider: openai, api_key_env: OPENAI_API_KEY}\n",
			want: []string{`model: model is required for provider "openai"`}, is: model.ErrInvalidConfig},
		{name: "anthropic without model", file: "name: a\nversion: v1\nmodel: {provider: anthropic, api_key_env: OTHER_KEY}\n",
			want: []string{`model: model is required for provider "anthropic"`}, is: model.ErrInvalidConfig},
		{name: "anthropic key unset", file: "name: claude\nversion: v1\nmodel: {provider: anthropic, model: claude-sonnet-4-5, api_key_env: ANTHROPIC_API_KEY}\n",
			want: []string{"model.api_key_env: environment variable ANTHROPIC_API_KEY is not set or empty"}, is: ErrKeyNotSet},
		{name: "openai key unset", file: "name: gpt\nversion: v1\nmodel: {provider: openai, model: gpt-4o, api_key_env: MY_OPENAI_KEY, base_url: 'http://127.0.0.1:1/v1'}\n",
			want: []string{"model.api_key_env: environment variable MY_OPENAI_KEY is not set or empty"}, is: ErrKeyNotSet},
		{name: "key set but empty", file: "name: gpt\nversion: v1\nmodel: {provider: openai, model: gpt-4o, api_key_env: EMPTY_KEY}\n",
			want: []string{"model.api_key_env: environment variable EMPTY_KEY is not set or empty"}, is: ErrKeyNotSet},
		{name: "unset key beside other problems", file: "name: a\nmodel: {provider: anthropic, model: c, api_key_env: ANTHROPIC_API_KEY, max_tokens: -1}\n",
			want: []string{"version: required", "model: max_tokens must not be negative",
				"model.api_key_env: environment variable ANTHROPIC_API_KEY is not set or empty"}, is: ErrKeyNotSet},
		// Not a variable name, so never looked up nor echoed: Validate's
		// problem alone.
		{name: "key in api_key_env", file: "name: a\nversion: v1\nmodel: {provider: openai, model: m, api_key_env: sk-0penAI-S3cret}\n",
			want: []string{"model.api_key_env: must name an environment variable (letters, digits and _, not starting with a digit), never hold the key itself"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadWith(strings.NewReader(tt.file), "agents/bad.yaml", LoadOptions{LookupEnv: lookup})
			require.ErrorIs(t, err, ErrInvalidDefinition)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			lines := strings.Split(err.Error(), "\n")
			for _, l := range lines {
				require.True(t, strings.HasPrefix(l, "agents/bad.yaml: "), "every problem names the file: %q", l)
			}
			for _, w := range tt.want {
				require.Contains(t, lines, "agents/bad.yaml: "+w)
			}
			require.Len(t, lines, len(tt.want), "no other problem: %v", err)
			require.NotContains(t, err.Error(), "S3cret", "no environment value shown")
		})
	}
}

// TestLoadKeyCheck: the key check asks the injected lookup only for the
// variable a non-scripted provider names, passes when it is set, and is
// skipped without a lookup (Load, LoadDir: `hxd serve --engine
// temporal`).
func TestLoadKeyCheck(t *testing.T) {
	t.Parallel()
	const claude = "name: claude\nversion: v1\nmodel: {provider: anthropic, model: claude-sonnet-4-5, api_key_env: ANTHROPIC_API_KEY}\n"
	var asked []string
	set := func(k string) (string, bool) { asked = append(asked, k); return "sk-ant-S3cret", true }
	d, err := LoadWith(strings.NewReader(claude), "claude.yaml", LoadOptions{LookupEnv: set})
	require.NoError(t, err)
	require.Equal(t, "ANTHROPIC_API_KEY", d.Model.APIKeyEnv)
	require.Equal(t, []string{"ANTHROPIC_API_KEY"}, asked)

	d, err = Load(strings.NewReader(claude), "claude.yaml")
	require.NoError(t, err, "no lookup: not checked")
	require.Equal(t, model.ProviderAnthropic, d.Model.Provider)

	unset := func(k string) (string, bool) { asked = append(asked, k); return "", false }
	asked = nil
	_, err = LoadWith(strings.NewReader(minimal+"  # no key\n"), "s.yaml", LoadOptions{LookupEnv: unset})
	require.NoError(t, err)
	_, err = LoadWith(strings.NewReader(strings.Replace(minimal, "provider: scripted", "provider: scripted\n  api_key_env: UNUSED_KEY", 1)), "s.yaml", LoadOptions{LookupEnv: unset})
	require.NoError(t, err, "the scripted provider uses no key")
	_, err = LoadWith(strings.NewReader("name: a\nversion: v1\nmodel: {provider: openai, model: m, base_url: 'http://127.0.0.1:11434/v1'}\n"), "local.yaml", LoadOptions{LookupEnv: unset})
	require.NoError(t, err, "no api_key_env: a server without keys")
	require.Empty(t, asked)
}

// TestLoadDirWithKeys: LoadDirWith checks every file's key variable and
// names each file whose variable is unset, beside the taken refs.
func TestLoadDirWithKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"claude.yaml": "name: claude\nversion: v1\nmodel: {provider: anthropic, model: claude-sonnet-4-5, api_key_env: ANTHROPIC_API_KEY}\n",
		"gpt.yaml":    "name: gpt\nversion: v1\nmodel: {provider: openai, model: gpt-4o, api_key_env: OPENAI_API_KEY}\n",
		"demo.yaml":   minimal,
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	env := map[string]string{"OPENAI_API_KEY": "sk-0penAI-S3cret"}
	opts := LoadOptions{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Taken:     map[Ref]string{{Name: "a", Version: "v1"}: "--demo"},
	}
	_, err := LoadDirWith(dir, opts)
	require.ErrorIs(t, err, ErrKeyNotSet)
	lines := strings.Split(err.Error(), "\n")
	require.ElementsMatch(t, []string{
		filepath.Join(dir, "claude.yaml") + ": model.api_key_env: environment variable ANTHROPIC_API_KEY is not set or empty",
		filepath.Join(dir, "demo.yaml") + ": agent a@v1 is already defined by --demo",
	}, lines)
	require.NotContains(t, err.Error(), "S3cret")

	env["ANTHROPIC_API_KEY"] = "sk-ant-S3cret"
	opts.Taken = nil
	defs, err := LoadDirWith(dir, opts)
	require.NoError(t, err)
	require.Len(t, defs, 3)

	defs, err = LoadDir(dir)
	require.NoError(t, err, "LoadDir checks no keys")
	require.Len(t, defs, 3)
}

func TestRetainFinishedFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		want time.Duration
		ok   bool
	}{
		{name: "none", file: minimal},
		{name: "hours", file: minimal + "retention: {finished_for: 720h}\n", want: 720 * time.Hour, ok: true},
		{name: "minutes", file: minimal + "retention:\n  finished_for: 90m\n", want: 90 * time.Minute, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := Load(strings.NewReader(tt.file), "agents/a.yaml")
			require.NoError(t, err)
			got, ok := d.RetainFinishedFor()
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}
