package model

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()

	script := []ScriptStep{{Text: "hi"}}
	tests := []struct {
		name string
		cfg  Config
		// wantErrs are substrings that must all appear; none means valid.
		wantErrs []string
	}{
		{name: "scripted ok", cfg: Config{Provider: ProviderScripted, Script: script}},
		{name: "openai ok", cfg: Config{Provider: ProviderOpenAI, Model: "gpt-4o-mini"}},
		{
			name: "openai with base url and key env ok",
			cfg:  Config{Provider: ProviderOpenAI, Model: "m", BaseURL: "http://127.0.0.1:8000/v1", APIKeyEnv: "KEY"},
		},
		{name: "anthropic ok for validate", cfg: Config{Provider: ProviderAnthropic, Model: "claude"}},
		{name: "missing provider", cfg: Config{}, wantErrs: []string{"provider is required"}},
		{name: "unknown provider", cfg: Config{Provider: "gemini"}, wantErrs: []string{`unknown provider "gemini"`}},
		{name: "scripted without script", cfg: Config{Provider: ProviderScripted}, wantErrs: []string{"non-empty script"}},
		{
			name:     "scripted negative fail_attempts",
			cfg:      Config{Provider: ProviderScripted, Script: []ScriptStep{{}, {FailAttempts: -1}}},
			wantErrs: []string{"script step 2: fail_attempts must not be negative"},
		},
		{name: "openai without model", cfg: Config{Provider: ProviderOpenAI}, wantErrs: []string{`model is required for provider "openai"`}},
		{name: "anthropic without model", cfg: Config{Provider: ProviderAnthropic}, wantErrs: []string{`model is required for provider "anthropic"`}},
		{
			name:     "relative base url",
			cfg:      Config{Provider: ProviderOpenAI, Model: "m", BaseURL: "localhost:8000"},
			wantErrs: []string{"base_url must be an absolute http or https URL"},
		},
		{
			name:     "ftp base url",
			cfg:      Config{Provider: ProviderOpenAI, Model: "m", BaseURL: "ftp://example.com/v1"},
			wantErrs: []string{"base_url must be an absolute http or https URL"},
		},
		{
			name: "anthropic thinking ok", cfg: Config{Provider: ProviderAnthropic, Model: "c", MaxTokens: 2000, Thinking: &Thinking{BudgetTokens: 1999}},
		},
		{
			name:     "thinking budget below 1024",
			cfg:      Config{Provider: ProviderAnthropic, Model: "c", Thinking: &Thinking{BudgetTokens: 1023}},
			wantErrs: []string{"thinking.budget_tokens must be at least 1024"},
		},
		{
			name:     "thinking budget not below default max_tokens",
			cfg:      Config{Provider: ProviderAnthropic, Model: "c", Thinking: &Thinking{BudgetTokens: DefaultMaxTokens}},
			wantErrs: []string{"thinking.budget_tokens must be less than max_tokens (4096)"},
		},
		{
			name:     "thinking on openai",
			cfg:      Config{Provider: ProviderOpenAI, Model: "m", Thinking: &Thinking{BudgetTokens: 2048}},
			wantErrs: []string{`thinking is only supported by provider "anthropic"`},
		},
		{
			name:     "every problem reported",
			cfg:      Config{Provider: ProviderOpenAI, MaxTokens: -1, TimeoutSeconds: -2},
			wantErrs: []string{"model is required", "max_tokens must not be negative", "timeout_seconds must not be negative"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if len(tt.wantErrs) == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			for _, want := range tt.wantErrs {
				require.Contains(t, err.Error(), want)
			}
			require.Len(t, strings.Split(err.Error(), "\n"), len(tt.wantErrs), "one line per problem")
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()

	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	tests := []struct {
		name      string
		cfg       Config
		opts      Options
		wantType  any // a value of the expected provider type
		wantErr   string
		forbidden string // must not appear in the error
	}{
		{name: "scripted", cfg: Config{Provider: ProviderScripted, Script: []ScriptStep{{Text: "x"}}}, wantType: &Scripted{}},
		{name: "openai without key env", cfg: Config{Provider: ProviderOpenAI, Model: "m"}, wantType: &OpenAI{}},
		{
			name:     "openai with key env",
			cfg:      Config{Provider: ProviderOpenAI, Model: "m", APIKeyEnv: "K"},
			opts:     Options{LookupEnvFunc: env(map[string]string{"K": "sk-secret"})},
			wantType: &OpenAI{},
		},
		{
			name:    "openai key env unset",
			cfg:     Config{Provider: ProviderOpenAI, Model: "m", APIKeyEnv: "MISSING_KEY"},
			opts:    Options{LookupEnvFunc: env(map[string]string{"K": "sk-secret"})},
			wantErr: `environment variable "MISSING_KEY" named by api_key_env is not set`,
		},
		{
			name:      "openai key env empty",
			cfg:       Config{Provider: ProviderOpenAI, Model: "m", APIKeyEnv: "K"},
			opts:      Options{LookupEnvFunc: env(map[string]string{"K": ""})},
			wantErr:   `environment variable "K" named by api_key_env is not set`,
			forbidden: "sk-",
		},
		{
			name:    "openai key env without lookup func",
			cfg:     Config{Provider: ProviderOpenAI, Model: "m", APIKeyEnv: "K"},
			wantErr: `environment variable "K"`,
		},
		{name: "anthropic", cfg: Config{Provider: ProviderAnthropic, Model: "claude"}, wantType: &Anthropic{}},
		{
			name:     "anthropic with key env and thinking",
			cfg:      Config{Provider: ProviderAnthropic, Model: "claude", APIKeyEnv: "K", Thinking: &Thinking{BudgetTokens: 1024}},
			opts:     Options{LookupEnvFunc: env(map[string]string{"K": "sk-ant-secret"})},
			wantType: &Anthropic{},
		},
		{
			name:      "anthropic key env unset",
			cfg:       Config{Provider: ProviderAnthropic, Model: "claude", APIKeyEnv: "CLAUDE_KEY"},
			opts:      Options{LookupEnvFunc: env(map[string]string{"K": "sk-ant-secret"})},
			wantErr:   `environment variable "CLAUDE_KEY" named by api_key_env is not set`,
			forbidden: "sk-ant",
		},
		{name: "invalid config", cfg: Config{Provider: ProviderOpenAI}, wantErr: "model is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(tt.cfg, tt.opts)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrInvalidConfig)
				require.Contains(t, err.Error(), tt.wantErr)
				require.Nil(t, p)
				if tt.forbidden != "" {
					require.NotContains(t, err.Error(), tt.forbidden)
				}
				return
			}
			require.NoError(t, err)
			require.IsType(t, tt.wantType, p)
		})
	}
}

func TestNewOpenAIWrongProvider(t *testing.T) {
	t.Parallel()
	_, err := NewOpenAI(Config{Provider: ProviderScripted, Script: []ScriptStep{{}}}, Options{})
	require.True(t, errors.Is(err, ErrInvalidConfig))
}
