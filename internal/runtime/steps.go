package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"hxd/internal/agent"
	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/tool"
)

// Pure steps of the run loop, shared by the local driver and the Temporal
// workflow (internal/temporal): they change a RunState only through the
// tables of machine.go and never do I/O.

// StepFailure is a command failure that ends the run as failed with
// {Type, Message}.
type StepFailure struct {
	Type    string
	Message string
}

// Error implements error.
func (e *StepFailure) Error() string { return e.Type + ": " + e.Message }

// asCommandError turns a *StepFailure into the driver's commandError.
func asCommandError(err error) error {
	if f, ok := errors.AsType[*StepFailure](err); ok {
		return &commandError{typ: f.Type, msg: f.Message}
	}
	return err
}

// Advance moves st to the phase after outcome o (NextPhase).
func Advance(st *RunState, o Outcome) error {
	p, err := NextPhase(st.Phase, o)
	if err != nil {
		return &StepFailure{Type: "RuntimeError", Message: err.Error()}
	}
	st.Phase = p
	return nil
}

// SetStatus moves st's status by ev (NextStatus).
func SetStatus(st *RunState, ev StatusEvent) error {
	s, err := NextStatus(st.Status, ev)
	if err != nil {
		return &StepFailure{Type: "RuntimeError", Message: err.Error()}
	}
	st.Status = s
	return nil
}

// SetToolStatus moves e's status by ev (NextToolStatus).
func SetToolStatus(e *ToolEntry, ev ToolEvent) error {
	s, err := NextToolStatus(e.Status, ev)
	if err != nil {
		return &StepFailure{Type: "RuntimeError", Message: err.Error()}
	}
	e.Status = s
	return nil
}

// ExecutionKey returns "<run_id>:<iterations>:<call id>".
func ExecutionKey(runID string, iterations int, callID string) string {
	return runID + ":" + itoa(iterations) + ":" + callID
}

// UserMessage turns a submitted message (a JSON string or text content
// blocks) into a user message; errors wrap ErrInvalidMessage.
func UserMessage(raw json.RawMessage) (model.Message, error) { return userMessage(raw) }

// MessageDigest identifies a submitted message for request idempotency.
func MessageDigest(raw json.RawMessage) string { return messageDigest(raw) }

// StartRun is the start command: append the user message.
func StartRun(st *RunState) error {
	msg, err := userMessage(st.Message)
	if err != nil {
		return &StepFailure{Type: "ValueError", Message: err.Error()}
	}
	st.Messages = append(st.Messages, msg)
	return Advance(st, OutStarted)
}

// PrepareModel is the prepare_model command: open a new step, or go to
// finish when maxIterations model steps were made. The local driver
// stashes the previous step's tool rows before calling it.
func PrepareModel(st *RunState, maxIterations int) error {
	if st.Iterations >= maxIterations {
		st.StopReason = ptr("max_iterations")
		return Advance(st, OutIterationLimit)
	}
	st.Iterations++
	st.Attempt = 0
	st.ModelAttempts = nil
	st.ChainPosition = ChainPosition{}
	st.Tools = nil
	st.Response = nil
	return Advance(st, OutReady)
}

// ToolSpecs describes an agent's tools to the model, in definition order.
func ToolSpecs(def *agent.Definition) []model.ToolSpec {
	specs := make([]model.ToolSpec, 0, len(def.Tools))
	for _, t := range def.Tools {
		cfg := t.WithDefaults()
		specs = append(specs, model.ToolSpec{Name: cfg.Name, Description: cfg.Description, InputSchema: cfg.InputSchema})
	}
	return specs
}

// BuildModelRequest returns the model request of st's current step and
// attempt, for the step's current model of def's chain (ChainModel).
func BuildModelRequest(def *agent.Definition, specs []model.ToolSpec, st *RunState) *model.Request {
	if specs == nil {
		specs = []model.ToolSpec{}
	}
	m := ChainModel(def, st.ModelIndex)
	return &model.Request{
		Model: m.Model, Messages: st.Messages, System: def.SystemPrompt, Tools: specs,
		MaxTokens: m.MaxTokens, Temperature: m.Temperature,
		Step: st.Iterations, Attempt: st.Attempt,
	}
}

