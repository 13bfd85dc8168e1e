package mcp

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"hxd/internal/tool"
)

// Transports a pinned tool may come from.
const (
	TransportStdio          = "stdio"
	TransportStreamableHTTP = "streamable_http"
	TransportSSE            = "sse"
)

// KindMCP is the tool.Config Kind of a bridged MCP tool.
const KindMCP = "mcp"

// DefaultTimeoutSeconds bounds one MCP call when timeout_seconds is not given.
const DefaultTimeoutSeconds = 60.0

// DefaultRetry is the reference's DEFAULT_MCP_RETRY: bridged tools of a
// safe or idempotent server re-run a throttled or failed call up to three
// times (a manual tool is never retried).
var DefaultRetry = tool.Retry{Attempts: 3, BackoffSeconds: 1, MaxBackoffSeconds: 30, RetryErrorResults: true}

// Limits of a declaration (every input is bounded).
const (
	maxArgs       = 256
	maxArgChars   = 4096
	maxEnvEntries = 256
	maxAllowList  = 1024
	maxTimeout    = 24 * 3600.0
)

// ErrInvalidConfig is wrapped by every problem Validate reports.
var ErrInvalidConfig = errors.New("invalid mcp server config")

// FieldError is one problem with one field of an MCP server declaration,
// e.g. Field "url", Problem "only one of command or url". It wraps
// ErrInvalidConfig.
type FieldError struct {
	// Field is the key in the declaration, e.g. "env_from.TOKEN".
	Field string
	// Problem is a short description; it never holds a secret (headers and
	// env_from only name variables) nor an env value.
	Problem string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Unwrap returns ErrInvalidConfig.
func (e *FieldError) Unwrap() error { return ErrInvalidConfig }

// ServerConfig is one entry of an agent file's `mcp_servers:` list.
// Secrets are only named (headers_env, env_from), never written.
type ServerConfig struct {
	// Name keys the connection and prefixes every bridged tool. Required,
	// [a-zA-Z0-9_-]{1,64}, unique within the agent.
	Name string `json:"name"`
	// Command runs a stdio server: the program and its arguments. Exactly
	// one of Command or URL.
	Command []string `json:"command,omitempty"`
	// URL of an HTTP server: streamable HTTP first, then legacy SSE on the
	// same URL. Exactly one of Command or URL.
	URL string `json:"url,omitempty"`
	// HeadersEnv maps an HTTP header to the environment variable holding
	// its value (URL servers only). Optional.
	HeadersEnv map[string]string `json:"headers_env,omitempty"`
	// Env holds literal environment variables of a stdio child. Optional.
	Env map[string]string `json:"env,omitempty"`
	// EnvFrom maps a stdio child's variable to the hxd environment
	// variable its value is taken from. Optional.
	EnvFrom map[string]string `json:"env_from,omitempty"`
	// TimeoutSeconds bounds one call. Optional, default: 60.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// Permission is ask | allow | deny. Optional, default: ask (as the reference).
	Permission string `json:"permission,omitempty"`
	// ReplayPolicy is manual | safe | idempotent. Optional, default: manual.
	ReplayPolicy string `json:"replay_policy,omitempty"`
	// Retry of transient failures (safe/idempotent only). Optional,
	// default: DefaultRetry.
	Retry *tool.Retry `json:"retry,omitempty"`
	// Tools is an allow-list of the server's tool names (as the server
	// names them). Optional, default: every tool.
	Tools []string `json:"tools,omitempty"`
}

// WithDefaults returns c with every optional field set to its default.
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.TimeoutSeconds == 0 {
		c.TimeoutSeconds = DefaultTimeoutSeconds
	}
	if c.Permission == "" {
		c.Permission = tool.PermissionAsk
	}
	if c.ReplayPolicy == "" {
		c.ReplayPolicy = tool.PolicyManual
	}
	return c
}

// Transport returns "stdio" for a command server and "http" for a URL
// server (which is streamable_http or sse once connected).
func (c ServerConfig) Transport() string {
	if len(c.Command) > 0 {
		return TransportStdio
	}
	return "http"
}

var (
	serverNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	// headerNameRE is an HTTP field name (RFC 9110 token).
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
)

