// This file is the contract between the worker side (workflow, activities)
// and the client side (the engine that starts workflows, sends updates and
// queries). Names in it are only ever added to, never renamed.

package temporal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"hxd/internal/agent"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/runtime"
)

// Names registered with Temporal.
const (
	// DefaultTaskQueue is the task queue of workers and workflows.
	DefaultTaskQueue = "harness-x-v1"
	// WorkflowType is the registered name of the session workflow.
	WorkflowType = "HarnessAgentSessionV1"
	// WorkflowIDPrefix + the session's key is a session's workflow ID: the
	// key (runtime.SessionKey) scopes the id the caller knows (session_id
	// in the workflow's data) by its owner, so that principals' ids never
	// collide (the reference, which has no principals, uses session_id).
	WorkflowIDPrefix = "harness-session:"

	// UpdateSubmit starts a run: arg SubmitRequest, result SubmitResult.
	// The update ID must be the request ID (UpdateID helper).
	UpdateSubmit = "submit"
	// UpdateControl pauses, cancels or resumes: arg ControlRequest, result ControlResult.
	UpdateControl = "control"
	// UpdateResolve decides an approval or an uncertain outcome: arg
	// ResolveRequest, result ResolveResult.
	UpdateResolve = "resolve"

	// QueryGetRun returns a run: arg run_id (string), result runtime.RunResult.
	QueryGetRun = "get_run"
	// QueryGetSession returns the session summary: no arg, result SessionInfo.
	QueryGetSession = "get_session"
	// QueryGetPending returns the latest run's pending tools: no arg,
	// result []runtime.PendingTool (never nil).
	QueryGetPending = "get_pending"
	// QueryGetTimeline returns what a run's timeline is built from
	// (runtime.TimelineSource without events): arg run id.
	QueryGetTimeline = "get_timeline"

	// Activity names.
	ActivityModel   = "harness_model_v1"
	ActivityTool    = "harness_tool_v1"
	ActivityPublish = "harness_publish_v1"
	// ActivitySpill stores a caller-supplied tool result over
	// max_result_chars (SpillInput → *SpillRef, nil without a store).
	ActivitySpill = "harness_spill_v1"

	// SessionDataVersion is SessionInput.Version.
	SessionDataVersion = 1
)

// Control actions (ControlRequest.Action).
const (
	ActionResume    = "resume"
	ActionPaused    = "paused"
	ActionCancelled = "cancelled"
)

// Session status reported by get_session when no run is unfinished.
const StatusIdle = "idle"

// WorkflowID returns the workflow ID of the session stored under key
// (runtime.SessionKey).
func WorkflowID(key string) string { return WorkflowIDPrefix + key }

// StartWorkflowOptions returns the options the client starts a session's
// workflow with: ID WorkflowID(key), REJECT_DUPLICATE reuse policy (a
// session key is never reused, even after the workflow closed) and the
// given task queue ("" → DefaultTaskQueue). Start the workflow as
// client.ExecuteWorkflow(ctx, opts, WorkflowType, input).
func StartWorkflowOptions(key, taskQueue string) client.StartWorkflowOptions {
	if taskQueue == "" {
		taskQueue = DefaultTaskQueue
	}
	return client.StartWorkflowOptions{
		ID:                       WorkflowID(key),
		TaskQueue:                taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}
}

// RuntimeConfig is the server-level configuration a session workflow
// runs with (persisted in the workflow data).
type RuntimeConfig struct {
	// MaxSessionDurationSeconds is the server default deadline of a drive
	// (the agent's max_session_duration_seconds wins); 0 = none.
	MaxSessionDurationSeconds float64 `json:"max_session_duration_seconds,omitempty"`
}

