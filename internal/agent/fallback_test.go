package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/model"
)

// fallbackAgent is a Claude agent with an OpenAI fallback; the bad cases
// below edit it.
const fallbackAgent = `name: fb
version: v1
model:
  provider: anthropic
  model: claude-sonnet-4-5
  api_key_env: ANTHROPIC_API_KEY
  fallback:
    - provider: openai
      model: gpt-4o
      api_key_env: OPENAI_API_KEY
      base_url: http://127.0.0.1:8000/v1
      temperature: 0.2
    - provider: scripted
      script: [{text: "sorry, try later"}]
`

// TestLoadFallback: model.fallback entries load in order, each with the
// model defaults applied.
func TestLoadFallback(t *testing.T) {
	t.Parallel()
	d, err := Load(strings.NewReader(fallbackAgent), "agents/fb.yaml")
	require.NoError(t, err)
	require.Len(t, d.Model.Fallback, 2)
	oai := d.Model.Fallback[0]
	require.Equal(t, model.ProviderOpenAI, oai.Provider)
	require.Equal(t, "gpt-4o", oai.Model)
	require.Equal(t, "OPENAI_API_KEY", oai.APIKeyEnv)
	require.Equal(t, "http://127.0.0.1:8000/v1", oai.BaseURL)
	require.InDelta(t, 0.2, *oai.Temperature, 0)
	require.Equal(t, DefaultMaxTokens, oai.MaxTokens, "default applied to the entry")
	require.InDelta(t, DefaultModelTimeout, oai.TimeoutSeconds, 0)
	require.Equal(t, "sorry, try later", d.Model.Fallback[1].Script[0].Text)
	chain := d.Model.Chain()
	require.Len(t, chain, 3)
	require.Equal(t, "claude-sonnet-4-5", chain[0].Model)
}

// TestLoadBadFallback: a bad fallback entry is refused at load, the
// message naming the file and the entry's index.
func TestLoadBadFallback(t *testing.T) {
	t.Parallel()
	edit := func(old, repl string) string {
		require.Contains(t, fallbackAgent, old)
		return strings.Replace(fallbackAgent, old, repl, 1)
	}
	tests := []struct {
		name string
		file string
		want []string
	}{
		{name: "unknown provider", file: edit("provider: openai", "provider: gemini"),
			want: []string{`model.fallback[0]: unknown provider "gemini" (want openai, anthropic or scripted)`}},
		{name: "missing model", file: edit("      model: gpt-4o\n", ""),
			want: []string{`model.fallback[0]: model is required for provider "openai"`}},
		{name: "missing provider", file: edit("    - provider: scripted\n      script:", "    - script:"),
			want: []string{"model.fallback[1]: provider is required"}},
		{name: "nested fallback", file: edit("      temperature: 0.2\n", "      temperature: 0.2\n      fallback: [{provider: openai, model: gpt-4o-mini}]\n"),
			want: []string{"model.fallback[0]: a fallback entry cannot have a fallback list of its own"}},
		{name: "bad base_url", file: edit("http://127.0.0.1:8000/v1", "127.0.0.1:8000"),
			want: []string{"model.fallback[0]: base_url must be an absolute http or https URL"}},
		{name: "key in api_key_env", file: edit("api_key_env: OPENAI_API_KEY", "api_key_env: sk-pr0j-S3cretKey"),
			want: []string{"model.fallback[0].api_key_env: must name an environment variable (letters, digits and _, not starting with a digit), never hold the key itself"}},
		{name: "script on openai", file: edit("      temperature: 0.2\n", "      temperature: 0.2\n      script: [{text: x}]\n"),
			want: []string{"model.fallback[0].script: only used by the scripted provider"}},
		{name: "script names unknown tool", file: edit(`script: [{text: "sorry, try later"}]`, `script: [{tool_calls: [{id: c1, name: nope}]}]`),
			want: []string{`model.fallback[1].script[0].tool_calls[0].name: unknown tool "nope"`}},
		{name: "unknown key in an entry", file: edit("temperature: 0.2", "temprature: 0.2"),
			want: []string{"model.fallback[0].temprature: unknown field"}},
		{name: "not a list", file: "name: a\nversion: v1\nmodel: {provider: openai, model: m, fallback: {provider: openai}}\n",
			want: []string{"model.fallback: got mapping, want list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(strings.NewReader(tt.file), "agents/fb.yaml")
			require.ErrorIs(t, err, ErrInvalidDefinition)
			lines := strings.Split(err.Error(), "\n")
			for _, l := range lines {
				require.True(t, strings.HasPrefix(l, "agents/fb.yaml: "), "every problem names the file: %q", l)
			}
			for _, w := range tt.want {
				require.Contains(t, lines, "agents/fb.yaml: "+w)
			}
			require.NotContains(t, err.Error(), "S3cret", "no secret echoed")
		})
	}
}

// TestCheckKeysFallback: the key variable of every fallback entry is
// checked too, each unset one named in a problem of its own on the
// entry's api_key_env, its value never shown; a scripted entry needs none.
func TestCheckKeysFallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{name: "all set", env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-S3cret", "OPENAI_API_KEY": "sk-S3cret"}},
		{name: "fallback key unset", env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-S3cret"},
			want: []string{"model.fallback[0].api_key_env: environment variable OPENAI_API_KEY is not set or empty"}},
		{name: "fallback key empty", env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-S3cret", "OPENAI_API_KEY": ""},
			want: []string{"model.fallback[0].api_key_env: environment variable OPENAI_API_KEY is not set or empty"}},
		{name: "both unset", env: map[string]string{"UNRELATED": "S3cret"}, want: []string{
			"model.api_key_env: environment variable ANTHROPIC_API_KEY is not set or empty",
			"model.fallback[0].api_key_env: environment variable OPENAI_API_KEY is not set or empty",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			d, err := Load(strings.NewReader(fallbackAgent), "agents/fb.yaml")
			require.NoError(t, err, "Load alone checks no key")
			err = d.CheckKeys(lookup)
			if len(tt.want) == 0 {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrKeyNotSet)
				var fe *FieldError
				require.True(t, errors.As(err, &fe))
			}
			_, lerr := LoadWith(strings.NewReader(fallbackAgent), "agents/fb.yaml", LoadOptions{LookupEnv: lookup})
			if len(tt.want) == 0 {
				require.NoError(t, lerr)
				return
			}
			require.ErrorIs(t, lerr, ErrKeyNotSet)
			lines := strings.Split(lerr.Error(), "\n")
			require.Len(t, lines, len(tt.want), "one line per unset variable: %q", lines)
			for _, w := range tt.want {
				require.Contains(t, lines, "agents/fb.yaml: "+w)
			}
			require.NotContains(t, lerr.Error(), "S3cret", "no value shown")
		})
	}
}
