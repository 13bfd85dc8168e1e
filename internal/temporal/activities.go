package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"hxd/internal/agent"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// ModelInput is the model activity's input: one model call of a run's
// step, plus the workflow events to publish on the way.
type ModelInput struct {
	Agent      agent.Ref `json:"agent"`
	ConfigHash string    `json:"config_hash"`
	SessionID  string    `json:"session_id"`
	RunID      string    `json:"run_id"`
	// Step is state.iterations; Attempt the run's model attempt of the
	// first activity attempt (later activity attempts add to it).
	Step    int                `json:"step"`
	Attempt int                `json:"attempt"`
	Request model.Request      `json:"request"`
	Events  []runtime.RunEvent `json:"events,omitempty"`
	// ModelIndex is the position of the model to call in the agent's
	// fallback chain (0: the agent's model; fallback.go).
	ModelIndex int `json:"model_index,omitempty"`
	// Stream: the run streams (runtime.RunState.Stream); the activity
	// publishes the answer's deltas as they arrive (callModel).
	Stream bool `json:"stream,omitempty"`
	// Trace is the run's trace context (RunRecord.Trace): the chat span
	// is its child (runTrace). Nil: the activity span's child.
	Trace *TraceContext `json:"trace,omitempty"`
}

// ModelOutput is the raw model response and the attempt that produced it.
// UsageReported carries Response.UsageReported, which Response's own JSON
// leaves out.
//
// FailedUsage is the usage that earlier attempts of the same activity
// execution (Temporal's retries) reported before they failed, summed; nil
// when none reported any (and in histories recorded before it existed).
// The workflow adds it to the run's usage with the answer's.
type ModelOutput struct {
	Response      model.Response `json:"response"`
	Attempt       int            `json:"attempt"`
	UsageReported bool           `json:"usage_reported"`
	FailedUsage   *model.Usage   `json:"failed_usage,omitempty"`
}

// ToolInput is the tool activity's input: one tool entry (its Attempt
// already counts the first activity attempt), plus events to publish.
type ToolInput struct {
	Agent      agent.Ref          `json:"agent"`
	ConfigHash string             `json:"config_hash"`
	SessionID  string             `json:"session_id"`
	RunID      string             `json:"run_id"`
	Step       int                `json:"step"`
	Entry      runtime.ToolEntry  `json:"entry"`
	Events     []runtime.RunEvent `json:"events,omitempty"`
	// Owner is the session's owner: the principal the activity records as
	// allowed to read the artifacts it stores.
	Owner string `json:"owner,omitempty"`
	// KeepUnspilled: a result whose spill cannot be stored is returned
	// with SpillFailed instead of failing the attempt (PatchRawBeforeSpill).
	KeepUnspilled bool `json:"keep_unspilled,omitempty"`
	// MCPTool is the pinned MCP tool the entry calls (SessionInput.MCPTools),
	// nil for the agent's own tools: the activity calls it through the
	// worker's Manager without listing the server's tools.
	MCPTool *mcp.PinnedTool `json:"mcp_tool,omitempty"`
	// Trace is the run's trace context (RunRecord.Trace): the
	// execute_tool span is its child (runTrace). Nil: the activity span's
	// child.
	Trace *TraceContext `json:"trace,omitempty"`
}

// Tool activity outcome kinds.
const (
	ToolReturned     = "returned"      // Result is the raw result
	ToolClientResult = "client_result" // a client tool: the caller resolves it
	ToolUncertain    = "uncertain"     // a manual tool failed: outcome unknown
	ToolFailed       = "failed"        // fail the run with Failure
)

// ToolOutput is what one tool call came to.
type ToolOutput struct {
	Kind    string            `json:"kind"`
	Result  *model.ToolResult `json:"result,omitempty"`
	Failure *runtime.RunError `json:"failure,omitempty"`
	Attempt int               `json:"attempt"`
	// Artifacts are the stored files the tool returned (a returned
	// result's text content already ends with their URI lines); the
	// workflow records them in the state's extensions.artifacts.
	Artifacts []runtime.ArtifactRef `json:"artifacts,omitempty"`
	// Spill, when set, says that Result's content after result middleware
	// is longer than max_result_chars and is stored under Spill.Key.
	Spill *SpillRef `json:"spill,omitempty"`
	// SpillFailed says that Result's content after result middleware is
	// longer than max_result_chars but could not be stored: the workflow
	// spills it with a spill activity (KeepUnspilled).
	SpillFailed bool `json:"spill_failed,omitempty"`
}

