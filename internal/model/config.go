package model

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// Provider names accepted in Config.Provider.
const (
	ProviderScripted  = "scripted"
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// Config is the `model:` section of an agent file.
type Config struct {
	// Provider is openai | anthropic | scripted. Required.
	Provider string `json:"provider"`
	// Model is the provider's model name. Required except for scripted.
	Model string `json:"model,omitempty"`
	// BaseURL of the provider's server. Optional, default: https://api.openai.com/v1
	// (openai), https://api.anthropic.com/ (anthropic).
	BaseURL string `json:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding the API key (never the key itself).
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// MaxTokens per response. Optional, default: 4096.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature. Optional, default: provider default.
	Temperature *float64 `json:"temperature,omitempty"`
	// TimeoutSeconds bounds one call. Optional, default: 120.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// Thinking enables Anthropic extended thinking (anthropic only).
	// Optional, default: none (no thinking).
	Thinking *Thinking `json:"thinking,omitempty"`
	// Script drives the scripted provider: step k of a run uses entry k.
	Script []ScriptStep `json:"script,omitempty"`
	// Fallback lists the models tried, in order, when this one's transient
	// failures have used up the agent's retry policy (see Chain). Each
	// entry is a model section of its own, without a fallback list.
	// Optional, default: none.
	Fallback []Config `json:"fallback,omitempty"`
}

// Thinking is the `model.thinking` section: extended thinking with a token
// budget (Anthropic: at least MinThinkingBudget and below max_tokens).
type Thinking struct {
	// BudgetTokens bounds the tokens spent thinking. Required.
	BudgetTokens int `json:"budget_tokens"`
}

// MinThinkingBudget is the smallest budget_tokens Anthropic accepts.
const MinThinkingBudget = 1024

// ScriptStep is one scripted model response.
type ScriptStep struct {
	// Text of the response.
	Text string `json:"text,omitempty"`
	// ToolCalls requested by the response.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// StopReason, default: "tool_use" with tool calls, else "end_turn".
	StopReason string `json:"stop_reason,omitempty"`
	// FailAttempts makes attempts 1..n of this step fail with a transient
	// connection error.
	FailAttempts int `json:"fail_attempts,omitempty"`
	// Usage reported for the step. Optional: without it the step reports
	// no usage (Response.UsageReported false, so usage_incomplete).
	Usage *Usage `json:"usage,omitempty"`
	// Thinking is the response's reasoning text; streamed as thinking
	// deltas before the text.
	Thinking string `json:"thinking,omitempty"`
	// FailAfterDeltas makes each failing attempt (1..FailAttempts), when
	// streamed, deliver its first n text pieces before it fails: a stream
	// that breaks mid-answer. Needs fail_attempts; 0: fail before any.
	FailAfterDeltas int `json:"fail_after_deltas,omitempty"`
}

// Options are the process-level dependencies of providers.
type Options struct {
	// LookupEnvFunc reads API keys by env-var name; default: none set.
	LookupEnvFunc func(string) (string, bool)
	// HTTPClient for provider calls; default: a client without timeout
	// (each call is bounded by Config.TimeoutSeconds).
	HTTPClient *http.Client
}

// ErrInvalidConfig is returned by Validate and New for a bad model section.
var ErrInvalidConfig = errors.New("invalid model config")

// Validate reports every problem of the section.
func (c Config) Validate() error {
	var errs []error
	switch c.Provider {
	case ProviderScripted:
		if len(c.Script) == 0 {
			errs = append(errs, fmt.Errorf("%w: scripted provider needs a non-empty script", ErrInvalidConfig))
		}
		for i, s := range c.Script {
			if s.FailAttempts < 0 {
				errs = append(errs, fmt.Errorf("%w: script step %d: fail_attempts must not be negative", ErrInvalidConfig, i+1))
			}
			if s.FailAfterDeltas < 0 {
				errs = append(errs, fmt.Errorf("%w: script step %d: fail_after_deltas must not be negative", ErrInvalidConfig, i+1))
			}
			if s.FailAfterDeltas > 0 && s.FailAttempts == 0 {
				errs = append(errs, fmt.Errorf("%w: script step %d: fail_after_deltas needs fail_attempts", ErrInvalidConfig, i+1))
			}
			if n := len(SplitPieces(s.Text)); s.FailAfterDeltas > n {
				errs = append(errs, fmt.Errorf("%w: script step %d: fail_after_deltas %d exceeds the %d pieces of its text", ErrInvalidConfig, i+1, s.FailAfterDeltas, n))
			}
		}
	case ProviderOpenAI, ProviderAnthropic:
		if c.Model == "" {
			errs = append(errs, fmt.Errorf("%w: model is required for provider %q", ErrInvalidConfig, c.Provider))
		}
		if c.BaseURL != "" {
			if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("%w: base_url must be an absolute http or https URL", ErrInvalidConfig))
			}
		}
	case "":
		errs = append(errs, fmt.Errorf("%w: provider is required", ErrInvalidConfig))
	default:
		errs = append(errs, fmt.Errorf("%w: unknown provider %q (want openai, anthropic or scripted)", ErrInvalidConfig, c.Provider))
	}
	if c.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("%w: max_tokens must not be negative", ErrInvalidConfig))
	}
	if c.Thinking != nil {
		maxTokens := c.MaxTokens
		if maxTokens == 0 {
			maxTokens = DefaultMaxTokens
		}
		switch {
		case c.Provider != ProviderAnthropic:
			errs = append(errs, fmt.Errorf("%w: thinking is only supported by provider %q", ErrInvalidConfig, ProviderAnthropic))
		case c.Thinking.BudgetTokens < MinThinkingBudget:
			errs = append(errs, fmt.Errorf("%w: thinking.budget_tokens must be at least %d", ErrInvalidConfig, MinThinkingBudget))
		case c.Thinking.BudgetTokens >= maxTokens:
			errs = append(errs, fmt.Errorf("%w: thinking.budget_tokens must be less than max_tokens (%d)", ErrInvalidConfig, maxTokens))
		}
	}
	if c.TimeoutSeconds < 0 {
		errs = append(errs, fmt.Errorf("%w: timeout_seconds must not be negative", ErrInvalidConfig))
	}
	errs = append(errs, c.fallbackErrors()...)
	return errors.Join(errs...)
}