// ProcessResponse applies the agent's response middleware to a raw model
// response (tool calls never nil). Native content blocks (Content) are
// kept in order; when the agent has response middleware, the processed
// text replaces the reply's text blocks: it takes the first text block's
// place and the other text blocks go (none when it is empty), so that the
// processed Content's text is the processed Text. Thinking, redacted and
// opaque blocks are never touched: they go back to the provider verbatim.
func ProcessResponse(def *agent.Definition, resp *model.Response) model.Response {
	processed := *resp
	processed.Text = agent.ApplyAll(def.ResponseMiddleware, resp.Text)
	if processed.ToolCalls == nil {
		processed.ToolCalls = []model.ToolCall{}
	}
	if len(resp.Content) > 0 {
		processed.Content = processedContent(resp.Content, processed.Text, len(def.ResponseMiddleware) > 0)
	}
	return processed
}

// processedContent returns a copy of blocks; when rewrite is set, text is
// put in the first text block's place and the other text blocks dropped.
func processedContent(blocks []model.ContentBlock, text string, rewrite bool) []model.ContentBlock {
	out := make([]model.ContentBlock, 0, len(blocks))
	placed := false
	for _, b := range blocks {
		if rewrite && b.Type == model.BlockText && len(b.Raw) == 0 {
			if placed || text == "" {
				continue
			}
			b.Text, placed = text, true
		}
		out = append(out, b)
	}
	return out
}

// CompletedPayload is the model.completed payload of a processed response:
// {text, thinking, tool_calls, stop_reason, usage}, without the native
// blocks, which REFERENCE §2.4 puts in model.response and model.processed
// only.
func CompletedPayload(resp *model.Response) model.Response {
	out := *resp
	out.Content = nil
	return out
}

// assistantMessage is the assistant turn of a response: its native blocks
// verbatim and in order when it has them (a tool_use block without input
// gets {}), else a text block (when there is text) and its tool calls.
func assistantMessage(resp *model.Response) model.Message {
	if len(resp.Content) > 0 {
		blocks := make([]model.ContentBlock, len(resp.Content))
		copy(blocks, resp.Content)
		for i := range blocks {
			if blocks[i].Type == model.BlockToolUse && len(blocks[i].Raw) == 0 && len(blocks[i].Input) == 0 {
				blocks[i].Input = json.RawMessage(`{}`)
			}
		}
		return model.Message{Role: model.RoleAssistant, Content: blocks}
	}
	blocks := []model.ContentBlock{}
	if resp.Text != "" {
		blocks = append(blocks, model.ContentBlock{Type: model.BlockText, Text: resp.Text})
	}
	for _, c := range resp.ToolCalls {
		if len(c.Input) == 0 {
			c.Input = json.RawMessage(`{}`)
		}
		blocks = append(blocks, model.ContentBlock{Type: model.BlockToolUse, ID: c.ID, Name: c.Name, Input: c.Input})
	}
	return model.Message{Role: model.RoleAssistant, Content: blocks}
}