// SpillRef is a spilled tool result: the artifact key of its full text and
// its result id (extensions.result_spill.results).
type SpillRef struct {
	Key string `json:"key"`
	ID  string `json:"id"`
}

// SpillInput is the spill activity's input: the processed text of a tool
// result the caller supplied (a client tool's result, a resolved uncertain
// outcome) that is longer than max_result_chars, plus events to publish.
type SpillInput struct {
	SessionID    string `json:"session_id"`
	RunID        string `json:"run_id"`
	ExecutionKey string `json:"execution_key"`
	// Owner is the principal allowed to read the stored text.
	Owner  string             `json:"owner,omitempty"`
	Text   string             `json:"text"`
	Events []runtime.RunEvent `json:"events,omitempty"`
}

// PublishInput is the publish activity's input.
type PublishInput struct {
	RunID  string             `json:"run_id"`
	Events []runtime.RunEvent `json:"events"`
}

// Activities are the worker's activities. Each rebuilds the agent from
// the process-local registry by AgentRef and refuses to run when the
// registered definition differs from the persisted one.
type Activities struct {
	deps WorkerDeps
	log  *slog.Logger
	// tracing makes the chat and execute_tool spans (nil: none).
	tracing *runtime.Tracing
	// mcp holds the connections of bridged MCP calls (deps.MCP or the
	// activities' own); Close closes it.
	mcp *mcp.Manager

	mu       sync.Mutex
	bindings map[string]*binding // by ref + config hash
}

type binding struct {
	def      *agent.Definition
	provider model.Provider
	tools    map[string]tool.Tool

	// fallbacks are the providers of the agent's fallback entries, in
	// chain order (fallback.go).
	fallbacks []model.Provider
}

// NewActivities returns the activities over deps (defaults applied).
func NewActivities(deps WorkerDeps) *Activities {
	deps = deps.withDefaults()
	m := deps.MCP
	if m == nil {
		m = mcp.NewManager(mcp.Options{Logger: deps.Logger})
	}
	return &Activities{
		deps: deps, log: deps.Logger.With("component", "temporal-activities"), mcp: m, bindings: map[string]*binding{},
		tracing: runtime.NewTracing(deps.TracerProvider, deps.CaptureContent),
	}
}

func mismatch() error {
	return temporal.NewNonRetryableApplicationError(AgentMismatchMessage, ErrTypeAgentMismatch, nil)
}

// bind returns the worker's binding of ref, refusing a definition whose
// config hash differs from the persisted one.
func (a *Activities) bind(ref agent.Ref, hash string) (*binding, error) {
	key := ref.String() + "#" + hash
	a.mu.Lock()
	defer a.mu.Unlock()
	if b, ok := a.bindings[key]; ok {
		return b, nil
	}
	if a.deps.Agents == nil {
		return nil, mismatch()
	}
	def, err := a.deps.Agents.Get(ref)
	if err != nil {
		return nil, mismatch()
	}
	raw, err := AgentConfig(def)
	if err != nil || ConfigHash(raw) != hash {
		return nil, mismatch()
	}
	p, err := model.New(def.Model, a.deps.ModelOptions)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("bind model: "+err.Error(), "ConfigurationError", nil)
	}
	fallbacks, err := runtime.BindFallbacks(def, a.deps.ModelOptions)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("bind model: "+err.Error(), "ConfigurationError", nil)
	}
	b := &binding{def: def, provider: p, tools: map[string]tool.Tool{}, fallbacks: fallbacks}
	for _, td := range def.Tools {
		t, err := tool.New(td.Config, a.deps.ToolOptions)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError("bind tool "+td.Name+": "+err.Error(), "ConfigurationError", nil)
		}
		b.tools[td.Name] = t
	}
	a.bindings[key] = b
	return b, nil
}

