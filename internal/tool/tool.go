package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"hxd/internal/model"
)

// Kinds of tools.
const (
	KindBuiltin = "builtin"
	KindWebhook = "webhook"
	KindClient  = "client"
)

// Replay policies.
const (
	PolicySafe       = "safe"
	PolicyIdempotent = "idempotent"
	PolicyManual     = "manual"
)

// Permissions.
const (
	PermissionAllow = "allow"
	PermissionAsk   = "ask"
	PermissionDeny  = "deny"
)

// Config is one entry of an agent file's `tools:` list (minus middleware,
// which the agent package owns).
type Config struct {
	// Name the model calls the tool by. Required.
	Name string `json:"name"`
	// Description shown to the model.
	Description string `json:"description,omitempty"`
	// InputSchema is a JSON schema for the call input. Optional, default: {"type":"object"}.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Kind is builtin | webhook | client. Optional, default: builtin.
	Kind string `json:"kind,omitempty"`
	// Builtin names the builtin implementation. Optional, default: Name.
	Builtin string `json:"builtin,omitempty"`
	// URL a webhook tool POSTs to. Required for webhooks.
	URL string `json:"url,omitempty"`
	// ReplayPolicy is safe | idempotent | manual. Optional, default: manual.
	ReplayPolicy string `json:"replay_policy,omitempty"`
	// Permission is allow | ask | deny. Optional, default: allow.
	Permission string `json:"permission,omitempty"`
	// TimeoutSeconds bounds one call. Optional, default: 300.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// Retry of failed attempts (safe/idempotent tools only). Optional.
	Retry *Retry `json:"retry,omitempty"`
	// Concurrent lets the tool run in parallel with the other calls of the
	// same model response when all of them are concurrent. Optional,
	// default: false.
	Concurrent bool `json:"concurrent,omitempty"`
}

// Retry configures automatic tool retries:
// {attempts: 3, backoff_seconds: 0.5, max_backoff_seconds: 30, retry_error_results: false}.
type Retry struct {
	Attempts          int     `json:"attempts"`
	BackoffSeconds    float64 `json:"backoff_seconds"`
	MaxBackoffSeconds float64 `json:"max_backoff_seconds"`
	RetryErrorResults bool    `json:"retry_error_results"`
}

// DefaultRetry is the reference's default tool retry policy.
var DefaultRetry = Retry{Attempts: 3, BackoffSeconds: 0.5, MaxBackoffSeconds: 30}

// WithDefaults returns c with every optional field set to its default.
func (c Config) WithDefaults() Config {
	if c.Kind == "" {
		c.Kind = KindBuiltin
	}
	if c.Kind == KindBuiltin && c.Builtin == "" {
		c.Builtin = c.Name
	}
	if c.ReplayPolicy == "" {
		c.ReplayPolicy = PolicyManual
	}
	if c.Permission == "" {
		c.Permission = PermissionAllow
	}
	if c.TimeoutSeconds == 0 {
		c.TimeoutSeconds = 300
	}
	if c.Retry == nil {
		r := DefaultRetry
		c.Retry = &r
	}
	if len(c.InputSchema) == 0 {
		c.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	return c
}

// Invocation is one attempt of one tool call.
type Invocation struct {
	SessionID    string
	RunID        string
	ExecutionKey string
	// Attempt is 1 for the first attempt.
	Attempt int
	Call    model.ToolCall
}

// Artifact is a file a tool produced (content-addressed by the runtime).
type Artifact struct {
	MediaType string
	Data      []byte
}

// Outcome is what a tool returned.
type Outcome struct {
	Result    model.ToolResult
	Artifacts []Artifact
}

// Tool is a callable tool. Implementations are safe for concurrent use.
type Tool interface {
	// Config returns the tool's configuration with defaults applied.
	Config() Config
	// Spec describes the tool to the model.
	Spec() model.ToolSpec
	// ValidateInput checks a call input against the input schema; the
	// error text is safe to show to the model.
	ValidateInput(input json.RawMessage) error
	// Call runs one attempt. Errors are *Failure values; a client tool
	// returns ErrClientResult.
	Call(ctx context.Context, inv Invocation) (Outcome, error)
}

// ErrClientResult is returned by client tools: the result must be posted
// by the caller (resolve {result}).
var ErrClientResult = errors.New("tool result is supplied by the client")

// ErrInvalidConfig is returned for a bad tool definition.
var ErrInvalidConfig = errors.New("invalid tool config")

// Failure is a captured tool failure: {type, message, retryable}.
type Failure struct {
	// Type is the failure kind, e.g. "TransientToolError", "TimeoutError", "WebhookError".
	Type string
	// Message is safe to show to the model and to log.
	Message string
	// Transient reports a declared transient failure (429/5xx/timeouts).
	Transient bool
	// MayHaveRun reports that the call may have taken effect although it
	// failed: it timed out, or its connection broke after the request could
	// have reached the tool. A manual tool's such failure is uncertain
	// (REFERENCE §4.2 step 3), never an error result the model could
	// answer by calling it again.
	MayHaveRun bool
	// Cause is the underlying error.
	Cause error
}

// Error implements error.
func (f *Failure) Error() string {
	if f.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", f.Type, f.Message, f.Cause)
	}
	return f.Type + ": " + f.Message
}

