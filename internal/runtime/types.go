package runtime

import (
	"context"
	"encoding/json"
	"time"

	"hxd/internal/agent"
	"hxd/internal/journal"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/tool"
)

// RunStatus is a run's status (see rtstore).
type RunStatus = rtstore.RunStatus

// Run statuses.
const (
	StatusRunning       = rtstore.StatusRunning
	StatusCompleted     = rtstore.StatusCompleted
	StatusPaused        = rtstore.StatusPaused
	StatusAwaitingInput = rtstore.StatusAwaitingInput
	StatusCancelled     = rtstore.StatusCancelled
	StatusFailed        = rtstore.StatusFailed
)

// RunEvent is a public event: {type, data, session_id, run_id, step_id,
// attempt_id, event_id, cursor}.
type RunEvent = rtstore.RunEvent

// Public event types (RunEventType).
const (
	EventTextDelta        = "text_delta"
	EventTextComplete     = "text_complete"
	EventThinkingDelta    = "thinking_delta"
	EventToolCallStart    = "tool_call_start"
	EventToolCallComplete = "tool_call_complete"
	EventToolResult       = "tool_result"
	EventTurnComplete     = "turn_complete"
	EventError            = "error"
	EventApprovalRequired = "approval_required"
	EventRecoveryRequired = "recovery_required"
	EventAttemptReset     = "attempt_reset"
	EventTodosUpdated     = "todos_updated"
	EventWaiting          = "waiting"
	EventRunResult        = "run_result"
	EventGap              = "gap"
)

// ToolStatus is a tool entry's status.
type ToolStatus string

// Tool entry statuses.
const (
	ToolPrepared     ToolStatus = "prepared"
	ToolApproval     ToolStatus = "approval"
	ToolStarted      ToolStatus = "started"
	ToolUncertain    ToolStatus = "uncertain"
	ToolRawCompleted ToolStatus = "raw_completed"
	ToolCompleted    ToolStatus = "completed"
)

// Session is the public view of a session.
type Session struct {
	ID        string          `json:"session_id"`
	Agent     agent.Ref       `json:"agent"`
	Recording bool            `json:"recording"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt time.Time       `json:"created_at"`
	LatestRun *RunRef         `json:"latest_run"`
	// MCPTools are the MCP tools pinned at creation ([] when none).
	MCPTools []mcp.PinnedTool `json:"mcp_tools"`
}

// RunRef names a run and its status.
type RunRef struct {
	RunID  string    `json:"run_id"`
	Status RunStatus `json:"status"`
}

// RunError is a run's error {type, message}.
type RunError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// PendingTool is the public view of a tool entry awaiting a decision
// (approval or uncertain), in the reference's field-dump shape.
type PendingTool struct {
	Call           model.ToolCall `json:"call"`
	Status         ToolStatus     `json:"status"`
	Attempt        int            `json:"attempt"`
	ExecutionKey   string         `json:"execution_key"`
	Policy         string         `json:"policy"`
	Concurrent     bool           `json:"concurrent"`
	TimeoutSeconds journal.Float  `json:"timeout_seconds"`
	Retry          *tool.Retry    `json:"retry"`
}

// RunResult is the public view of a run.
type RunResult struct {
	SessionID       string        `json:"session_id"`
	RunID           string        `json:"run_id"`
	Output          *string       `json:"output"`
	Status          RunStatus     `json:"status"`
	StopReason      *string       `json:"stop_reason"`
	Usage           model.Usage   `json:"usage"`
	Error           *RunError     `json:"error"`
	Pending         []PendingTool `json:"pending"`
	UsageIncomplete bool          `json:"usage_incomplete"`
	CreatedAt       time.Time     `json:"created_at"`
	UpdatedAt       time.Time     `json:"updated_at"`
}

// Page is one page of a list; NextCursor is "" on the last page.
type Page[T any] struct {
	Items      []T
	NextCursor string
}

// ListParams pages a list: Cursor from a previous page ("" for the first),
// Limit (0 → 50, at most 1000).
type ListParams struct {
	Cursor string
	Limit  int
}

// SessionListParams pages the caller's sessions (ListParams) that match
// the filters: the filters apply before the page limit, so a page holds up
// to Limit matching sessions and its cursor continues after the last one.
type SessionListParams struct {
	ListParams
	// AgentName, when set, keeps the sessions of that agent, of every
	// version unless AgentVersion names one.
	AgentName, AgentVersion string
	// Status, when set, keeps the sessions whose latest run has that
	// status; NoRun keeps the sessions without a run (Status ignored).
	Status RunStatus
	NoRun  bool
}

// CreateSessionParams creates a session.
type CreateSessionParams struct {
	Agent agent.Ref
	// Recording turns the flight recorder on; nil means off.
	Recording *bool
	// SessionID is caller-chosen; "" → a new UUIDv7.
	SessionID string
	// Metadata is a JSON object or nil.
	Metadata json.RawMessage
}

// SubmitParams starts a run.
type SubmitParams struct {
	SessionID string
	// Message is a JSON string or an array of content blocks.
	Message json.RawMessage
	// RequestID makes the submission idempotent; "" → a new id.
	RequestID string
	// Stream streams the model's answers: text and thinking deltas are
	// committed as the provider sends them (delta-only commits). Kept in
	// the run state, so a resumed run streams too.
	Stream bool
}

// ResumeParams resumes a session's latest unfinished run.
type ResumeParams struct {
	// Recording, when set, must equal the session's stored choice.
	Recording *bool
}

// ApproveParams decides an approval.
type ApproveParams struct {
	SessionID    string
	ExecutionKey string
	Allow        bool
	Resume       bool
}

// ResolveParams decides an uncertain outcome: exactly one of Result,
// Retry, Abort.
type ResolveParams struct {
	SessionID    string
	ExecutionKey string
	Result       *model.ToolResult
	Retry        bool
	Abort        bool
	Resume       bool
}

type principalKey struct{}

// LocalPrincipal is the single principal of --auth=none.
const LocalPrincipal = "local"

// WithPrincipal returns ctx carrying the calling principal.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// PrincipalFrom returns the calling principal; LocalPrincipal when none.
func PrincipalFrom(ctx context.Context) string {
	if p, ok := ctx.Value(principalKey{}).(string); ok && p != "" {
		return p
	}
	return LocalPrincipal
}