// publish sends events to the sink, bounded and best effort: a failure is
// logged, never returned.
func (a *Activities) publish(ctx context.Context, events []runtime.RunEvent) {
	for len(events) > 0 {
		n := 1
		for n < len(events) && events[n].RunID == events[0].RunID {
			n++
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.deps.PublishTimeout)
		err := a.deps.Events.Publish(pctx, events[0].RunID, events[:n])
		cancel()
		if err != nil {
			a.log.Warn("publish events failed; events are provisional", "run_id", events[0].RunID, "events", n, "error", err)
		}
		events = events[n:]
	}
}

// deltaEvents builds an activity's own events with IDs
// "<run_id>:<iterations>:<activity_id>:<attempt>:<n>".
type deltaEvents struct {
	sessionID, runID, stepID, prefix string
	events                           []runtime.RunEvent
	sent                             int // events[:sent] are published (streamed)
}

// unsent returns the events not published yet and counts them as sent.
func (d *deltaEvents) unsent() []runtime.RunEvent {
	out := d.events[d.sent:]
	d.sent = len(d.events)
	return out
}

func newDeltaEvents(ctx context.Context, sessionID, runID string, step int) *deltaEvents {
	info := activity.GetInfo(ctx)
	return &deltaEvents{
		sessionID: sessionID, runID: runID, stepID: strconv.Itoa(step),
		prefix: runID + ":" + strconv.Itoa(step) + ":" + info.ActivityID + ":" + strconv.Itoa(int(info.Attempt)) + ":",
	}
}

func (d *deltaEvents) add(typ string, data any, attempt int) {
	raw, err := json.Marshal(data)
	if err != nil {
		raw = json.RawMessage(`null`)
	}
	d.events = append(d.events, runtime.RunEvent{
		Type: typ, Data: raw, SessionID: d.sessionID, RunID: d.runID, StepID: d.stepID,
		AttemptID: strconv.Itoa(attempt), EventID: d.prefix + strconv.Itoa(len(d.events)),
	})
}

// heartbeat records a heartbeat (with details, kept for the next attempt)
// every interval until the returned stop is called, so cancellation
// reaches the activity and a lost worker is noticed within the heartbeat
// timeout.
func heartbeat(ctx context.Context, every time.Duration, details ...any) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, details...)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// Model makes one model call (activity ActivityModel). A failure is an
// ApplicationError of the failure's type, retryable as the provider
// classified it, with the run's model attempt as details, followed by the
// usage the failed attempts of this execution reported (this one's
// included) when any did (failedUsageOf). That usage is also the heartbeat
// details, so that the next attempt (a Temporal retry) carries it on and
// returns it as ModelOutput.FailedUsage.
func (a *Activities) Model(ctx context.Context, in ModelInput) (*ModelOutput, error) {
	a.publish(ctx, in.Events)
	info := activity.GetInfo(ctx)
	attempt := in.Attempt + int(info.Attempt) - 1
	b, err := a.bind(in.Agent, in.ConfigHash)
	if err != nil {
		return nil, err
	}
	own := newDeltaEvents(ctx, in.SessionID, in.RunID, in.Step)
	defer func() { a.publish(ctx, own.unsent()) }()
	if info.Attempt > 1 {
		// A retried model call: the previous attempt's deltas are void.
		own.add(runtime.EventAttemptReset, map[string]any{"attempt": attempt - 1}, attempt)
	}
	req := in.Request
	req.Step, req.Attempt = in.Step, attempt
	failed := priorFailedUsage(ctx)
	var beat []any
	if failed != nil {
		beat = []any{*failed}
	}
	stop := heartbeat(ctx, a.deps.HeartbeatEvery, beat...)
	provider, cfg := b.chainModel(in.ModelIndex)
	parent, link := runTrace(ctx, in.Trace)
	spanCtx, span := a.tracing.StartChat(parent, runtime.ChatAttempt{
		SessionID: in.SessionID, RunID: in.RunID, Provider: cfg.Provider, Model: cfg.Model, Attempt: attempt, Request: &req,
	}, link...)
	callCtx, cancel := context.WithTimeout(spanCtx, seconds(cfg.TimeoutSeconds))
	resp, streamed, err := a.callModel(callCtx, in, b, provider, &req, own, attempt)
	cancel()
	stop()
	a.tracing.EndChat(span, cfg.Model, resp, err)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		f := model.AsFailure(err)
		details := []any{attempt}
		if f.Usage != nil {
			failed = addUsage(failed, *f.Usage)
		}
		if failed != nil {
			details = append(details, *failed)
			// Flushed with the failure: the next attempt reads it.
			activity.RecordHeartbeat(ctx, *failed)
		}
		opts := temporal.ApplicationErrorOptions{NonRetryable: !f.Retryable, Details: details}
		if f.RetryAfterSeconds > 0 {
			opts.NextRetryDelay = seconds(f.RetryAfterSeconds)
		}
		return nil, temporal.NewApplicationErrorWithOptions(f.Message, f.Type, opts)
	}
	processed := runtime.ProcessResponse(b.def, resp)
	if processed.Text != "" {
		if !streamed { // streamed: its deltas are published
			own.add(runtime.EventTextDelta, processed.Text, attempt)
		}
		own.add(runtime.EventTextComplete, processed.Text, attempt)
	}
	return &ModelOutput{Response: *resp, Attempt: attempt, UsageReported: resp.UsageReported, FailedUsage: failed}, nil
}

