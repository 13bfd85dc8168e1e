package model

import "fmt"

// New validates cfg and builds its provider:
//
//   - scripted → *Scripted over cfg.Script;
//   - openai → *OpenAI (Chat Completions against cfg.BaseURL);
//   - anthropic → *Anthropic (the Messages API, streamed, against
//     cfg.BaseURL).
//
// Every error wraps ErrInvalidConfig.
func New(cfg Config, opts Options) (Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch cfg.Provider {
	case ProviderScripted:
		return NewScripted(cfg.Script), nil
	case ProviderOpenAI:
		return NewOpenAI(cfg, opts)
	case ProviderAnthropic:
		return NewAnthropic(cfg, opts)
	default:
		// Unreachable: Validate rejects unknown providers.
		return nil, fmt.Errorf("%w: unknown provider %q", ErrInvalidConfig, cfg.Provider)
	}
}