// SessionInput is the workflow's input: the initial session data
// {version, runtime_config, session_id, agent, runs, requests, active,
// control} plus hxd's owner, the persisted agent config and metadata. The
// same type carries the session over continue-as-new (then Runs,
// Requests, RunOrder, Active, Control and EventSeq are filled).
//
// The client builds it with NewSessionInput.
type SessionInput struct {
	Version       int           `json:"version"`
	RuntimeConfig RuntimeConfig `json:"runtime_config"`
	SessionID     string        `json:"session_id"`
	Agent         agent.Ref     `json:"agent"`
	// AgentConfig is the agent definition (JSON, defaults applied) the
	// session was created with. The workflow runs its pure phases from it;
	// activities refuse to run when the worker's registered definition
	// differs from it.
	AgentConfig json.RawMessage `json:"agent_config"`
	// Owner is the principal that created the session (runtime.PrincipalFrom).
	Owner     string          `json:"owner"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	// Recording is always false: the Temporal engine refuses recording.
	Recording bool `json:"recording"`

	Runs     map[string]*RunRecord    `json:"runs"`
	Requests map[string]RequestRecord `json:"requests"`
	// RunOrder lists run IDs oldest first.
	RunOrder []string `json:"run_order"`
	// Active is the session's unfinished run (running, paused,
	// awaiting_input or failed), nil when none.
	Active  *string `json:"active"`
	Control string  `json:"control"`
	// EventSeq numbers the workflow's event IDs "<workflow run id>:<n>".
	EventSeq int64 `json:"event_seq"`
	// PendingEvents are workflow events not yet handed to an activity for
	// publishing (they ride with the next activity, or with the publish
	// activity when a run stops).
	PendingEvents []runtime.RunEvent `json:"pending_events,omitempty"`
	// MCPTools are the MCP tools discovered when the session was created
	// (issue 21), pinned for the session's whole life: the workflow shows
	// them to the model after the agent's tools and its tool activities
	// call them without listing again. Absent (histories recorded before
	// it, agents without mcp_servers): no bridged tool.
	MCPTools []mcp.PinnedTool `json:"mcp_tools,omitempty"`
}

// RunRecord is one run in the session data.
type RunRecord struct {
	State     *runtime.RunState `json:"state"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	// Digest identifies the submitted message (request idempotency).
	Digest string `json:"digest"`
	// Steps and Tools keep the model attempts and tool entries (without
	// input or results) of the run's earlier steps, for its timeline;
	// the current step's are in State.
	Steps []runtime.StepSpans `json:"timeline_steps,omitempty"`
	Tools []runtime.ToolEntry `json:"timeline_tools,omitempty"`
	// Trace is the trace context of the request that submitted or last
	// resumed the run (nil without tracing): the run's model and tool
	// activities make their spans in its trace.
	Trace *TraceContext `json:"trace,omitempty"`
}

// TraceContext is a W3C trace context (the traceparent and tracestate
// headers' values) carried in the workflow's data. It is data only: the
// workflow stores it and hands it to activities, never branches on it.
type TraceContext struct {
	TraceParent string `json:"traceparent"`
	TraceState  string `json:"tracestate,omitempty"`
}

// maxTraceState bounds a carried tracestate: W3C asks propagators to
// keep at least 512 characters; a longer one is left out.
const maxTraceState = 512

// TraceContextOf is the trace context of the span in ctx, nil when ctx
// has no valid span context (tracing off).
func TraceContextOf(ctx context.Context) *TraceContext {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	tc := &TraceContext{TraceParent: carrier.Get("traceparent"), TraceState: carrier.Get("tracestate")}
	if tc.TraceParent == "" {
		return nil
	}
	if len(tc.TraceState) > maxTraceState {
		tc.TraceState = ""
	}
	return tc
}

// maxTraceParent bounds a carried traceparent (version 00's is 55
// characters; later versions may append fields).
const maxTraceParent = 256

// bounded is tc, nil when it is nil or over the bounds: the workflow
// keeps only a bounded trace context with a run.
func (tc *TraceContext) bounded() *TraceContext {
	if tc == nil || tc.TraceParent == "" || len(tc.TraceParent) > maxTraceParent || len(tc.TraceState) > maxTraceState {
		return nil
	}
	return tc
}