// runTrace is the context an activity starts its chat or execute_tool
// span in, with the span's start options: with the run's trace context
// (tc), ctx whose parent is that remote span (the request that submitted
// or resumed the run) and a link to the activity's own span (the SDK
// interceptor's, in the trace of the request that started the workflow);
// without one, ctx and no option (the activity span's child).
func runTrace(ctx context.Context, tc *TraceContext) (context.Context, []trace.SpanStartOption) {
	sc := tc.SpanContext()
	if !sc.IsValid() {
		return ctx, nil
	}
	var opts []trace.SpanStartOption
	if own := trace.SpanContextFromContext(ctx); own.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: own}))
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc), opts
}

// priorFailedUsage is the usage the earlier attempts of this activity
// execution reported before failing (the heartbeat details they left), nil
// when none did.
func priorFailedUsage(ctx context.Context) *model.Usage {
	if !activity.HasHeartbeatDetails(ctx) {
		return nil
	}
	var u model.Usage
	if err := activity.GetHeartbeatDetails(ctx, &u); err != nil {
		return nil
	}
	return &u
}

// addUsage returns sum + u, sum nil counting as zero.
func addUsage(sum *model.Usage, u model.Usage) *model.Usage {
	var total model.Usage
	if sum != nil {
		total = *sum
	}
	total = total.Add(u)
	return &total
}