// Unwrap returns the cause.
func (f *Failure) Unwrap() error { return f.Cause }

// AsFailure returns err as a *Failure; unknown errors become a non-transient
// failure of type "ToolError", a context deadline a transient "TimeoutError".
func AsFailure(err error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Failure{Type: "TimeoutError", Message: "tool call timed out", Transient: true, MayHaveRun: true, Cause: err}
	}
	return &Failure{Type: "ToolError", Message: "tool call failed", Cause: err}
}

// BuiltinFunc implements a builtin tool. It returns an error result in
// Outcome for problems the model should see and an error (ideally a
// *Failure) for failures of the attempt itself.
type BuiltinFunc func(ctx context.Context, inv Invocation) (Outcome, error)

// Options are the process-level dependencies of tools.
type Options struct {
	// HTTPClient for webhook calls. Optional, default: a client without
	// timeout that does not follow redirects (each call is bounded by the
	// tool's timeout_seconds).
	HTTPClient *http.Client
	// Builtins adds builtin implementations by name; they take precedence
	// over the standard builtins (see BuiltinNames). Optional.
	Builtins map[string]BuiltinFunc
	// WorkDir is the directory the write_report builtin writes to.
	// Optional, default: none (write_report returns an error result).
	WorkDir string
}

// New validates cfg (with defaults applied) and returns the tool it
// describes. Errors wrap ErrInvalidConfig and name the field.
func New(cfg Config, opts Options) (Tool, error) {
	cfg = cfg.WithDefaults()
	builtin := lookupBuiltin(opts)
	if errs := validate(cfg, func(name string) bool { return builtin(name) != nil }); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	schema, err := compileSchema(cfg.InputSchema)
	if err != nil {
		return nil, &FieldError{Field: "input_schema", Problem: err.Error()}
	}
	b := base{cfg: cfg, schema: schema}
	switch cfg.Kind {
	case KindWebhook:
		client := opts.HTTPClient
		if client == nil {
			client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		}
		return &webhookTool{base: b, client: client}, nil
	case KindClient:
		return &clientTool{base: b}, nil
	default:
		return &builtinTool{base: b, fn: builtin(cfg.Builtin)}, nil
	}
}

// base holds what every tool kind shares: its config and compiled schema.
type base struct {
	cfg    Config
	schema *inputSchema
}

// Config returns the tool's configuration with defaults applied.
func (b *base) Config() Config { return b.cfg }

// Spec describes the tool to the model.
func (b *base) Spec() model.ToolSpec {
	return model.ToolSpec{Name: b.cfg.Name, Description: b.cfg.Description, InputSchema: b.cfg.InputSchema}
}

// ValidateInput checks input against the tool's input schema.
func (b *base) ValidateInput(input json.RawMessage) error { return b.schema.validate(input) }

// timeout returns the tool's call bound.
func (b *base) timeout() time.Duration {
	return time.Duration(b.cfg.TimeoutSeconds * float64(time.Second))
}

// callFailure turns a context error of a call into a *Failure: a deadline
// is a transient TimeoutError, a cancellation a non-transient
// CancelledError whose cause is context.Canceled.
func callFailure(ctx context.Context, timeout time.Duration, err error) *Failure {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &Failure{
			Type:       "TimeoutError",
			Message:    fmt.Sprintf("tool call timed out after %s", timeout),
			Transient:  true,
			MayHaveRun: true,
			Cause:      context.DeadlineExceeded,
		}
	case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
		return &Failure{Type: "CancelledError", Message: "tool call cancelled", Cause: context.Canceled}
	}
	return nil
}
