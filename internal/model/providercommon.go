package model

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"hxd/internal/telemetry/propagate"
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
// call is bounded by Config.TimeoutSeconds), whose requests carry the
// trace of their context to the provider (W3C traceparent) when tracing
// is on.
func providerHTTPClient(opts Options) *http.Client {
	c := &http.Client{}
	if opts.HTTPClient != nil {
		cp := *opts.HTTPClient
		c = &cp
	}
	c.Transport = propagate.InjectTransport(c.Transport)
	return c
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

// withUsage attaches u, what the provider reported for the attempt before it
// failed, to the *Failure in err (when err holds one without usage yet),
// and returns err. A nil u or a ctx error leaves err as it is.
func withUsage(err error, u *Usage) error {
	var f *Failure
	if u != nil && errors.As(err, &f) && f.Usage == nil {
		f.Usage = u
	}
	return err
}

// maxNameInMessage bounds a model-chosen name quoted in a failure message.
const maxNameInMessage = 64

// toolArgumentsFailure is the failure of a reply whose tool call (name, id)
// has arguments that are not a usable JSON object. The message names the
// tool and the call id (quoted and cut to a bounded length: both come from
// the model), never the arguments.
func toolArgumentsFailure(name, id string) *Failure {
	return &Failure{
		Type:      FailureToolArguments,
		Message:   fmt.Sprintf("model reply: tool call %s (id %s) has arguments that are not a JSON object", quoteBounded(name), quoteBounded(id)),
		Retryable: true,
	}
}

// quoteBounded quotes s, cut to maxNameInMessage bytes (on a rune
// boundary, marked with "…").
func quoteBounded(s string) string {
	if len(s) <= maxNameInMessage {
		return strconv.Quote(s)
	}
	cut := maxNameInMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut] + "…")
}