// PrepareTools is the prepare_tools command: turn the response's tool
// calls into entries (configured by lookup; an unknown tool gets the
// defaults) and append the assistant message (the response's native
// blocks verbatim when it has them, so the next call sends them back).
func PrepareTools(st *RunState, lookup func(name string) (tool.Config, bool)) error {
	resp := st.Response
	seen := map[string]bool{}
	st.Tools = st.Tools[:0]
	for _, c := range resp.ToolCalls {
		if seen[c.ID] {
			return &StepFailure{Type: "ValueError", Message: "Duplicate tool call IDs in a model response"}
		}
		seen[c.ID] = true
		if len(c.Input) == 0 {
			c.Input = json.RawMessage(`{}`)
		}
		e := ToolEntry{
			Call: c, Status: ToolPrepared, ExecutionKey: ExecutionKey(st.RunID, st.Iterations, c.ID),
			Policy: tool.PolicyManual, Timeout: 300,
		}
		if cfg, ok := lookup(c.Name); ok {
			e.Policy, e.Concurrent, e.Timeout, e.Retry = cfg.ReplayPolicy, cfg.Concurrent, journal.Float(cfg.TimeoutSeconds), cfg.Retry
		}
		st.Tools = append(st.Tools, e)
	}
	st.Messages = append(st.Messages, assistantMessage(resp))
	return Advance(st, OutPrepared)
}

// ToolGate is what a tool's permission allows for an entry.
type ToolGate string

// Tool gates.
const (
	GateRun  ToolGate = "run"  // dispatch
	GateDeny ToolGate = "deny" // answer "Permission denied"
	GateAsk  ToolGate = "ask"  // stop for approval
)

// GateTool applies a tool's permission to an entry.
func GateTool(cfg tool.Config, e *ToolEntry) ToolGate {
	switch {
	case cfg.Permission == tool.PermissionDeny:
		return GateDeny
	case cfg.Permission == tool.PermissionAsk && (e.Approved == nil || !*e.Approved):
		return GateAsk
	}
	return GateRun
}

// AnswerTool completes an entry without dispatching it (deny, unknown
// tool, invalid input) and returns the error result.
func AnswerTool(e *ToolEntry, text string) (model.ToolResult, error) {
	if err := SetToolStatus(e, TevAnswer); err != nil {
		return model.ToolResult{}, err
	}
	res := model.ToolResult{ToolCallID: e.Call.ID, Content: tool.TextContent(text), IsError: true}
	e.Result = &res
	return res, nil
}

// FailureAction is what a failed tool attempt leads to (REFERENCE §4.2).
type FailureAction string

// Failure actions.
const (
	FailErrorResult FailureAction = "error_result" // transient, no retry left: "Tool execution error: …"
	FailUncertain   FailureAction = "uncertain"    // manual tool: ask for a resolution
	FailRetry       FailureAction = "retry"        // retry automatically
	FailRun         FailureAction = "fail"         // fail the run with the failure
)

// ToolFailureAction decides a failed attempt of e (its attempt already
// counted) by replay policy and retry budget. A manual tool's failure that
// may have taken effect (a timeout, a connection cut after the request) is
// uncertain even when transient: REFERENCE §4.2 step 3 handles a timeout
// like any handler exception, and an error result would invite the model
// to call the tool again.
func ToolFailureAction(e *ToolEntry, f *tool.Failure) FailureAction {
	retry := e.Retry
	if retry == nil {
		retry = &tool.DefaultRetry
	}
	canRetry := e.Policy != tool.PolicyManual && e.Attempt < retry.Attempts
	switch {
	case e.Policy == tool.PolicyManual && f.MayHaveRun:
		return FailUncertain
	case f.Transient && !canRetry:
		return FailErrorResult
	case e.Policy == tool.PolicyManual:
		return FailUncertain
	case canRetry:
		return FailRetry
	default:
		return FailRun
	}
}

// ToolErrorText is the result text of a transient failure without retry.
func ToolErrorText(msg string) string { return "Tool execution error: " + msg }

// ApplyToContent applies middleware to every string of a result's content.
func ApplyToContent(mws []agent.Middleware, content json.RawMessage) json.RawMessage {
	return applyToContent(mws, content)
}

// CollectResults appends the tool results of a step whose entries all
// completed and moves to the next step.
func CollectResults(st *RunState) error {
	blocks := make([]model.ContentBlock, 0, len(st.Tools))
	for i := range st.Tools {
		res := st.Tools[i].Result
		if res == nil {
			return &StepFailure{Type: "RuntimeError", Message: fmt.Sprintf("tool entry %s has no result", st.Tools[i].ExecutionKey)}
		}
		blocks = append(blocks, model.ContentBlock{Type: model.BlockToolResult, ToolUseID: res.ToolCallID, Content: res.Content, IsError: res.IsError})
	}
	st.Messages = append(st.Messages, model.Message{Role: model.RoleUser, Content: blocks})
	return Advance(st, OutCollected)
}