// Validate reports every problem of c as *FieldError values joined by
// errors.Join, or nil. Unique server names are the agent's concern (see
// ValidateServers).
func (c ServerConfig) Validate() error {
	v := c.WithDefaults()
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	switch {
	case v.Name == "":
		add("name", "required")
	case !serverNameRE.MatchString(v.Name):
		add("name", "%q must match %s", v.Name, serverNameRE)
	}
	hasCommand, hasURL := len(v.Command) > 0, v.URL != ""
	switch {
	case hasCommand && hasURL:
		add("command", "give exactly one of command (stdio) or url (HTTP), not both")
	case !hasCommand && !hasURL:
		add("command", "give exactly one of command (stdio) or url (HTTP)")
	}
	if hasCommand {
		validateCommand(v.Command, add)
	}
	if hasURL {
		if msg := checkURL(v.URL); msg != "" {
			add("url", "%s", msg)
		}
	}
	if len(v.Env) > 0 && !hasCommand {
		add("env", "only for a stdio server (command)")
	}
	if len(v.EnvFrom) > 0 && !hasCommand {
		add("env_from", "only for a stdio server (command)")
	}
	if len(v.HeadersEnv) > 0 && !hasURL {
		add("headers_env", "only for an HTTP server (url)")
	}
	validateEnv(v, add)
	for _, h := range sortedKeys(v.HeadersEnv) {
		if !headerNameRE.MatchString(h) {
			add("headers_env", "%q is not an HTTP header name", h)
		}
		if !envNameRE.MatchString(v.HeadersEnv[h]) {
			// Never echoed: such a value may be the secret itself.
			add("headers_env."+h, "must name an environment variable, never hold the value")
		}
	}
	if len(v.HeadersEnv) > maxEnvEntries {
		add("headers_env", "at most %d entries", maxEnvEntries)
	}
	if math.IsNaN(v.TimeoutSeconds) || v.TimeoutSeconds < 0 || v.TimeoutSeconds > maxTimeout {
		add("timeout_seconds", "must be between 0 and %g", maxTimeout)
	}
	switch v.Permission {
	case tool.PermissionAsk, tool.PermissionAllow, tool.PermissionDeny:
	default:
		add("permission", "unknown permission %q (want ask, allow or deny)", v.Permission)
	}
	switch v.ReplayPolicy {
	case tool.PolicyManual, tool.PolicySafe, tool.PolicyIdempotent:
	default:
		add("replay_policy", "unknown replay policy %q (want manual, safe or idempotent)", v.ReplayPolicy)
	}
	if r := v.Retry; r != nil {
		if v.ReplayPolicy == tool.PolicyManual {
			add("retry", "only for replay_policy safe or idempotent (a manual tool is never retried)")
		}
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
	if len(v.Tools) > maxAllowList {
		add("tools", "at most %d entries", maxAllowList)
	}
	seen := make(map[string]bool, len(v.Tools))
	for i, t := range v.Tools {
		switch {
		case t == "" || len(t) > 1024:
			add(fmt.Sprintf("tools[%d]", i), "must be a tool name of 1 to 1024 bytes")
		case seen[t]:
			add(fmt.Sprintf("tools[%d]", i), "duplicate tool %q", t)
		}
		seen[t] = true
	}
	return errors.Join(errs...)
}

// validateCommand checks a stdio command line.
func validateCommand(cmd []string, add func(field, format string, args ...any)) {
	if len(cmd) > maxArgs {
		add("command", "at most %d entries", maxArgs)
	}
	if cmd[0] == "" {
		add("command[0]", "the program is required")
	}
	for i, a := range cmd {
		if len(a) > maxArgChars || strings.ContainsRune(a, 0) {
			add(fmt.Sprintf("command[%d]", i), "must be at most %d bytes without NUL", maxArgChars)
		}
	}
}

// validateEnv checks env and env_from.
func validateEnv(v ServerConfig, add func(field, format string, args ...any)) {
	if len(v.Env)+len(v.EnvFrom) > maxEnvEntries {
		add("env", "at most %d entries with env_from", maxEnvEntries)
	}
	for _, k := range sortedKeys(v.Env) {
		if !envNameRE.MatchString(k) {
			add("env", "%q is not an environment variable name", k)
		}
		if len(v.Env[k]) > maxArgChars || strings.ContainsRune(v.Env[k], 0) {
			// The value is never echoed.
			add("env."+k, "must be at most %d bytes without NUL", maxArgChars)
		}
	}
	for _, k := range sortedKeys(v.EnvFrom) {
		if !envNameRE.MatchString(k) {
			add("env_from", "%q is not an environment variable name", k)
		}
		if _, dup := v.Env[k]; dup {
			add("env_from."+k, "also set in env")
		}
		if !envNameRE.MatchString(v.EnvFrom[k]) {
			add("env_from."+k, "must name an environment variable of hxd, never hold the value")
		}
	}
}

// checkURL returns why u is not a usable server URL, or "".
func checkURL(u string) string {
	if len(u) > 2048 {
		return "at most 2048 bytes"
	}
	parsed, problem := tool.ParseHTTPURL(u)
	if problem != "" {
		return problem
	}
	if parsed.User != nil {
		return "must not hold credentials (use headers_env)"
	}
	return ""
}

// ValidateServers validates an agent's mcp_servers list: every problem of
// every entry, with Field prefixed by "mcp_servers[i].", and server names
// unique within the list.
func ValidateServers(cfgs []ServerConfig) error {
	var errs []error
	names := make(map[string]bool, len(cfgs))
	for i, c := range cfgs {
		prefix := fmt.Sprintf("mcp_servers[%d]", i)
		for _, e := range unjoin(c.Validate()) {
			var fe *FieldError
			if errors.As(e, &fe) {
				errs = append(errs, &FieldError{Field: prefix + "." + fe.Field, Problem: fe.Problem})
			}
		}
		if c.Name != "" && names[c.Name] {
			errs = append(errs, &FieldError{Field: prefix + ".name", Problem: fmt.Sprintf("duplicate MCP server name %q", c.Name)})
		}
		names[c.Name] = true
	}
	return errors.Join(errs...)
}

// MayBeBridged reports whether name could be the registered name of a
// tool of one of cfgs: every registered name starts with its sanitized
// server name. The bridged names are only known once the servers are
// listed (at session creation).
func MayBeBridged(name string, cfgs []ServerConfig) bool {
	for _, c := range cfgs {
		if s := sanitize(c.Name); s != "" && strings.HasPrefix(name, s) {
			return true
		}
	}
	return false
}

// unjoin returns the errors joined in err by errors.Join (nil for nil).
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