// SpanContext is the remote span context tc carries, invalid for nil or
// an invalid traceparent.
func (tc *TraceContext) SpanContext() trace.SpanContext {
	if tc == nil || tc.TraceParent == "" {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{"traceparent": tc.TraceParent}
	if tc.TraceState != "" {
		carrier["tracestate"] = tc.TraceState
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

// RequestRecord maps a request ID to its run.
type RequestRecord struct {
	RunID  string `json:"run_id"`
	Digest string `json:"digest"`
}

// NewSessionInput builds the initial workflow data of a new session bound
// to def (the registered definition, defaults applied) and owned by owner.
func NewSessionInput(sessionID string, def *agent.Definition, owner string, metadata json.RawMessage, createdAt time.Time, cfg RuntimeConfig) (SessionInput, error) {
	raw, err := AgentConfig(def)
	if err != nil {
		return SessionInput{}, err
	}
	if len(bytes.TrimSpace(metadata)) == 0 || string(bytes.TrimSpace(metadata)) == "null" {
		metadata = json.RawMessage(`{}`)
	}
	return SessionInput{
		Version: SessionDataVersion, RuntimeConfig: cfg, SessionID: sessionID, Agent: def.Ref(),
		AgentConfig: raw, Owner: owner, Metadata: metadata, CreatedAt: createdAt.UTC(),
		Runs: map[string]*RunRecord{}, Requests: map[string]RequestRecord{}, RunOrder: []string{},
	}, nil
}

// AgentConfig is the persisted form of an agent definition (as the local
// runtime stores it).
func AgentConfig(def *agent.Definition) (json.RawMessage, error) {
	raw, err := json.Marshal(def)
	if err != nil {
		return nil, fmt.Errorf("encode agent %s: %w", def.Ref(), err)
	}
	return raw, nil
}

// ConfigHash is the SHA-256 (hex) of the canonical JSON of an agent
// config; two configs are the same definition iff their hashes match.
func ConfigHash(raw json.RawMessage) string {
	var v any
	canon := []byte(raw)
	if json.Unmarshal(raw, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// SubmitRequest is the submit update's argument. The client chooses
// RunID (a new UUID) and RequestID ("" is not allowed: the client fills
// a new ID); the update ID must equal RequestID.
type SubmitRequest struct {
	// Message is a JSON string or an array of text content blocks.
	Message   json.RawMessage `json:"message"`
	RequestID string          `json:"request_id"`
	RunID     string          `json:"run_id"`
	Stream    bool            `json:"stream,omitempty"`
	// Trace is the trace context of the request that submits the run
	// (nil without tracing): the run's activity spans join its trace.
	Trace *TraceContext `json:"trace,omitempty"`
}

// SubmitResult is the submit update's result: the run (new or the one
// the request ID already started) and whether this update created it.
type SubmitResult struct {
	Run     runtime.RunResult `json:"run"`
	Created bool              `json:"created"`
}

// UpdateID returns the update ID of a submit: the request ID.
func UpdateID(requestID string) string { return requestID }

// ControlRequest is the control update's argument.
type ControlRequest struct {
	// Action is ActionResume, ActionPaused or ActionCancelled.
	Action string `json:"action"`
	// Trace is the trace context of the request (nil without tracing): a
	// run it resumes goes on in its trace.
	Trace *TraceContext `json:"trace,omitempty"`
}

// ControlResult is the control update's result.
//
// resume: RunID is the run resumed (or already being driven), nil when
// nothing is left to resume. paused/cancelled: Run is the latest run as it
// stands once the run stopped (or after about 5 s), nil when the session
// has no run.
type ControlResult struct {
	RunID *string            `json:"run_id"`
	Run   *runtime.RunResult `json:"run"`
}

// ResolveRequest is the resolve update's argument: Allow decides an
// approval; otherwise exactly one of Result, Retry, Abort decides an
// uncertain outcome. Resume drives the run on afterwards and answers with
// its result once it stops again.
type ResolveRequest struct {
	Key    string            `json:"key"`
	Allow  *bool             `json:"allow,omitempty"`
	Result *model.ToolResult `json:"result,omitempty"`
	Retry  bool              `json:"retry,omitempty"`
	Abort  bool              `json:"abort,omitempty"`
	Resume bool              `json:"resume,omitempty"`
	// Trace is the trace context of the request (nil without tracing): a
	// run it resumes goes on in its trace.
	Trace *TraceContext `json:"trace,omitempty"`
}

// ResolveResult is the resolve update's result: the latest run.
type ResolveResult struct {
	Run runtime.RunResult `json:"run"`
}

// SessionInfo is the get_session query's result.
type SessionInfo struct {
	SessionID string          `json:"session_id"`
	Agent     agent.Ref       `json:"agent"`
	Owner     string          `json:"owner"`
	Metadata  json.RawMessage `json:"metadata"`
	CreatedAt time.Time       `json:"created_at"`
	Recording bool            `json:"recording"`
	// Busy: an unfinished run exists (a submit would be refused).
	Busy bool `json:"busy"`
	// Active is the unfinished run's ID.
	Active *string `json:"active"`
	// Status is the active run's status, or "idle".
	Status string `json:"status"`
	// Runs lists run IDs oldest first.
	Runs []string `json:"runs"`
	// LatestRun is the newest run and its status, nil when none.
	LatestRun *runtime.RunRef `json:"latest_run"`
	// LatestUpdatedAt is the newest run's last update (zero when none):
	// when it finished, for a finished run (retention).
	LatestUpdatedAt time.Time `json:"latest_updated_at,omitzero"`
	// MCPTools are the session's pinned MCP tools (SessionInput.MCPTools).
	MCPTools []mcp.PinnedTool `json:"mcp_tools,omitempty"`
}

// Session converts the summary to the runtime's public session view.
func (s SessionInfo) Session() runtime.Session {
	return runtime.Session{
		ID: s.SessionID, Agent: s.Agent, Recording: s.Recording, Metadata: s.Metadata,
		CreatedAt: s.CreatedAt, LatestRun: s.LatestRun, MCPTools: s.MCPTools,
	}
}

// Application error types of update rejections and failures. Each maps
// to one runtime error (MapError).
const (
	ErrTypeSessionBusy           = "HarnessSessionBusy"
	ErrTypeRequestConflict       = "HarnessRequestConflict"
	ErrTypeUnknownExecutionKey   = "HarnessUnknownExecutionKey"
	ErrTypeNotAwaitingResolution = "HarnessNotAwaitingResolution"
	ErrTypeResolutionInvalid     = "HarnessResolutionInvalid"
	ErrTypeInvalidMessage        = "HarnessInvalidMessage"
	ErrTypeNotFound              = "HarnessNotFound"
	ErrTypeInvalidRequest        = "HarnessInvalidRequest"
	// ErrTypeAgentMismatch: an activity found the worker's registered
	// definition different from the persisted one (non-retryable; message
	// "Worker agent definition differs from persisted configuration").
	ErrTypeAgentMismatch = "HarnessAgentMismatch"
)

// AgentMismatchMessage is the message of an ErrTypeAgentMismatch failure.
const AgentMismatchMessage = "Worker agent definition differs from persisted configuration"

var errTypes = []struct {
	typ string
	err error
}{
	{ErrTypeSessionBusy, runtime.ErrSessionBusy},
	{ErrTypeRequestConflict, runtime.ErrRequestConflict},
	{ErrTypeUnknownExecutionKey, runtime.ErrUnknownExecutionKey},
	{ErrTypeNotAwaitingResolution, runtime.ErrNotAwaitingResolution},
	{ErrTypeResolutionInvalid, runtime.ErrResolutionInvalid},
	{ErrTypeInvalidMessage, runtime.ErrInvalidMessage},
	{ErrTypeNotFound, runtime.ErrNotFound},
	{ErrTypeAgentMismatch, runtime.ErrAgentMismatch},
}

// ErrorType returns the application error type for a runtime error
// ("" when err maps to none).
func ErrorType(err error) string {
	for _, t := range errTypes {
		if errors.Is(err, t.err) {
			return t.typ
		}
	}
	return ""
}

// newAppError returns the typed application error for a runtime sentinel
// with a client-safe message (non-retryable).
func newAppError(sentinel error, msg string) error {
	typ := ErrorType(sentinel)
	if typ == "" {
		typ = ErrTypeInvalidRequest
	}
	return temporal.NewNonRetryableApplicationError(msg, typ, nil)
}

// MapError maps an error returned by an update or query (or any error
// wrapping an *temporal.ApplicationError of one of the ErrType* types) to
// the runtime error the local engine returns: a *runtime.PublicError whose
// Detail is the application error's message and whose sentinel is
// runtime.ErrSessionBusy, ErrRequestConflict, ErrUnknownExecutionKey,
// ErrNotAwaitingResolution, ErrResolutionInvalid, ErrInvalidMessage,
// ErrNotFound or ErrAgentMismatch. Other errors are returned unchanged
// (nil stays nil).
func MapError(err error) error {
	if mapped, ok := mapAppError(err); ok {
		return mapped
	}
	return err
}

// mapAppError is MapError's mapping, with whether err was mapped.
func mapAppError(err error) (error, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		return nil, false
	}
	for _, t := range errTypes {
		if app.Type() == t.typ {
			return &runtime.PublicError{Err: t.err, Detail: app.Message()}, true
		}
	}
	return nil, false
}

// EventSink publishes provisional public events of a run (Redis Streams
// in production, internal/temporal/events). Events carry stable event IDs
// so a re-publish (activity retry) is deduplicated by the sink. A publish
// failure never fails or blocks durable work: the engine logs it and goes
// on (authoritative state is always available through queries).
type EventSink interface {
	Publish(ctx context.Context, runID string, events []runtime.RunEvent) error
}

// NopSink discards events.
type NopSink struct{}

// Publish implements EventSink.
func (NopSink) Publish(context.Context, string, []runtime.RunEvent) error { return nil }
