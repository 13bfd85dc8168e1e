package runtime

import (
	"encoding/json"
	"time"

	"hxd/internal/agent"
	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/tool"
)

// Phase is where a run's loop stands (state.phase).
type Phase string

// Phases: start → prepare_model → model → prepare_tools → tools →
// prepare_model … → finish → result.
const (
	PhaseStart        Phase = "start"
	PhasePrepareModel Phase = "prepare_model"
	PhaseModel        Phase = "model"
	PhasePrepareTools Phase = "prepare_tools"
	PhaseTools        Phase = "tools"
	PhaseFinish       Phase = "finish"
	PhaseResult       Phase = "result"
)

// RunState is the durable state of one run, stored as JSON with every
// boundary commit. Field names follow the reference's run state.
type RunState struct {
	Version int `json:"version"`
	// SessionID is the session's key (SessionKey) in the runtime; what
	// the state shows (records, events, results) is SessionIDOf it. The
	// Temporal engine's workflow keeps the caller's id here.
	SessionID string    `json:"session_id"`
	RunID     string    `json:"run_id"`
	RequestID string    `json:"request_id"`
	Agent     agent.Ref `json:"agent"`
	// Message is the submitted user message (a JSON string or content blocks).
	Message json.RawMessage `json:"message"`
	// Messages is the conversation: earlier turns, then this turn so far.
	Messages  []model.Message `json:"messages"`
	Metadata  json.RawMessage `json:"metadata"`
	Phase     Phase           `json:"phase"`
	Status    RunStatus       `json:"status"`
	Durable   bool            `json:"durable"`
	Recording bool            `json:"recording"`
	// Stream: the run streams its model answers (SubmitParams.Stream).
	// Omitted when false, so a run that does not stream stores the state
	// it always did.
	Stream bool `json:"stream,omitempty"`
	// Iterations counts model steps; step_id is its decimal string.
	Iterations int `json:"iterations"`
	// Attempt is the current model attempt (0 before the first call of a step).
	Attempt int `json:"attempt"`
	// ModelAttemptOpen is true between a committed model.started and the
	// commit that closes that attempt (model.failed / model.completed).
	ModelAttemptOpen bool `json:"model_attempt_open"`
	// ModelAttempts are the current step's model attempts with their
	// times (timeline.go), written to its steps row; omitted when none,
	// and absent from states stored before hxd kept them.
	ModelAttempts []AttemptSpan `json:"model_attempts,omitempty"`
	// Resumptions are when the run was resumed (timeline marks).
	Resumptions []Resumption `json:"resumptions,omitempty"`
	// ChainPosition is the step's model in the agent's fallback chain
	// (fallback.go); empty on the primary model.
	ChainPosition
	// Usage is what the run's model attempts reported, summed.
	Usage model.Usage `json:"usage"`
	// UsageBase is Usage before the current model attempt; that attempt's
	// report is added to it (AccountAttemptUsage).
	UsageBase model.Usage `json:"usage_base"`
	// UsageIncomplete: a model attempt may have used tokens that Usage
	// lacks (a retried or crashed attempt, an answer without usage).
	UsageIncomplete bool        `json:"usage_incomplete"`
	Tools           []ToolEntry `json:"tools"`
	// Request is the last model request; it is journaled in model.started
	// and rebuilt on every attempt, so the state does not carry it.
	Request    *model.Request  `json:"-"`
	Response   *model.Response `json:"response"`
	Output     *string         `json:"output"`
	StopReason *string         `json:"stop_reason"`
	Error      *RunError       `json:"error"`
	Extensions map[string]any  `json:"extensions"`
}

// ToolEntry is one tool call of the current step (element of state.tools).
type ToolEntry struct {
	Call         model.ToolCall    `json:"call"`
	Status       ToolStatus        `json:"status"`
	Attempt      int               `json:"attempt"`
	ExecutionKey string            `json:"execution_key"`
	Policy       string            `json:"policy"`
	Concurrent   bool              `json:"concurrent"`
	Timeout      journal.Float     `json:"timeout"`
	Retry        *tool.Retry       `json:"retry,omitempty"`
	Approved     *bool             `json:"approved,omitempty"`
	RawResult    *model.ToolResult `json:"raw_result,omitempty"`
	Result       *model.ToolResult `json:"result,omitempty"`
	// Attempts are the entry's attempts with their times, and
	// ApprovalRequestedAt / ApprovalDecidedAt when it waited for an
	// approval and when that was decided (timeline.go); omitted when
	// unset, and absent from rows stored before hxd kept them.
	Attempts            []AttemptSpan `json:"attempts,omitempty"`
	ApprovalRequestedAt time.Time     `json:"approval_requested_at,omitzero"`
	ApprovalDecidedAt   time.Time     `json:"approval_decided_at,omitzero"`
}