// Tool runs one attempt of a tool entry (activity ActivityTool) and
// classifies a failure by replay policy (REFERENCE §4.2): a retry is a
// retryable ApplicationError (Temporal retries it), everything else an
// outcome. Its errors and cancellation carry the entry attempt as details
// (lastToolAttempt).
func (a *Activities) Tool(ctx context.Context, in ToolInput) (*ToolOutput, error) {
	a.publish(ctx, in.Events)
	info := activity.GetInfo(ctx)
	e := in.Entry
	e.Attempt = in.Entry.Attempt + int(info.Attempt) - 1
	b, err := a.bind(in.Agent, in.ConfigHash)
	if err != nil {
		return nil, err
	}
	t, ok := b.tools[e.Call.Name]
	if in.MCPTool != nil && in.MCPTool.Name == e.Call.Name && !ok {
		if t, err = a.mcpTool(b, *in.MCPTool); err != nil {
			return nil, err
		}
		ok = true
	}
	if !ok {
		res := model.ToolResult{ToolCallID: e.Call.ID, Content: tool.TextContent("Unknown tool: " + e.Call.Name), IsError: true}
		return a.returned(ctx, in, b, &e, res, nil)
	}
	stop := heartbeat(ctx, a.deps.HeartbeatEvery)
	parent, link := runTrace(ctx, in.Trace)
	spanCtx, span := a.tracing.StartTool(parent, in.SessionID, in.RunID, &e, link...)
	callCtx, cancel := context.WithTimeout(spanCtx, seconds(float64(e.Timeout)))
	out, err := t.Call(callCtx, tool.Invocation{
		SessionID: in.SessionID, RunID: in.RunID, ExecutionKey: e.ExecutionKey, Attempt: e.Attempt, Call: e.Call,
	})
	cancel()
	stop()
	switch {
	case errors.Is(err, tool.ErrClientResult):
		a.tracing.EndTool(span, runtime.ToolOutcomeUncertain, nil, nil)
		return &ToolOutput{Kind: ToolClientResult, Attempt: e.Attempt}, nil
	case err != nil && ctx.Err() != nil:
		a.tracing.EndTool(span, runtime.ToolOutcomeUncertain, nil, runtime.InterruptedCall())
		return nil, interrupted(ctx, e.Attempt)
	case err != nil:
		f := tool.AsFailure(err)
		action := runtime.ToolFailureAction(&e, f)
		if transientResult(out, f, action) {
			res := out.Result
			res.ToolCallID = e.Call.ID
			a.tracing.EndTool(span, runtime.ToolOutcomeReturned, &res, nil)
			return a.returned(ctx, in, b, &e, res, out.Artifacts)
		}
		outcome := runtime.ToolOutcomeFailed
		if action == runtime.FailUncertain {
			outcome = runtime.ToolOutcomeUncertain
		}
		a.tracing.EndTool(span, outcome, nil, &runtime.RunError{Type: f.Type, Message: f.Message})
		switch action {
		case runtime.FailErrorResult:
			res := model.ToolResult{ToolCallID: e.Call.ID, Content: tool.TextContent(runtime.ToolErrorText(f.Message)), IsError: true}
			return a.returned(ctx, in, b, &e, res, nil)
		case runtime.FailUncertain:
			return &ToolOutput{Kind: ToolUncertain, Failure: &runtime.RunError{Type: f.Type, Message: f.Message}, Attempt: e.Attempt}, nil
		case runtime.FailRetry:
			return nil, attemptError(f.Message, f.Type, e.Attempt)
		default:
			return &ToolOutput{Kind: ToolFailed, Failure: &runtime.RunError{Type: f.Type, Message: f.Message}, Attempt: e.Attempt}, nil
		}
	}
	res := out.Result
	res.ToolCallID = e.Call.ID
	if len(res.Content) == 0 {
		res.Content = tool.TextContent("")
	}
	a.tracing.EndTool(span, runtime.ToolOutcomeReturned, &res, nil)
	return a.returned(ctx, in, b, &e, res, out.Artifacts)
}

// interrupted is the error of a tool attempt whose context ended, with the
// attempt as details (lastToolAttempt): a cancellation when the workflow
// cancelled the activity (the SDK reports it as cancelled), else (the
// worker shuts down, the activity is paused or lost its server) a
// retryable failure, never a cancellation: the SDK would report a
// CanceledError it did not ask for wrapped in a failure, which the
// workflow would take for a cancel of the run.
func interrupted(ctx context.Context, attempt int) error {
	if errors.Is(ctx.Err(), context.Canceled) && temporal.IsCanceledError(context.Cause(ctx)) {
		return temporal.NewCanceledError(attempt)
	}
	return attemptError("tool call interrupted: "+context.Cause(ctx).Error(), "ActivityError", attempt)
}

// attemptError is a retryable failure of a tool attempt of type typ, with
// the entry attempt as details (lastToolAttempt).
func attemptError(msg, typ string, attempt int) error {
	return temporal.NewApplicationErrorWithOptions(msg, typ, temporal.ApplicationErrorOptions{Details: []any{attempt}})
}

// storeTimeout bounds the stores of a returned result, which outlive a
// cancellation of the tool activity.
const storeTimeout = 30 * time.Second