// FinishRun is the finish command: set the output and complete the run,
// appending the final assistant message (the response's native blocks
// verbatim when it has them). It returns the output (the turn_complete
// payload).
func FinishRun(st *RunState) string {
	out := ""
	if st.Response != nil {
		out = st.Response.Text
		if st.StopReason == nil {
			st.StopReason = ptr(st.Response.StopReason)
		}
		if st.Phase == PhaseFinish && len(st.Response.ToolCalls) == 0 {
			if len(st.Response.Content) > 0 {
				st.Messages = append(st.Messages, assistantMessage(st.Response))
			} else {
				st.Messages = append(st.Messages, model.TextMessage(model.RoleAssistant, out))
			}
		}
	}
	st.Output = &out
	_ = Advance(st, OutFinished)
	_ = SetStatus(st, EvComplete)
	return out
}

// CancelState ends the run as cancelled; open tool calls are answered so
// the conversation stays well-formed.
func CancelState(st *RunState, stopReason string, runErr *RunError) {
	cancelState(st, stopReason, runErr)
}

// Decision is an approval (Allow) or a resolution (exactly one of Result,
// Retry, Abort).
type Decision struct {
	Allow  *bool
	Result *model.ToolResult
	Retry  bool
	Abort  bool
	// At is when it was decided (the engine's clock), for the timeline.
	At time.Time
}

// ResolveEntry applies a decision to entry e of st (REFERENCE §4.4);
// errors wrap ErrResolutionInvalid.
func ResolveEntry(st *RunState, e *ToolEntry, d Decision) error {
	return resolveEntry(st, e, decision{allow: d.Allow, result: d.Result, retry: d.Retry, abort: d.Abort, at: d.At})
}

