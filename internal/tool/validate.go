package tool

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
)

// nameRE is what model providers accept as a tool name.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// FieldError is one problem with one field of a tool config. It wraps
// ErrInvalidConfig.
type FieldError struct {
	// Field is the config key, e.g. "kind" or "retry.attempts".
	Field string
	// Problem is a short description, e.g. `unknown kind "webhok"`.
	Problem string
}

// Error implements error.
func (e *FieldError) Error() string {
	return ErrInvalidConfig.Error() + ": " + e.Field + ": " + e.Problem
}

// Unwrap returns ErrInvalidConfig.
func (e *FieldError) Unwrap() error { return ErrInvalidConfig }

// ValidateConfig reports every problem of cfg (with defaults applied) as
// *FieldError values joined by errors.Join. A builtin tool must name one of
// the standard builtins (BuiltinNames); builtins added through
// Options.Builtins are accepted when named in extraBuiltins.
func ValidateConfig(cfg Config, extraBuiltins ...string) error {
	cfg = cfg.WithDefaults()
	errs := validate(cfg, func(name string) bool {
		return isStandardBuiltin(name) || slices.Contains(extraBuiltins, name)
	})
	if _, err := compileSchema(cfg.InputSchema); err != nil {
		errs = append(errs, &FieldError{Field: "input_schema", Problem: err.Error()})
	}
	return errors.Join(errs...)
}

// validate lists the problems of a config with defaults applied, except
// schema compilation.
func validate(cfg Config, builtinExists func(string) bool) []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	switch {
	case cfg.Name == "":
		add("name", "required")
	case !nameRE.MatchString(cfg.Name):
		add("name", "%q must match %s", cfg.Name, nameRE)
	}
	switch cfg.Kind {
	case KindBuiltin:
		if !builtinExists(cfg.Builtin) {
			add("builtin", "unknown builtin %q", cfg.Builtin)
		}
	case KindWebhook, KindClient:
		if cfg.Builtin != "" {
			add("builtin", "only allowed for kind %q", KindBuiltin)
		}
	default:
		add("kind", "unknown kind %q (want builtin, webhook or client)", cfg.Kind)
	}
	if cfg.Kind == KindWebhook {
		if msg := checkURL(cfg.URL); msg != "" {
			add("url", "%s", msg)
		}
	} else if cfg.URL != "" {
		add("url", "only allowed for kind %q", KindWebhook)
	}
	switch cfg.ReplayPolicy {
	case PolicySafe, PolicyIdempotent, PolicyManual:
	default:
		add("replay_policy", "unknown replay policy %q (want safe, idempotent or manual)", cfg.ReplayPolicy)
	}
	switch cfg.Permission {
	case PermissionAllow, PermissionAsk, PermissionDeny:
	default:
		add("permission", "unknown permission %q (want allow, ask or deny)", cfg.Permission)
	}
	if cfg.TimeoutSeconds < 0 {
		add("timeout_seconds", "must not be negative")
	}
	if r := cfg.Retry; r != nil {
		if r.Attempts < 1 {
			add("retry.attempts", "must be at least 1")
		}
		if r.BackoffSeconds < 0 {
			add("retry.backoff_seconds", "must not be negative")
		}
		if r.MaxBackoffSeconds < 0 {
			add("retry.max_backoff_seconds", "must not be negative")
		}
	}
	return errs
}

// checkURL returns why u is not a usable webhook URL, or "".
func checkURL(u string) string {
	if u == "" {
		return "required for kind webhook"
	}
	_, problem := ParseHTTPURL(u)
	return problem
}

// ParseHTTPURL parses u as an absolute http or https URL with a host; the
// problem, when it is not one, is a short text safe to show (it never
// repeats u).
func ParseHTTPURL(u string) (*url.URL, string) {
	parsed, err := url.Parse(u)
	if err != nil {
		return nil, "not a valid URL"
	}
	if parsed.Scheme != "http" && parsed.Scheme != "https" {
		return nil, fmt.Sprintf("scheme %q is not http or https", parsed.Scheme)
	}
	if parsed.Host == "" {
		return nil, "host is missing"
	}
	return parsed, ""
}