// returned is the outcome of a returned result, as the local driver's
// storeArtifacts and spill make it: the files the tool returned are stored
// (their URI lines appended to text content, their references returned for
// extensions.artifacts) and, when the content after result middleware is
// longer than max_result_chars, its full text is stored for the workflow
// to spill. Every stored artifact is owned by the session's owner before
// its reference leaves the activity. A failure to store the files fails
// the attempt (Temporal retries it per the entry's replay policy), as the
// local engine's storeArtifacts fails the call; a failure to store the
// spill returns the raw result with SpillFailed when the workflow asked
// for it (KeepUnspilled), else fails the attempt. Without a store,
// artifacts are dropped (logged) and nothing spills.
func (a *Activities) returned(ctx context.Context, in ToolInput, b *binding, e *runtime.ToolEntry, res model.ToolResult, arts []tool.Artifact) (*ToolOutput, error) {
	out := &ToolOutput{Kind: ToolReturned, Attempt: e.Attempt}
	if a.deps.Artifacts == nil {
		if len(arts) > 0 {
			a.log.Warn("tool artifacts dropped: the worker has no artifact store", "execution_key", e.ExecutionKey, "artifacts", len(arts))
		}
		out.Result = &res
		return out, nil
	}
	// The call returned: its result is stored even when the run is being
	// cancelled meanwhile (the workflow waits for it and keeps it).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if len(arts) > 0 {
		refs := make([]runtime.ArtifactRef, 0, len(arts))
		for _, art := range arts {
			key, err := a.putArtifact(ctx, in.Owner, in.SessionID, art.Data)
			if err != nil {
				return nil, attemptError("store tool artifact: "+err.Error(), "StorageError", e.Attempt)
			}
			refs = append(refs, runtime.ArtifactRef{Key: key, MediaType: art.MediaType, Size: len(art.Data)})
		}
		res.Content = runtime.AttachArtifacts(res.Content, refs)
		out.Artifacts = refs
	}
	processed := runtime.ApplyToContent(b.resultMiddleware(e.Call.Name), res.Content)
	if text, _, ok := runtime.SpillText(processed, b.def.MaxResultChars); ok {
		key, err := a.putArtifact(ctx, in.Owner, in.SessionID, []byte(text))
		switch {
		case err == nil:
			out.Spill = &SpillRef{Key: key, ID: "r_" + a.deps.NewID()}
		case in.KeepUnspilled:
			// The tool ran: its raw result is kept, the workflow stores it.
			a.log.Warn("spill store failed; the workflow spills the result", "execution_key", e.ExecutionKey, "error", err)
			out.SpillFailed = true
		default:
			return nil, attemptError("store spilled result: "+err.Error(), "StorageError", e.Attempt)
		}
	}
	out.Result = &res
	return out, nil
}

// resultMiddleware returns the result middleware of the named tool.
func (b *binding) resultMiddleware(name string) []agent.Middleware {
	for _, td := range b.def.Tools {
		if td.Name == name {
			return td.ResultMiddleware
		}
	}
	return nil
}

// Publish publishes a stopped run's settled events (activity
// ActivityPublish, 3 attempts of 10 s). The workflow never waits on it
// for durable work.
func (a *Activities) Publish(ctx context.Context, in PublishInput) error {
	if len(in.Events) == 0 {
		return nil
	}
	if err := a.deps.Events.Publish(ctx, in.RunID, in.Events); err != nil {
		return fmt.Errorf("publish %d events of run %s: %w", len(in.Events), in.RunID, err)
	}
	return nil
}

// Spill stores the full text of a caller-supplied tool result over
// max_result_chars, owned by the session's owner (activity ActivitySpill),
// and returns its reference; nil when the worker has no artifact store
// (the result is then kept whole, as a tool activity's would be). A store
// failure is a retryable StorageError.
func (a *Activities) Spill(ctx context.Context, in SpillInput) (*SpillRef, error) {
	a.publish(ctx, in.Events)
	if a.deps.Artifacts == nil {
		a.log.Warn("result not spilled: the worker has no artifact store", "execution_key", in.ExecutionKey)
		return nil, nil
	}
	key, err := a.putArtifact(ctx, in.Owner, in.SessionID, []byte(in.Text))
	if err != nil {
		return nil, temporal.NewApplicationError("store spilled result: "+err.Error(), "StorageError")
	}
	return &SpillRef{Key: key, ID: "r_" + a.deps.NewID()}, nil
}
