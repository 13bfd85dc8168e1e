package rtstore

import (
	"encoding/json"
	"time"

	"hxd/internal/journal"
)

// RunStatus is a run's status: running | completed | paused |
// awaiting_input | cancelled | failed.
type RunStatus string

// Run statuses.
const (
	StatusRunning       RunStatus = "running"
	StatusCompleted     RunStatus = "completed"
	StatusPaused        RunStatus = "paused"
	StatusAwaitingInput RunStatus = "awaiting_input"
	StatusCancelled     RunStatus = "cancelled"
	StatusFailed        RunStatus = "failed"
)

// Finished reports whether a run in this status no longer blocks a new run
// of its session (only completed and cancelled do not).
func (s RunStatus) Finished() bool { return s == StatusCompleted || s == StatusCancelled }

// Control values of a session: "" | "paused" | "cancelled".
const (
	ControlNone      = ""
	ControlPaused    = "paused"
	ControlCancelled = "cancelled"
)

// SessionRow is a stored session.
type SessionRow struct {
	// Seq orders sessions for listing (assigned on insert).
	Seq int64
	ID  string
	// Principal owns the session; only it may see anything of it.
	Principal    string
	AgentName    string
	AgentVersion string
	// AgentConfig is the JSON of the agent definition the session was created with.
	AgentConfig json.RawMessage
	Recording   bool
	// Metadata is a JSON object.
	Metadata  json.RawMessage
	CreatedAt time.Time
	// MCPTools is the JSON array of the MCP tools pinned at creation
	// (mcp.PinnedTool; issue 21), stored as [] when nil.
	MCPTools json.RawMessage
	// LastRunID and LastRunStatus describe the latest run ("" when none). Read-only.
	LastRunID     string
	LastRunStatus RunStatus
}

// RunRow is a stored run.
type RunRow struct {
	// Seq orders runs for listing (assigned on insert).
	Seq       int64
	ID        string
	SessionID string
	RequestID string
	// MessageDigest identifies the submitted message (request idempotency).
	MessageDigest string
	Status        RunStatus
	Phase         string
	// State is the JSON run state.
	State     json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	// TraceContext is the W3C traceparent of the span of the run's latest
	// attempt (OpenTelemetry invoke_agent, issue 24), "" for none (a NULL
	// column). A resumed run links its new span to it. At most
	// MaxTraceContext bytes.
	TraceContext string
}

// MaxTraceContext bounds a stored trace context (a W3C traceparent is 55
// bytes; later versions may append fields).
const MaxTraceContext = 256

// RunEvent is a public event: the eight wire fields of the reference.
type RunEvent struct {
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	SessionID string          `json:"session_id"`
	RunID     string          `json:"run_id"`
	StepID    string          `json:"step_id"`
	AttemptID string          `json:"attempt_id"`
	EventID   string          `json:"event_id"`
	// Cursor is the per-run sequence number (decimal) assigned by the store.
	Cursor string `json:"cursor"`
	// CreatedAt is when the store appended the event (UTC), assigned by
	// the store on insert and read back unchanged (a value set by the
	// caller is ignored). It is kept apart from the JSON form on purpose:
	// that form is the stored payload and the journal's `event` record,
	// whose reference RunEvent has exactly eight fields.
	CreatedAt time.Time `json:"-"`
}

// PendingEvent is an event to append in a commit, with the journal record
// that mirrors it when the run records.
type PendingEvent struct {
	Event RunEvent
	// Record mirrors the event in the journal: every field but Payload and
	// Seq is set by the runtime (a stable ID for re-sends); the store sets
	// Payload to the event with its cursor. Nil when not recording.
	Record *journal.Record
}

// ToolRow is a tool entry stored in approvals (no result yet) or
// tool_outcomes (raw or processed result present).
type ToolRow struct {
	ExecutionKey string
	HasOutcome   bool
	Payload      json.RawMessage
}

// StepRow is a stored steps row: a run's step (decimal id) and its JSON
// payload.
type StepRow struct {
	ID      string
	Payload json.RawMessage
}

// RunRows are a run's step rows, in step order (numeric), and its tool
// rows, one per execution key (the tool_outcomes row when there is one,
// else the approvals row), in execution key order.
type RunRows struct {
	Steps []StepRow
	Tools []ToolRow
}

// Commit is one boundary: everything in it commits in ONE transaction or
// not at all.
type Commit struct {
	SessionID string
	RunID     string
	// Lease fences the write; nil only for writes that need no ownership
	// (not used by the runtime's driver).
	Lease  Lease
	Status RunStatus
	Phase  string
	// State is the JSON of the new run state.
	State json.RawMessage
	// StepID and Step are the steps row (run_id, step id) upserted.
	StepID string
	Step   json.RawMessage
	// Snapshot also stores State as the session's snapshot (the latest
	// settled run state); the runtime sets it when the run stops running.
	Snapshot bool
	// Tools are upserted into approvals / tool_outcomes.
	Tools []ToolRow
	// Records are appended to the journal in order (boundary records, then
	// the checkpoint). Records with a known ID are skipped when identical.
	Records []journal.Record
	// Events are appended after the records; the store sets each Cursor.
	// An event whose EventID exists is skipped together with its record.
	Events []PendingEvent
	// DeltaOnly makes the commit a delta-only commit (REFERENCE §2.2,
	// §3.4): it appends Events and their records, fenced by Lease like
	// every commit, and writes nothing else: no run status, phase, state
	// or update time, no session latest run, snapshot, step or tool row.
	// Status, Phase, State, Step, Tools, Records and Snapshot must be
	// empty (a commit naming them is refused, nothing written); the run's
	// last checkpoint stays its last checkpoint.
	DeltaOnly bool
	// TraceContext, when not "", replaces the run's stored trace context
	// (RunRow.TraceContext): a resume commits it with its run.resumed
	// boundary. "" keeps the stored one. A DeltaOnly commit must leave it "".
	TraceContext string
}

// ListParams pages a list: rows with Seq > After, at most Limit.
type ListParams struct {
	After int64
	Limit int
}

// SessionListParams lists one principal's sessions, optionally filtered;
// the filters apply before Limit, so a page holds up to Limit matches.
type SessionListParams struct {
	Principal string
	// AgentName, when set, keeps the sessions of that agent; AgentVersion
	// (only with AgentName) narrows them to one version.
	AgentName, AgentVersion string
	// LatestRun filters on the session's latest run (SessionStatusFilter).
	LatestRun SessionStatusFilter
	ListParams
}

// SessionStatusFilter filters sessions on their latest run: the zero value
// keeps all; NoRun keeps the sessions without a run; else Status keeps the
// sessions whose latest run has that status.
type SessionStatusFilter struct {
	Status RunStatus
	NoRun  bool
}

// Args returns the filter as two query arguments: whether to filter
// (0/1) and the status to match ("" for NoRun), compared with the latest
// run's status or "" when the session has none.
func (f SessionStatusFilter) Args() (on int, status string) {
	switch {
	case f.NoRun:
		return 1, ""
	case f.Status != "":
		return 1, string(f.Status)
	}
	return 0, ""
}

// RunInsertParams creates a run.
type RunInsertParams struct {
	Run RunRow
	// Commit is applied in the same transaction as the insert (run.started,
	// checkpoint, first state). Its Lease may be nil.
	Commit *Commit
}
