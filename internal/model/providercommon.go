package model

import (
	"fmt"
	"net/http"
	"time"
)

// providerKey returns the API key named by cfg.APIKeyEnv, read once through
// opts.LookupEnvFunc; "" when the section names no variable (local
// servers, proxies). An unset or empty variable is an error wrapping
// ErrInvalidConfig that names the variable, never a value.
func providerKey(cfg Config, opts Options) (string, error) {
	if cfg.APIKeyEnv == "" {
		return "", nil
	}
	lookup := opts.LookupEnvFunc
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	key, ok := lookup(cfg.APIKeyEnv)
	if !ok || key == "" {
		return "", fmt.Errorf("%w: environment variable %q named by api_key_env is not set", ErrInvalidConfig, cfg.APIKeyEnv)
	}
	return key, nil
}

// providerHTTPClient is opts.HTTPClient, or a client without timeout (each
// call is bounded by Config.TimeoutSeconds).
func providerHTTPClient(opts Options) *http.Client {
	if opts.HTTPClient != nil {
		return opts.HTTPClient
	}
	return &http.Client{}
}

// callLimits are a section's max_tokens and per-call timeout, defaults
// applied.
func callLimits(cfg Config) (maxTokens int, timeout time.Duration) {
	maxTokens = cfg.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens
	}
	seconds := cfg.TimeoutSeconds
	if seconds == 0 {
		seconds = DefaultTimeoutSeconds
	}
	return maxTokens, secondsToDuration(seconds)
}