// stepID is the journal step_id of the state.
func (s *RunState) stepID() string { return itoa(s.Iterations) }

// pending returns the entries awaiting a decision, in state order.
func (s *RunState) pending() []PendingTool {
	var out []PendingTool
	for i := range s.Tools {
		e := &s.Tools[i]
		if e.Status == ToolApproval || e.Status == ToolUncertain {
			out = append(out, e.pendingView())
		}
	}
	return out
}

func (e *ToolEntry) pendingView() PendingTool {
	return PendingTool{
		Call: e.Call, Status: e.Status, Attempt: e.Attempt, ExecutionKey: e.ExecutionKey,
		Policy: e.Policy, Concurrent: e.Concurrent, TimeoutSeconds: e.Timeout, Retry: e.Retry,
	}
}

// runResultData is the run_result event payload: the RunResult field dump.
type runResultData struct {
	SessionID       string        `json:"session_id"`
	RunID           string        `json:"run_id"`
	Output          *string       `json:"output"`
	Status          RunStatus     `json:"status"`
	StopReason      *string       `json:"stop_reason"`
	Usage           model.Usage   `json:"usage"`
	Error           *RunError     `json:"error"`
	Pending         []PendingTool `json:"pending"`
	UsageIncomplete bool          `json:"usage_incomplete"`
}

func (s *RunState) resultData() runResultData {
	p := s.pending()
	if p == nil {
		p = []PendingTool{}
	}
	return runResultData{
		SessionID: SessionIDOf(s.SessionID), RunID: s.RunID, Output: s.Output, Status: s.Status,
		StopReason: s.StopReason, Usage: s.Usage, Error: s.Error, Pending: p,
		UsageIncomplete: s.UsageIncomplete,
	}
}

// checkpointPayload is the checkpoint record's payload {error, extensions,
// phase, status, tools}. Its fields are in key order, so it encodes as the
// map it replaces did (encoding/json sorts map keys), without sorting keys
// and boxing values at every commit.
type checkpointPayload struct {
	Error      *RunError        `json:"error"`
	Extensions map[string]any   `json:"extensions"`
	Phase      Phase            `json:"phase"`
	Status     RunStatus        `json:"status"`
	Tools      []checkpointTool `json:"tools"`
}

// checkpointTool is a tool entry in a checkpoint, keys in order.
type checkpointTool struct {
	Approved     *bool      `json:"approved,omitempty"`
	Attempt      int        `json:"attempt"`
	ExecutionKey string     `json:"execution_key"`
	Status       ToolStatus `json:"status"`
}

func (s *RunState) checkpointPayload() *checkpointPayload {
	tools := make([]checkpointTool, len(s.Tools))
	for i := range s.Tools {
		e := &s.Tools[i]
		tools[i] = checkpointTool{Approved: e.Approved, Attempt: e.Attempt, ExecutionKey: e.ExecutionKey, Status: e.Status}
	}
	ext := s.Extensions
	if ext == nil {
		ext = map[string]any{}
	}
	return &checkpointPayload{Error: s.Error, Extensions: ext, Phase: s.Phase, Status: s.Status, Tools: tools}
}

// stepPayload is the steps row {attempt, attempts, phase, response} (the
// request is in the journal's model.started), keys in order. Attempts are
// the step's model attempts with their times (the run timeline), omitted
// when none: rows stored before hxd kept them have none.
type stepPayload struct {
	Attempt  int             `json:"attempt"`
	Attempts []AttemptSpan   `json:"attempts,omitempty"`
	Phase    Phase           `json:"phase"`
	Response *model.Response `json:"response"`
}

func (s *RunState) stepPayload() *stepPayload {
	return &stepPayload{Attempt: s.Attempt, Attempts: s.ModelAttempts, Phase: s.Phase, Response: s.Response}
}

func ptr[T any](v T) *T { return &v }