// AwaitingResolution reports whether a run in status s takes decisions.
func AwaitingResolution(s RunStatus) bool {
	switch s {
	case StatusAwaitingInput, StatusPaused, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// PendingTools lists the entries awaiting a decision, in state order
// (never nil).
func (s *RunState) PendingTools() []PendingTool {
	p := s.pending()
	if p == nil {
		p = []PendingTool{}
	}
	return p
}

// ResultData is the run_result event payload (the RunResult field dump).
func (s *RunState) ResultData() any { return s.resultData() }

// StepID is the decimal step id of the state.
func (s *RunState) StepID() string { return s.stepID() }

// View returns the public RunResult of a state.
func (s *RunState) View() RunResult {
	return RunResult{
		SessionID: SessionIDOf(s.SessionID), RunID: s.RunID, Output: s.Output, Status: s.Status,
		StopReason: s.StopReason, Usage: s.Usage, Error: s.Error, Pending: s.PendingTools(),
		UsageIncomplete: s.UsageIncomplete,
	}
}

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }

// ArtifactURI is how content and state refer to a stored artifact.
func ArtifactURI(key string) string { return "artifact://" + key }

// ArtifactRef is one stored file a tool returned: its content key (lowercase
// hex SHA-256), media type and size.
type ArtifactRef struct {
	Key       string `json:"key"`
	MediaType string `json:"media_type"`
	Size      int    `json:"size_bytes"`
}

// AttachArtifacts returns a tool result's content with one
// `[artifact://<sha256> <media type>, <n> bytes]` line per stored file
// appended when the content is text; other content is returned unchanged.
func AttachArtifacts(content json.RawMessage, refs []ArtifactRef) json.RawMessage {
	var text string
	if json.Unmarshal(content, &text) != nil {
		return content
	}
	for _, r := range refs {
		text += fmt.Sprintf("\n[%s %s, %d bytes]", ArtifactURI(r.Key), r.MediaType, r.Size)
	}
	return tool.TextContent(text)
}

// RecordArtifacts records the stored files of a tool entry in the state's
// extensions: artifacts[executionKey] = [{uri, media_type, size_bytes}].
func RecordArtifacts(st *RunState, executionKey string, refs []ArtifactRef) {
	list := make([]map[string]any, 0, len(refs))
	for _, r := range refs {
		list = append(list, map[string]any{"uri": ArtifactURI(r.Key), "media_type": r.MediaType, "size_bytes": r.Size})
	}
	if st.Extensions == nil {
		st.Extensions = map[string]any{}
	}
	ext, _ := st.Extensions["artifacts"].(map[string]any)
	if ext == nil {
		ext = map[string]any{}
		st.Extensions["artifacts"] = ext
	}
	ext[executionKey] = list
}

// spillPreviewChars is how much of a spilled result stays in the conversation.
const spillPreviewChars = 2000

// SpillText returns what a processed tool result spills when it is longer
// than limit characters (limit <= 0: never): the text of a string content,
// else the content's JSON, and its format ("text" or "json").
func SpillText(content json.RawMessage, limit int) (text, format string, spill bool) {
	if limit <= 0 {
		return "", "", false
	}
	text, format = string(content), "json"
	var s string
	if json.Unmarshal(content, &s) == nil {
		text, format = s, "text"
	}
	if len([]rune(text)) <= limit {
		return "", "", false
	}
	return text, format, true
}

// SpillResult records a spilled result (text stored as artifact key, as
// result id) in the state's extensions (result_spill.results[id], as the
// reference's result-spill extension does) and returns the content that
// replaces it: a preview of at most min(2000, limit) characters and a note
// carrying the artifact:// URI.
func SpillResult(st *RunState, e *ToolEntry, text, format, key, id string, limit int) json.RawMessage {
	runes := []rune(text)
	uri := ArtifactURI(key)
	preview := string(runes[:min(spillPreviewChars, limit, len(runes))])
	note := fmt.Sprintf("%s\n\n[Result truncated: %d characters. Full result: %s]", preview, len(runes), uri)
	if st.Extensions == nil {
		st.Extensions = map[string]any{}
	}
	ext, _ := st.Extensions["result_spill"].(map[string]any)
	if ext == nil {
		ext = map[string]any{"results": map[string]any{}}
		st.Extensions["result_spill"] = ext
	}
	results, _ := ext["results"].(map[string]any)
	if results == nil {
		results = map[string]any{}
		ext["results"] = results
	}
	results[id] = map[string]any{
		"result_id": id, "path": uri, "fmt": format, "row_count": nil, "columns": nil,
		"parent_keys": []string{e.ExecutionKey}, "size_bytes": len(text),
	}
	return tool.TextContent(note)
}

// ConcurrentBatch reports whether tools is a batch to run in parallel
// (REFERENCE §4.2): every entry's tool is concurrent and two or more
// entries have a call ahead of them (prepared, or started and to run
// again).
func ConcurrentBatch(tools []ToolEntry) bool {
	calls := 0
	for i := range tools {
		if !tools[i].Concurrent {
			return false
		}
		if tools[i].Status == ToolPrepared || tools[i].Status == ToolStarted {
			calls++
		}
	}
	return calls > 1
}

// PublicToolResult is res as a tool_result event shows it: its content as
// text (a JSON string: model.ToolResultText, which is also what a model
// gets), as the reference's ToolResult holds it, so that a bundle of the
// run verifies whatever JSON a tool answered with. The journal's
// tool.returned and tool.processed keep the content as it was.
func PublicToolResult(res model.ToolResult) model.ToolResult {
	trimmed := bytes.TrimSpace(res.Content)
	if len(trimmed) > 0 && trimmed[0] == '"' {
		return res
	}
	res.Content = tool.TextContent(model.ToolResultText(res.Content))
	return res
}
