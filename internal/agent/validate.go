package agent

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"time"

	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/tool"
)

// envNameRE is what api_key_env must match: an environment variable name.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// refRE is what an agent name or version must match.
var refRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,64}$`)

// ErrInvalidDefinition is wrapped by every problem Validate and Load report.
var ErrInvalidDefinition = errors.New("invalid agent definition")

// ErrKeyNotSet is wrapped by the problem CheckKeys reports: the variable
// api_key_env names is not set (or empty) in the environment.
var ErrKeyNotSet = errors.New("API key variable not set")

// FieldError is one problem with one field of an agent definition, e.g.
// Field `tools[0].kind`, Problem `unknown kind "webhok"`. It wraps
// ErrInvalidDefinition and, when set, Cause.
type FieldError struct {
	// Field is the path of the field in the agent file; empty for the file
	// as a whole.
	Field string
	// Problem is a short description.
	Problem string
	// Cause is the underlying error, if any (e.g. a *tool.FieldError).
	Cause error
}

// Error implements error.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// Unwrap returns ErrInvalidDefinition and the cause.
func (e *FieldError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrInvalidDefinition}
	}
	return []error{ErrInvalidDefinition, e.Cause}
}

// Validate reports every problem of d (defaults are applied first, so a
// definition as written and one after WithDefaults validate alike) as
// *FieldError values joined by errors.Join. Builtin tools must be standard
// builtins or named in extraBuiltins.
func (d *Definition) Validate(extraBuiltins ...string) error {
	v := d.WithDefaults()
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	checkRef := func(field, s string) {
		switch {
		case s == "":
			add(field, "required")
		case !refRE.MatchString(s):
			add(field, "%q must match %s", s, refRE)
		}
	}
	checkRef("name", v.Name)
	checkRef("version", v.Version)

	if v.MaxIterations < 0 {
		add("max_iterations", "must not be negative")
	}
	if v.MaxResultChars < 0 {
		add("max_result_chars", "must not be negative")
	}
	if v.MaxSessionDurationSeconds < 0 {
		add("max_session_duration_seconds", "must not be negative")
	}
	if r := v.Retention; r != nil {
		if d, err := time.ParseDuration(r.FinishedFor); err != nil || d <= 0 {
			add("retention.finished_for", "must be a positive duration such as 720h")
		}
	}
	if r := v.Retry; r != nil {
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

	for _, e := range splitJoined(v.Model.Validate()) {
		errs = append(errs, modelProblem(e))
	}
	for i, m := range v.Model.Chain() {
		if k := m.APIKeyEnv; k != "" && !envNameRE.MatchString(k) {
			// Never echoed: such a value is likely the key itself.
			add(chainField(i, "api_key_env"), "must name an environment variable (letters, digits and _, not starting with a digit), never hold the key itself")
		}
	}
	errs = append(errs, validateMiddleware("response_middleware", v.ResponseMiddleware)...)

	names := make(map[string]bool, len(v.Tools))
	for i, t := range v.Tools {
		prefix := fmt.Sprintf("tools[%d]", i)
		for _, e := range splitJoined(tool.ValidateConfig(t.Config, extraBuiltins...)) {
			var fe *tool.FieldError
			if errors.As(e, &fe) {
				errs = append(errs, &FieldError{Field: prefix + "." + fe.Field, Problem: fe.Problem, Cause: e})
			} else {
				errs = append(errs, &FieldError{Field: prefix, Problem: e.Error(), Cause: e})
			}
		}
		if t.Name != "" && names[t.Name] {
			add(prefix+".name", "duplicate tool name %q", t.Name)
		}
		names[t.Name] = true
		errs = append(errs, validateMiddleware(prefix+".result_middleware", t.ResultMiddleware)...)
	}

	for _, e := range splitJoined(mcp.ValidateServers(v.MCPServers)) {
		var fe *mcp.FieldError
		if errors.As(e, &fe) {
			errs = append(errs, &FieldError{Field: fe.Field, Problem: fe.Problem, Cause: e})
		}
	}
	// A bridged tool's name is only checked at session creation.
	known := func(name string) bool { return names[name] || mcp.MayBeBridged(name, v.MCPServers) }
	for i, m := range v.Model.Chain() {
		errs = append(errs, validateScript(chainField(i, "script"), m, known)...)
	}
	return errors.Join(errs...)
}

// CheckKeys reports the API key variables of d that lookup (os.LookupEnv's
// signature) says are unset or empty, the model section's and each
// fallback entry's, as *FieldError values on model.api_key_env (or
// model.fallback[i].api_key_env) wrapping ErrInvalidDefinition and
// ErrKeyNotSet that name the variable, joined by errors.Join. The value
// is never kept or shown. Nothing is checked for the scripted provider,
// which uses no key, nor for an api_key_env that is not a variable name
// (Validate reports it without echoing it: it may be the key itself).
func (d *Definition) CheckKeys(lookup func(string) (string, bool)) error {
	var errs []error
	for i, m := range d.Model.Chain() {
		name := m.APIKeyEnv
		if name == "" || m.Provider == model.ProviderScripted || !envNameRE.MatchString(name) {
			continue
		}
		if v, ok := lookup(name); ok && v != "" {
			continue
		}
		errs = append(errs, &FieldError{Field: chainField(i, "api_key_env"), Problem: fmt.Sprintf("environment variable %s is not set or empty", name), Cause: ErrKeyNotSet})
	}
	return errors.Join(errs...)
}

// validateMiddleware checks a middleware list and precompiles its regexes.
func validateMiddleware(field string, ms []Middleware) []error {
	var errs []error
	for i, m := range ms {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case m.AppendText == nil && m.RegexReplace == nil, m.AppendText != nil && m.RegexReplace != nil:
			errs = append(errs, &FieldError{Field: f, Problem: "needs exactly one of append_text or regex_replace"})
		case m.RegexReplace != nil:
			if m.RegexReplace.Pattern == "" {
				errs = append(errs, &FieldError{Field: f + ".regex_replace.pattern", Problem: "required"})
			} else if _, err := compileRegex(m.RegexReplace.Pattern); err != nil {
				errs = append(errs, &FieldError{Field: f + ".regex_replace.pattern", Problem: describeRegexError(err), Cause: err})
			}
		}
	}
	return errs
}

// describeRegexError shortens a regexp syntax error.
func describeRegexError(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid regex: %s: %q", se.Code, se.Expr)
	}
	return "invalid regex"
}

// splitJoined returns the errors joined in err by errors.Join (nil for
// nil); any other error, including a *FieldError, is returned alone.
func splitJoined(err error) []error {
	if err == nil {
		return nil
	}
	// err itself, not its chain: a *FieldError has Unwrap() []error too,
	// but is one problem, not a join.
	if _, ok := err.(*FieldError); ok { //nolint:errorlint // err itself, not its chain (above)
		return []error{err}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
