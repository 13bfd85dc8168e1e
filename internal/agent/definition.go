package agent

import (
	"encoding/json"
	"slices"
	"time"

	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/tool"
)

// Defaults of an agent definition (see WithDefaults).
const (
	DefaultMaxIterations  = 50
	DefaultMaxResultChars = 12000
	DefaultMaxTokens      = 4096
	DefaultModelTimeout   = 120.0
)

// Ref names an agent definition: AgentRef {name, version}.
type Ref struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// String returns "name@version".
func (r Ref) String() string { return r.Name + "@" + r.Version }

// Definition is one agent file. Defaults are applied by WithDefaults.
type Definition struct {
	// Name is the AgentRef name. Required.
	Name string `json:"name"`
	// Version is the AgentRef version, immutable once used. Required.
	Version string `json:"version"`
	// SystemPrompt sent with every model call.
	SystemPrompt string `json:"system_prompt,omitempty"`
	// MaxIterations bounds model calls per run. Optional, default: 50.
	MaxIterations int `json:"max_iterations,omitempty"`
	// Model section. Required.
	Model model.Config `json:"model"`
	// Retry of transient model failures. Optional, default: {attempts: 4, backoff_seconds: 0.5, max_backoff_seconds: 60}.
	Retry *RetryPolicy `json:"retry,omitempty"`
	// ResponseMiddleware edits model response text (in order).
	ResponseMiddleware []Middleware `json:"response_middleware,omitempty"`
	// Tools available to the model.
	Tools []ToolDef `json:"tools,omitempty"`
	// MCPServers bridge the tools of MCP servers (discovered and pinned
	// when a session is created). Optional.
	MCPServers []mcp.ServerConfig `json:"mcp_servers,omitempty"`
	// MaxResultChars spills longer tool results to an artifact. Optional, default: 12000.
	MaxResultChars int `json:"max_result_chars,omitempty"`
	// MaxSessionDurationSeconds ends an overlong run as cancelled/timeout.
	// Optional, default: the server default (none).
	MaxSessionDurationSeconds float64 `json:"max_session_duration_seconds,omitempty"`
	// Retention overrides the server's retention of finished sessions
	// (--retain-finished-for) for this agent's sessions. Optional.
	Retention *Retention `json:"retention,omitempty"`
}

// Retention is an agent's retention policy (issue 23).
type Retention struct {
	// FinishedFor keeps a session for this long after its latest run
	// finished (a Go duration, "720h"); gc deletes it afterwards.
	// Required, positive.
	FinishedFor string `json:"finished_for"`
}

// RetainFinishedFor returns the agent's retention of finished sessions,
// and false when the agent sets none (or an invalid one, which Validate
// refuses).
func (d *Definition) RetainFinishedFor() (time.Duration, bool) {
	if d.Retention == nil {
		return 0, false
	}
	v, err := time.ParseDuration(d.Retention.FinishedFor)
	if err != nil || v <= 0 {
		return 0, false
	}
	return v, true
}

// Ref returns the definition's AgentRef.
func (d *Definition) Ref() Ref { return Ref{Name: d.Name, Version: d.Version} }

// RetryPolicy is the model retry policy.
type RetryPolicy struct {
	Attempts          int     `json:"attempts"`
	BackoffSeconds    float64 `json:"backoff_seconds"`
	MaxBackoffSeconds float64 `json:"max_backoff_seconds"`
}

// DefaultRetry is the model retry policy when none is given.
var DefaultRetry = RetryPolicy{Attempts: 4, BackoffSeconds: 0.5, MaxBackoffSeconds: 60}

// ToolDef is a tool entry of an agent file: the tool config plus result middleware.
type ToolDef struct {
	tool.Config
	// ResultMiddleware edits the tool result (in order) after the raw result is captured.
	ResultMiddleware []Middleware `json:"result_middleware,omitempty"`
}

// Middleware is one text edit: exactly one of append_text or regex_replace.
type Middleware struct {
	AppendText   *string       `json:"append_text,omitempty"`
	RegexReplace *RegexReplace `json:"regex_replace,omitempty"`
}

// RegexReplace replaces every match of Pattern (RE2 syntax) by Replace.
type RegexReplace struct {
	Pattern string `json:"pattern"`
	Replace string `json:"replace"`
}

// WithDefaults returns a copy of d with every optional field set to its
// default: max_iterations 50, retry DefaultRetry, max_result_chars 12000,
// model max_tokens 4096 and timeout_seconds 120, scripted tool call input
// {} (in the model section and in each fallback entry) and each tool's
// tool.Config defaults. d is not modified.
func (d *Definition) WithDefaults() *Definition {
	c := *d
	if c.MaxIterations == 0 {
		c.MaxIterations = DefaultMaxIterations
	}
	if c.Retry == nil {
		r := DefaultRetry
		c.Retry = &r
	} else {
		r := *c.Retry
		c.Retry = &r
	}
	if c.MaxResultChars == 0 {
		c.MaxResultChars = DefaultMaxResultChars
	}
	c.Model = modelDefaults(c.Model)
	if d.Model.Fallback != nil {
		c.Model.Fallback = make([]model.Config, len(d.Model.Fallback))
		for i, f := range d.Model.Fallback {
			c.Model.Fallback[i] = modelDefaults(f)
		}
	}
	c.ResponseMiddleware = slices.Clone(d.ResponseMiddleware)
	if d.Tools != nil {
		c.Tools = make([]ToolDef, len(d.Tools))
		for i, t := range d.Tools {
			c.Tools[i] = ToolDef{Config: t.WithDefaults(), ResultMiddleware: slices.Clone(t.ResultMiddleware)}
		}
	}
	return &c
}

// modelDefaults returns m with max_tokens 4096, timeout_seconds 120 and
// scripted tool call input {} applied (its script copied, so that m's is
// not modified).
func modelDefaults(m model.Config) model.Config {
	if m.MaxTokens == 0 {
		m.MaxTokens = DefaultMaxTokens
	}
	if m.TimeoutSeconds == 0 {
		m.TimeoutSeconds = DefaultModelTimeout
	}
	if m.Script != nil {
		m.Script = slices.Clone(m.Script)
		for i, step := range m.Script {
			if step.ToolCalls == nil {
				continue
			}
			calls := slices.Clone(step.ToolCalls)
			for j := range calls {
				if len(calls[j].Input) == 0 {
					calls[j].Input = json.RawMessage(`{}`)
				}
			}
			m.Script[i].ToolCalls = calls
		}
	}
	return m
}

// Tool returns the tool named name, or false.
func (d *Definition) Tool(name string) (ToolDef, bool) {
	for _, t := range d.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return ToolDef{}, false
}
