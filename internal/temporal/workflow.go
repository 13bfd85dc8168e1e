package temporal

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"hxd/internal/agent"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// Patch markers (workflow.GetVersion change IDs). A marker is recorded the
// first time its code path runs; histories recorded before it existed
// replay with the original command sequence.
const (
	// PatchFinalPublish: when a run stops, its pending (settled) events are
	// published by ONE harness_publish_v1 activity. Before it, they stayed
	// pending and reached the sink with the session's next activity.
	PatchFinalPublish = "hxd-final-publish-v1"
	// PatchResolvedSpill: a tool result the caller supplied (resolve) that
	// is over max_result_chars after result middleware is stored by ONE
	// harness_spill_v1 activity and spilled as a tool activity's result
	// is. Before it, such a result was kept whole.
	PatchResolvedSpill = "hxd-resolved-spill-v1"
	// PatchConcurrentTools: a batch whose tools are all concurrent runs
	// its tool activities in parallel (toolsParallel). Before it, every
	// batch ran one call after the other.
	PatchConcurrentTools = "hxd-concurrent-tools-v1"
	// PatchNoCallAfterInterrupt: once a drive is cancelled or past its
	// session deadline, no further call of the batch is started (no
	// tool_call_start, the entry keeps its status), as the local engine's
	// runEntry calls no tool after a cancel. Before it, the next entry was
	// opened and, its activity never running, left started or uncertain.
	PatchNoCallAfterInterrupt = "hxd-no-call-after-interrupt-v1"
	// PatchToolWaitCancel: a tool activity is scheduled with
	// WaitForCancellation, so a cancelled drive waits for its outcome and
	// keeps a result that returned as the cancel came, as the local engine
	// does. Before it, the drive stopped at once: the result was dropped
	// and a manual tool left uncertain.
	PatchToolWaitCancel = "hxd-tool-wait-cancel-v1"
	// PatchRawBeforeSpill: a tool activity whose long result cannot be
	// stored (spilled) still returns the raw result (ToolInput.KeepUnspilled,
	// ToolOutput.SpillFailed); the workflow stores it by ONE
	// harness_spill_v1 activity, as a resolved result's, and a failed spill
	// fails the run resumably with the entry raw_completed. Before it, the
	// store failure failed the tool activity: a safe tool was called again,
	// a manual one left uncertain.
	PatchRawBeforeSpill = "hxd-raw-before-spill-v1"
	// PatchToolAttempts: a tool activity that failed or was cancelled
	// leaves its entry at the last attempt it made (lastToolAttempt), so
	// the attempt numbers of an entry only grow. Before it, the entry kept
	// the activity's first attempt and a resume repeated the later ones.
	PatchToolAttempts = "hxd-tool-attempts-v1"
	// PatchModelFallback: a model call whose transient failures used up the
	// retry policy moves the step to the next model of the agent's
	// fallback chain (fallback.go). Before it, the run failed.
	PatchModelFallback = "hxd-model-fallback-v1"
)

// legacyWorkflow makes the workflow behave as it did before
// PatchFinalPublish existed (no marker, no final publish). Test-only: it
// records the pre-patch history of the replay test.
var legacyWorkflow = false

// legacyResolvedSpill makes the workflow behave as it did before
// PatchResolvedSpill existed (no marker, caller-supplied results kept
// whole). Test-only, as legacyWorkflow.
var legacyResolvedSpill = false

// legacyConcurrentTools makes the workflow run every batch in turn, as it
// did before PatchConcurrentTools existed. Test-only, as legacyWorkflow.
var legacyConcurrentTools = false

// legacyCallAfterInterrupt makes the workflow open the next call of a
// batch after a cancel or the deadline, as it did before
// PatchNoCallAfterInterrupt existed. Test-only, as legacyWorkflow.
var legacyCallAfterInterrupt = false

// legacyToolWaitCancel schedules tool activities without
// WaitForCancellation, as before PatchToolWaitCancel existed. Test-only,
// as legacyWorkflow.
var legacyToolWaitCancel = false

// legacyRawBeforeSpill makes a failed spill store fail the tool activity,
// as before PatchRawBeforeSpill existed. Test-only, as legacyWorkflow.
var legacyRawBeforeSpill = false

// legacyToolAttempts leaves a failed tool activity's entry at its first
// attempt, as before PatchToolAttempts existed. Test-only, as legacyWorkflow.
var legacyToolAttempts = false

const (
	// activityGrace is added to a call's own timeout (REFERENCE §9).
	activityGrace = 10 * time.Second
	// toolHeartbeat is the tool activity heartbeat timeout.
	toolHeartbeat = 20 * time.Second
	// publishTimeout bounds the final publish activity (3 attempts).
	publishTimeout = 10 * time.Second
	// spillTimeout bounds one attempt of the spill activity (5 attempts).
	spillTimeout = 30 * time.Second
	// controlWait bounds how long pause/cancel wait for the run to stop.
	controlWait = 5 * time.Second
)

// Drive interruption causes.
const (
	causeCancelled = "cancelled"
	causeDeadline  = "deadline"
)

var errInterrupted = errors.New("drive interrupted")

// sessionWorkflow is the in-memory state of one workflow execution.
type sessionWorkflow struct {
	s     *SessionInput
	def   *agent.Definition
	specs []model.ToolSpec
	hash  string
	tools map[string]agent.ToolDef
	// validators check tool input schemas in workflow code (pure).
	validators map[string]tool.Tool
	wfRunID    string
	drive      *drive
	publishes  []workflow.Future

	// pinned are the session's MCP tools by name (addPinned), nil when none.
	pinned map[string]*mcp.PinnedTool
	// retired is set by the retire update (retire.go): the workflow then
	// completes.
	retired *RetireResult
}

// drive is one uninterrupted stretch of driving a run.
type drive struct {
	runID    string
	cancel   workflow.CancelFunc
	deadline time.Time // zero: none
	cause    string
}

// SessionWorkflow is the workflow of one session (WorkflowType). It runs
// until the session is continued as new; runs are driven between updates.
func SessionWorkflow(ctx workflow.Context, in SessionInput) error {
	w, err := newSessionWorkflow(ctx, &in)
	if err != nil {
		return err
	}
	if err := w.register(ctx); err != nil {
		return err
	}
	for {
		err := workflow.Await(ctx, func() bool {
			return w.runnable() != nil || workflow.GetInfo(ctx).GetContinueAsNewSuggested() || w.retired != nil
		})
		if err != nil {
			return err
		}
		if w.retired != nil {
			// Retention: no run is unfinished (the retire update checked)
			// and no other update is accepted any more.
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			w.awaitPublishes(ctx)
			return nil
		}
		if rec := w.runnable(); rec != nil {
			w.runDrive(ctx, rec)
			continue
		}
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			return err
		}
		if w.runnable() != nil {
			continue // a handler resumed a run meanwhile
		}
		w.awaitPublishes(ctx)
		return workflow.NewContinueAsNewError(ctx, WorkflowType, *w.s)
	}
}

func newSessionWorkflow(ctx workflow.Context, in *SessionInput) (*sessionWorkflow, error) {
	var def agent.Definition
	if err := json.Unmarshal(in.AgentConfig, &def); err != nil {
		return nil, temporal.NewNonRetryableApplicationError("invalid persisted agent config: "+err.Error(), ErrTypeInvalidRequest, nil)
	}
	if in.Runs == nil {
		in.Runs = map[string]*RunRecord{}
	}
	if in.Requests == nil {
		in.Requests = map[string]RequestRecord{}
	}
	if in.RunOrder == nil {
		in.RunOrder = []string{}
	}
	w := &sessionWorkflow{
		s: in, def: &def, specs: runtime.ToolSpecs(&def), hash: ConfigHash(in.AgentConfig),
		tools: map[string]agent.ToolDef{}, validators: map[string]tool.Tool{},
		wfRunID: workflow.GetInfo(ctx).WorkflowExecution.RunID,
	}
	for _, t := range def.Tools {
		t.Config = t.WithDefaults()
		w.tools[t.Name] = t
	}
	if err := w.addPinned(in.MCPTools); err != nil {
		return nil, err
	}
	return w, nil
}

// latest returns the newest run, nil when none.
func (w *sessionWorkflow) latest() *RunRecord {
	if len(w.s.RunOrder) == 0 {
		return nil
	}
	return w.s.Runs[w.s.RunOrder[len(w.s.RunOrder)-1]]
}

// runnable returns the run the loop should drive now, nil when none.
func (w *sessionWorkflow) runnable() *RunRecord {
	if w.drive != nil || w.s.Active == nil {
		return nil
	}
	rec := w.s.Runs[*w.s.Active]
	if rec == nil || rec.State.Status != runtime.StatusRunning {
		return nil
	}
	return rec
}

func (w *sessionWorkflow) view(rec *RunRecord) runtime.RunResult {
	v := rec.State.View()
	v.CreatedAt, v.UpdatedAt = rec.CreatedAt, rec.UpdatedAt
	return v
}

func (w *sessionWorkflow) touch(ctx workflow.Context, rec *RunRecord) {
	rec.UpdatedAt = workflow.Now(ctx).UTC()
}

// event appends a workflow event; e ties it to a tool entry's attempt.
func (w *sessionWorkflow) event(st *runtime.RunState, typ string, data any, e *runtime.ToolEntry) {
	w.s.EventSeq++
	raw, err := json.Marshal(data)
	if err != nil {
		raw = json.RawMessage(`null`)
	}
	attempt := st.Attempt
	if e != nil {
		attempt = e.Attempt
	}
	w.s.PendingEvents = append(w.s.PendingEvents, runtime.RunEvent{
		Type: typ, Data: raw, SessionID: st.SessionID, RunID: st.RunID, StepID: st.StepID(),
		AttemptID: strconv.Itoa(attempt), EventID: w.wfRunID + ":" + strconv.FormatInt(w.s.EventSeq, 10),
	})
}

// takeEvents hands the pending events to an activity.
func (w *sessionWorkflow) takeEvents() []runtime.RunEvent {
	evs := w.s.PendingEvents
	w.s.PendingEvents = nil
	return evs
}

// settle runs when a run stops: its pending events (the settled ones:
// turn_complete, approval/recovery requests, run_result) are published by
// one publish activity that nobody waits for.
func (w *sessionWorkflow) settle(ctx workflow.Context) {
	if len(w.s.PendingEvents) == 0 {
		return
	}
	if legacyWorkflow || workflow.GetVersion(ctx, PatchFinalPublish, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return // pre-patch: the events ride with the next activity
	}
	evs := w.takeEvents()
	pctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: publishTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3},
	})
	for len(evs) > 0 {
		n := 1
		for n < len(evs) && evs[n].RunID == evs[0].RunID {
			n++
		}
		f := workflow.ExecuteActivity(pctx, ActivityPublish, PublishInput{RunID: evs[0].RunID, Events: evs[:n]})
		w.publishes = append(w.publishes, f)
		evs = evs[n:]
	}
	w.prunePublishes(ctx)
}

func (w *sessionWorkflow) prunePublishes(ctx workflow.Context) {
	kept := w.publishes[:0]
	for _, f := range w.publishes {
		if !f.IsReady() {
			kept = append(kept, f)
			continue
		}
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("publish settled events failed; events are provisional", "error", err)
		}
	}
	w.publishes = kept
}

// awaitPublishes waits for outstanding publishes (their failure is only logged).
func (w *sessionWorkflow) awaitPublishes(ctx workflow.Context) {
	for _, f := range w.publishes {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("publish settled events failed; events are provisional", "error", err)
		}
	}
	w.publishes = nil
}

// sessionLimit is the drive deadline duration, 0 for none.
func (w *sessionWorkflow) sessionLimit() time.Duration {
	s := w.s.RuntimeConfig.MaxSessionDurationSeconds
	if w.def.MaxSessionDurationSeconds > 0 {
		s = w.def.MaxSessionDurationSeconds
	}
	return time.Duration(s * float64(time.Second))
}

// runDrive drives a running run until it stops (or is interrupted).
func (w *sessionWorkflow) runDrive(ctx workflow.Context, rec *RunRecord) {
	st := rec.State
	dctx, cancel := workflow.WithCancel(ctx)
	d := &drive{runID: st.RunID, cancel: cancel}
	if limit := w.sessionLimit(); limit > 0 {
		d.deadline = workflow.Now(ctx).Add(limit)
	}
	w.drive = d
	defer func() {
		cancel()
		w.drive = nil
		w.touch(ctx, rec)
		if st.Status.Finished() && w.s.Active != nil && *w.s.Active == st.RunID {
			w.s.Active = nil
		}
		w.settle(ctx)
	}()
	for st.Status == runtime.StatusRunning {
		if d.cause == "" && !d.deadline.IsZero() && !workflow.Now(ctx).Before(d.deadline) {
			d.cause = causeDeadline
		}
		if d.cause != "" {
			w.interrupted(ctx, st, d.cause)
			return
		}
		cmd := runtime.NextCommand(st)
		if cmd == runtime.CommandResult {
			return
		}
		if cmd == runtime.Command(runtime.PhaseModel) || cmd == runtime.Command(runtime.PhaseTools) {
			switch w.s.Control {
			case ActionPaused:
				_ = runtime.SetStatus(st, runtime.EvPause)
				w.event(st, runtime.EventRunResult, st.ResultData(), nil)
				return
			case ActionCancelled:
				runtime.CancelState(st, "cancelled", nil)
				w.event(st, runtime.EventRunResult, st.ResultData(), nil)
				return
			}
		}
		err := w.step(dctx, d, st)
		w.touch(ctx, rec)
		if err == nil {
			continue
		}
		if errors.Is(err, errInterrupted) {
			if d.cause == "" {
				d.cause = causeCancelled
			}
			w.interrupted(ctx, st, d.cause)
			return
		}
		var f *runtime.StepFailure
		if !errors.As(err, &f) {
			f = &runtime.StepFailure{Type: "RuntimeError", Message: err.Error()}
		}
		w.failRun(st, f.Type, f.Message)
		return
	}
}

func (w *sessionWorkflow) step(ctx workflow.Context, d *drive, st *runtime.RunState) error {
	switch st.Phase {
	case runtime.PhaseStart:
		return runtime.StartRun(st)
	case runtime.PhasePrepareModel:
		if rec := w.s.Runs[st.RunID]; rec != nil && st.Iterations < w.def.MaxIterations {
			archiveStep(rec)
		}
		return runtime.PrepareModel(st, w.def.MaxIterations)
	case runtime.PhaseModel:
		return w.modelStep(ctx, d, st)
	case runtime.PhasePrepareTools:
		return runtime.PrepareTools(st, w.lookupTool)
	case runtime.PhaseTools:
		return w.toolsStep(ctx, d, st)
	case runtime.PhaseFinish:
		out := runtime.FinishRun(st)
		w.event(st, runtime.EventTurnComplete, out, nil)
		w.event(st, runtime.EventRunResult, st.ResultData(), nil)
		return nil
	}
	return &runtime.StepFailure{Type: "RuntimeError", Message: fmt.Sprintf("unknown phase %q", st.Phase)}
}

func (w *sessionWorkflow) lookupTool(name string) (tool.Config, bool) {
	t, ok := w.tools[name]
	return t.Config, ok
}

// remaining returns the time left before the drive deadline (ok=false
// when it passed); max when there is none.
func (w *sessionWorkflow) capTimeout(ctx workflow.Context, d *drive, t time.Duration) (time.Duration, bool) {
	if d.deadline.IsZero() {
		return t, true
	}
	left := d.deadline.Sub(workflow.Now(ctx))
	if left <= 0 {
		return 0, false
	}
	return min(t, left), true
}

// untilDeadline bounds opts, a model or tool call's, by the session
// deadline as a whole, retries included (ScheduleToCloseTimeout): a
// per-attempt cap alone lets Temporal start attempts after the deadline.
// Replay matches activities by id and type only, so this needs no patch.
func (w *sessionWorkflow) untilDeadline(ctx workflow.Context, d *drive, opts workflow.ActivityOptions) workflow.ActivityOptions {
	if !d.deadline.IsZero() {
		if left := d.deadline.Sub(workflow.Now(ctx)); left > 0 {
			opts.ScheduleToCloseTimeout = left
		}
	}
	return opts
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// modelStep makes one model call in an activity (retried by Temporal per
// the agent's retry policy) and applies the response.
// callOptions are the activity options of a model or tool call: the
// timeout, a heartbeat, and the retry policy's backoff and attempts; a
// definition mismatch is never retried.
func callOptions(timeout time.Duration, backoff, maxBackoff float64, attempts int) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    toolHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        max(seconds(backoff), time.Millisecond),
			BackoffCoefficient:     2,
			MaximumInterval:        max(seconds(maxBackoff), seconds(backoff), time.Millisecond),
			MaximumAttempts:        int32(attempts),
			NonRetryableErrorTypes: []string{ErrTypeAgentMismatch},
		},
	}
}

func (w *sessionWorkflow) modelStep(ctx workflow.Context, d *drive, st *runtime.RunState) error {
	if st.Attempt != 0 {
		st.UsageIncomplete = true
		w.event(st, runtime.EventAttemptReset, map[string]any{"attempt": st.Attempt}, nil)
		runtime.ResetModelSpan(st, workflow.Now(ctx))
	}
	st.Attempt++
	base := st.Attempt
	runtime.BeginAttemptUsage(st)
	runtime.BeginModelSpan(w.def, st, workflow.Now(ctx))
	timeout, ok := w.capTimeout(ctx, d, seconds(runtime.ChainModel(w.def, st.ModelIndex).TimeoutSeconds)+activityGrace)
	if !ok {
		d.cause = causeDeadline
		return errInterrupted
	}
	retry := agent.DefaultRetry
	if w.def.Retry != nil {
		retry = *w.def.Retry
	}
	attempts := max(1, retry.Attempts-(base-1-st.ModelBase))
	opts := w.untilDeadline(ctx, d, callOptions(timeout, retry.BackoffSeconds, retry.MaxBackoffSeconds, attempts))
	req := runtime.BuildModelRequest(w.def, w.specs, st)
	in := ModelInput{
		Agent: w.s.Agent, ConfigHash: w.hash, SessionID: st.SessionID, RunID: st.RunID,
		Step: st.Iterations, Attempt: base, Request: *req, Events: w.takeEvents(), Stream: st.Stream,
		ModelIndex: st.ModelIndex, Trace: w.traceOf(st),
	}
	var out ModelOutput
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), ActivityModel, in).Get(ctx, &out)
	if err != nil {
		if ierr := w.interruption(ctx, d, err); ierr != nil {
			runtime.EndModelSpan(st, workflow.Now(ctx), runtime.SpanCancelled, nil)
			return ierr
		}
		f := activityFailure(err, "model")
		defer runtime.EndModelSpan(st, workflow.Now(ctx), runtime.SpanFailed, &runtime.RunError{Type: f.Type, Message: f.Message})
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.HasDetails() {
			var attempt int
			if app.Details(&attempt) == nil && attempt > base {
				st.Attempt = attempt
				st.UsageIncomplete = true
				runtime.SetModelSpanNumber(st, attempt)
			}
			if u := failedUsageOf(app); u != nil {
				runtime.AccountAttemptUsage(st, *u, true)
			}
		}
		if w.fallBack(ctx, err, st) {
			return nil
		}
		return f
	}
	st.Attempt = max(out.Attempt, base)
	if st.Attempt > base {
		st.UsageIncomplete = true
	}
	runtime.SetModelSpanNumber(st, st.Attempt)
	runtime.EndModelSpan(st, workflow.Now(ctx), runtime.SpanSucceeded, nil)
	processed := runtime.ProcessResponse(w.def, &out.Response)
	st.Response = &processed
	// As the local driver: usage_base + this attempt's usage (plus what
	// the failed attempts before it reported), and usage_incomplete when
	// the provider reported none. State only, no command, so histories
	// replay unchanged without a patch.
	usage := out.Response.Usage
	if out.FailedUsage != nil {
		usage = usage.Add(*out.FailedUsage)
	}
	runtime.AccountAttemptUsage(st, usage, out.UsageReported)
	if len(processed.ToolCalls) > 0 {
		return runtime.Advance(st, runtime.OutToolCalls)
	}
	return runtime.Advance(st, runtime.OutFinal)
}

// failedUsageOf is the usage the failed attempts of a model activity
// reported (its error's second detail, after the attempt), nil when none
// did or the error predates it.
func failedUsageOf(app *temporal.ApplicationError) *model.Usage {
	var (
		attempt int
		u       *model.Usage
	)
	if app.Details(&attempt, &u) != nil {
		return nil
	}
	return u
}

// interruption returns errInterrupted when err is the drive's
// cancellation or the deadline passing, else nil.
func (w *sessionWorkflow) interruption(ctx workflow.Context, d *drive, err error) error {
	if d.cause != "" || temporal.IsCanceledError(err) {
		return errInterrupted
	}
	if !d.deadline.IsZero() && !workflow.Now(ctx).Before(d.deadline) {
		d.cause = causeDeadline
		return errInterrupted
	}
	return nil
}

// activityFailure turns an activity error into the run's failure.
func activityFailure(err error, what string) *runtime.StepFailure {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		if app.Type() == ErrTypeAgentMismatch {
			return &runtime.StepFailure{Type: "ValueError", Message: app.Message()}
		}
		typ := app.Type()
		if typ == "" {
			typ = "Error"
		}
		return &runtime.StepFailure{Type: typ, Message: app.Message()}
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) {
		return &runtime.StepFailure{Type: "TimeoutError", Message: what + " activity timed out (" + te.TimeoutType().String() + ")"}
	}
	return &runtime.StepFailure{Type: "ActivityError", Message: what + " activity failed: " + err.Error()}
}

// toolsStep runs every entry that can run, then stops for decisions or
// collects the results (REFERENCE §4.2, §9). A batch whose tools are all
// concurrent runs in parallel (toolsParallel) in histories recorded since
// PatchConcurrentTools; any other batch runs one entry after the other.
func (w *sessionWorkflow) toolsStep(ctx workflow.Context, d *drive, st *runtime.RunState) error {
	if runtime.ConcurrentBatch(st.Tools) && !legacyConcurrentTools &&
		workflow.GetVersion(ctx, PatchConcurrentTools, workflow.DefaultVersion, 1) != workflow.DefaultVersion {
		return w.toolsParallel(ctx, d, st)
	}
	var lost *runtime.StepFailure
	for i := range st.Tools {
		e := &st.Tools[i]
		// spill is the stored full text of the result the tool activity
		// just returned, when it is over max_result_chars; returned says
		// the tool activity settled the spill (else the caller supplied
		// the result through resolve, or its store failed in the tool
		// activity, and spillResolved stores it).
		var spill *SpillRef
		returned := false
		for e.Status == runtime.ToolPrepared || e.Status == runtime.ToolStarted || e.Status == runtime.ToolRawCompleted {
			if e.Status == runtime.ToolRawCompleted {
				if err := w.processReturned(ctx, d, st, e, spill, returned); err != nil {
					return err
				}
				continue
			}
			if w.stopped(ctx, d) {
				return errInterrupted
			}
			call, err := w.startCall(ctx, st, e)
			if err != nil {
				return err
			}
			if !call {
				continue // answered, or waiting for an approval
			}
			out, err := w.toolActivity(ctx, d, st, e)
			o, err := w.callOutcome(ctx, d, st, e, out, err)
			if err != nil {
				return err
			}
			if o.lost != nil {
				lost = o.lost
				break
			}
			spill, returned = o.spill, o.returned
		}
	}
	return w.toolsDone(st, lost)
}

// toolsParallel runs an all-concurrent batch in parallel: results the
// caller supplied are processed first, then every call is started (tool
// activities scheduled together) and each outcome is taken as its activity
// completes, its result processed at once. Every call finishes before the
// first failure, in entry order, is returned.
func (w *sessionWorkflow) toolsParallel(ctx workflow.Context, d *drive, st *runtime.RunState) error {
	for i := range st.Tools {
		if e := &st.Tools[i]; e.Status == runtime.ToolRawCompleted {
			if err := w.processReturned(ctx, d, st, e, nil, false); err != nil {
				return err
			}
		}
	}
	sel := workflow.NewSelector(ctx)
	errs := make([]error, len(st.Tools))
	lost := make([]*runtime.StepFailure, len(st.Tools))
	calls := 0
	for i := range st.Tools {
		e := &st.Tools[i]
		if e.Status != runtime.ToolPrepared && e.Status != runtime.ToolStarted {
			continue
		}
		if w.stopped(ctx, d) {
			return errInterrupted
		}
		call, err := w.startCall(ctx, st, e)
		if err != nil {
			return err
		}
		if !call {
			continue
		}
		fut, err := w.startToolActivity(ctx, d, st, e)
		if err != nil {
			errs[i] = err
			continue
		}
		calls++
		sel.AddFuture(fut, func(f workflow.Future) {
			var out ToolOutput
			err := f.Get(ctx, &out)
			o, err := w.callOutcome(ctx, d, st, e, &out, err)
			if err == nil && e.Status == runtime.ToolRawCompleted {
				err = w.processReturned(ctx, d, st, e, o.spill, o.returned)
			}
			errs[i], lost[i] = err, o.lost
		})
	}
	for range calls {
		sel.Select(ctx)
	}
	var first *runtime.StepFailure
	for i := range st.Tools {
		if errs[i] != nil {
			return errs[i]
		}
		if first == nil {
			first = lost[i]
		}
	}
	return w.toolsDone(st, first)
}

// toolsDone ends a tools step: the run waits for decisions, fails with
// lost (a call whose activity failed), or goes on with the results.
func (w *sessionWorkflow) toolsDone(st *runtime.RunState, lost *runtime.StepFailure) error {
	if len(st.PendingTools()) > 0 {
		if err := runtime.SetStatus(st, runtime.EvAwait); err != nil {
			return err
		}
		w.event(st, runtime.EventRunResult, st.ResultData(), nil)
		return nil
	}
	for i := range st.Tools {
		if st.Tools[i].Status != runtime.ToolCompleted {
			if lost == nil {
				lost = &runtime.StepFailure{Type: "RuntimeError", Message: "tool entry " + st.Tools[i].ExecutionKey + " did not complete"}
			}
			return lost
		}
	}
	return runtime.CollectResults(st)
}

// processReturned processes a raw-completed entry: spill is what the tool
// activity stored when returned says it settled the spill; any other raw
// result (the caller supplied it, the tool activity could not store it, or
// a resume finds it) is spilled by spillResolved first.
func (w *sessionWorkflow) processReturned(ctx workflow.Context, d *drive, st *runtime.RunState, e *runtime.ToolEntry, spill *SpillRef, returned bool) error {
	if !returned {
		s, err := w.spillResolved(ctx, d, st, e)
		if err != nil {
			return err
		}
		spill = s
	}
	return w.processTool(ctx, st, e, spill)
}

// stopped reports, before an entry is gated and started, whether the drive
// was cancelled or ran past its session deadline (then recorded as its
// cause): from then on no call is started, as in the local engine, whose
// runEntry checks the context before calling an entry. Results already
// returned are still processed. Histories recorded before
// PatchNoCallAfterInterrupt go on opening the entry.
func (w *sessionWorkflow) stopped(ctx workflow.Context, d *drive) bool {
	past := !d.deadline.IsZero() && !workflow.Now(ctx).Before(d.deadline)
	if d.cause == "" && ctx.Err() == nil && !past {
		return false
	}
	if legacyCallAfterInterrupt || workflow.GetVersion(ctx, PatchNoCallAfterInterrupt, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false
	}
	if d.cause == "" && past {
		d.cause = causeDeadline
	}
	return true
}

// startCall gates and validates an entry and, when it may run, opens its
// next attempt (tool_call_start). It reports whether the entry is to be
// called: false when it was answered (unknown tool, denied, invalid
// input) or waits for an approval.
func (w *sessionWorkflow) startCall(ctx workflow.Context, st *runtime.RunState, e *runtime.ToolEntry) (bool, error) {
	td, ok := w.tools[e.Call.Name]
	if !ok {
		return false, w.answer(st, e, "Unknown tool: "+e.Call.Name)
	}
	switch runtime.GateTool(td.Config, e) {
	case runtime.GateDeny:
		return false, w.answer(st, e, "Permission denied")
	case runtime.GateAsk:
		if err := runtime.SetToolStatus(e, runtime.TevNeedApproval); err != nil {
			return false, err
		}
		runtime.RequestApproval(e, workflow.Now(ctx))
		w.event(st, runtime.EventApprovalRequired, map[string]any{"execution_key": e.ExecutionKey, "call": e.Call}, e)
		return false, nil
	}
	if e.Status == runtime.ToolPrepared {
		if err := w.validateInput(td.Config, e.Call.Input); err != nil {
			return false, w.answer(st, e, "Invalid tool input: "+err.Error())
		}
	}
	if err := runtime.SetToolStatus(e, runtime.TevStart); err != nil {
		return false, err
	}
	e.Attempt++
	runtime.BeginToolSpan(e, workflow.Now(ctx))
	w.event(st, runtime.EventToolCallStart, e.Call, e)
	return true, nil
}

// callResult is what a tool activity's outcome left for the step: the
// stored text of a long result (spill) and whether the activity settled
// the spill (returned: it stored it or found the result short; else
// spillResolved stores it), or the failure of an activity that did not
// complete (lost).
type callResult struct {
	spill    *SpillRef
	returned bool
	lost     *runtime.StepFailure
}

// callOutcome takes in a tool activity's outcome (out, or its error).
func (w *sessionWorkflow) callOutcome(ctx workflow.Context, d *drive, st *runtime.RunState, e *runtime.ToolEntry, out *ToolOutput, err error) (callResult, error) {
	if err != nil {
		if !legacyToolAttempts && workflow.GetVersion(ctx, PatchToolAttempts, workflow.DefaultVersion, 1) != workflow.DefaultVersion {
			e.Attempt = max(e.Attempt, lastToolAttempt(err, e.Attempt, toolActivityAttempts(e)))
		}
		runtime.SetToolSpanNumber(e, e.Attempt)
		if ierr := w.interruption(ctx, d, err); ierr != nil {
			return callResult{}, ierr
		}
		f := activityFailure(err, "tool")
		span := runtime.SpanFailed
		if e.Policy == tool.PolicyManual {
			span = runtime.SpanUncertain
		}
		runtime.EndToolSpan(e, workflow.Now(ctx), span, &runtime.RunError{Type: f.Type, Message: f.Message})
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == ErrTypeAgentMismatch {
			return callResult{}, f
		}
		// The activity failed (lost worker, timeout, retries used up):
		// a manual tool's outcome is unknown; others stay started and
		// are executed again by a resume.
		if e.Policy == tool.PolicyManual {
			if err := runtime.SetToolStatus(e, runtime.TevUnknown); err != nil {
				return callResult{}, err
			}
			w.event(st, runtime.EventRecoveryRequired, map[string]any{"execution_key": e.ExecutionKey, "call": e.Call}, e)
		}
		return callResult{lost: f}, nil
	}
	e.Attempt = max(out.Attempt, e.Attempt)
	runtime.SetToolSpanNumber(e, e.Attempt)
	now := workflow.Now(ctx)
	switch out.Kind {
	case ToolReturned:
		runtime.EndToolSpan(e, now, runtime.SpanSucceeded, nil)
	case ToolClientResult, ToolUncertain:
		runtime.EndToolSpan(e, now, runtime.SpanUncertain, nil)
	case ToolFailed:
		if out.Failure != nil {
			runtime.EndToolSpan(e, now, runtime.SpanFailed, &runtime.RunError{Type: out.Failure.Type, Message: out.Failure.Message})
		}
		runtime.EndToolSpan(e, now, runtime.SpanFailed, nil)
	}
	switch out.Kind {
	case ToolReturned:
		if err := runtime.SetToolStatus(e, runtime.TevReturn); err != nil {
			return callResult{}, err
		}
		e.RawResult = out.Result
		if len(out.Artifacts) > 0 {
			runtime.RecordArtifacts(st, e.ExecutionKey, out.Artifacts)
		}
		// A result whose spill the activity could not store is spilled
		// as a resolved one is (spillResolved, PatchRawBeforeSpill).
		return callResult{spill: out.Spill, returned: !out.SpillFailed}, nil
	case ToolClientResult:
		if err := runtime.SetToolStatus(e, runtime.TevUnknown); err != nil {
			return callResult{}, err
		}
		w.event(st, runtime.EventRecoveryRequired, map[string]any{"execution_key": e.ExecutionKey, "call": e.Call, "reason": "client_result"}, e)
	case ToolUncertain:
		if err := runtime.SetToolStatus(e, runtime.TevUnknown); err != nil {
			return callResult{}, err
		}
		w.event(st, runtime.EventRecoveryRequired, map[string]any{"execution_key": e.ExecutionKey, "call": e.Call}, e)
	case ToolFailed:
		typ, msg := "ToolError", "tool call failed"
		if out.Failure != nil {
			typ, msg = out.Failure.Type, out.Failure.Message
		}
		return callResult{}, &runtime.StepFailure{Type: typ, Message: msg}
	default:
		return callResult{}, &runtime.StepFailure{Type: "RuntimeError", Message: fmt.Sprintf("unknown tool outcome %q", out.Kind)}
	}
	return callResult{}, nil
}

func (w *sessionWorkflow) toolActivity(ctx workflow.Context, d *drive, st *runtime.RunState, e *runtime.ToolEntry) (*ToolOutput, error) {
	fut, err := w.startToolActivity(ctx, d, st, e)
	if err != nil {
		return nil, err
	}
	var out ToolOutput
	if err := fut.Get(ctx, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// startToolActivity schedules the tool activity of a started entry; the
// pending events ride with it. Since PatchToolWaitCancel a cancelled drive
// waits for the activity (WaitForCancellation): its future then holds the
// result the call still returned, or the cancellation.
func (w *sessionWorkflow) startToolActivity(ctx workflow.Context, d *drive, st *runtime.RunState, e *runtime.ToolEntry) (workflow.Future, error) {
	timeout, ok := w.capTimeout(ctx, d, seconds(float64(e.Timeout))+activityGrace)
	if !ok {
		d.cause = causeDeadline
		return nil, errInterrupted
	}
	retry := tool.DefaultRetry
	if e.Retry != nil {
		retry = *e.Retry
	}
	opts := w.untilDeadline(ctx, d, callOptions(timeout, retry.BackoffSeconds, retry.MaxBackoffSeconds, toolActivityAttempts(e)))
	// A cancel waits for the activity's outcome: the call learns of it by
	// its heartbeat, and a result it still returns is kept.
	opts.WaitForCancellation = !legacyToolWaitCancel &&
		workflow.GetVersion(ctx, PatchToolWaitCancel, workflow.DefaultVersion, 1) != workflow.DefaultVersion
	in := ToolInput{
		Agent: w.s.Agent, ConfigHash: w.hash, SessionID: st.SessionID, RunID: st.RunID,
		Step: st.Iterations, Entry: *e, Events: w.takeEvents(), Owner: w.s.Owner,
		KeepUnspilled: !legacyRawBeforeSpill &&
			workflow.GetVersion(ctx, PatchRawBeforeSpill, workflow.DefaultVersion, 1) != workflow.DefaultVersion,
		MCPTool: w.pinned[e.Call.Name], Trace: w.traceOf(st),
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), ActivityTool, in), nil
}

// traceOf is the trace context of the run of st (RunRecord.Trace), nil
// when none.
func (w *sessionWorkflow) traceOf(st *runtime.RunState) *TraceContext {
	if rec := w.s.Runs[st.RunID]; rec != nil {
		return rec.Trace
	}
	return nil
}

// toolActivityAttempts is how many attempts the tool activity of a started
// entry may make: one for a manual tool, else what its retry policy leaves
// from the entry's attempt on.
func toolActivityAttempts(e *runtime.ToolEntry) int {
	if e.Policy == tool.PolicyManual {
		return 1
	}
	retry := tool.DefaultRetry
	if e.Retry != nil {
		retry = *e.Retry
	}
	return max(1, retry.Attempts-(e.Attempt-1))
}

// lastToolAttempt is the entry attempt of the last attempt a failed tool
// activity made, first attempt base, at most attempts attempts: the one
// its last attempt's error names (the tool activity's failures and
// cancellations carry it as details), else, for a cancellation, base (the
// run ends with it), else the last the activity may have made (a lost
// worker times out on every attempt), so that no later call repeats a
// number. Only the activity error's own cause is the last attempt's: a
// timeout carries the failure of the attempt before it as its cause
// (the server's RetryLastFailure), whose details name that attempt.
func lastToolAttempt(err error, base, attempts int) int {
	var act *temporal.ActivityError
	if errors.As(err, &act) {
		err = errors.Unwrap(act)
	}
	var n int
	switch err := err.(type) { //nolint:errorlint // the activity error's own cause only: errors.As would reach, under a timeout, the attempt before
	case *temporal.ApplicationError:
		if err.HasDetails() && err.Details(&n) == nil {
			return n
		}
	case *temporal.CanceledError:
		if err.HasDetails() && err.Details(&n) == nil {
			return n
		}
		return base
	}
	return base + attempts - 1
}

// validateInput checks a call input against the tool's schema, in
// workflow code: a client-kind tool of the same schema validates exactly
// as the real tool does, without needing the worker's builtins.
func (w *sessionWorkflow) validateInput(cfg tool.Config, input json.RawMessage) error {
	v, ok := w.validators[cfg.Name]
	if !ok {
		vc := tool.Config{Name: cfg.Name, Kind: tool.KindClient, InputSchema: cfg.InputSchema}
		t, err := tool.New(vc, tool.Options{})
		if err != nil {
			return nil // the worker validated the definition at registration
		}
		w.validators[cfg.Name], v = t, t
	}
	return v.ValidateInput(input)
}

func (w *sessionWorkflow) answer(st *runtime.RunState, e *runtime.ToolEntry, text string) error {
	res, err := runtime.AnswerTool(e, text)
	if err != nil {
		return err
	}
	w.event(st, runtime.EventToolResult, runtime.PublicToolResult(res), e)
	return nil
}

// spillResolved stores the processed text of a raw result the caller
// supplied (resolve), or one whose store failed in the tool activity
// (PatchRawBeforeSpill), when it is over max_result_chars, through one spill
// activity, and returns its reference for processTool; nil when it is
// short, the worker has no artifact store, or the history predates
// PatchResolvedSpill. The entry stays raw-completed until processTool, so
// a failed spill fails the run resumably and a resume tries again.
func (w *sessionWorkflow) spillResolved(ctx workflow.Context, d *drive, st *runtime.RunState, e *runtime.ToolEntry) (*SpillRef, error) {
	content := runtime.ApplyToContent(w.tools[e.Call.Name].ResultMiddleware, e.RawResult.Content)
	text, _, ok := runtime.SpillText(content, w.def.MaxResultChars)
	if !ok {
		return nil, nil
	}
	if legacyResolvedSpill || workflow.GetVersion(ctx, PatchResolvedSpill, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil, nil // pre-patch: kept whole
	}
	timeout, ok := w.capTimeout(ctx, d, spillTimeout)
	if !ok {
		d.cause = causeDeadline
		return nil, errInterrupted
	}
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: 5},
	}
	in := SpillInput{
		SessionID: st.SessionID, RunID: st.RunID, ExecutionKey: e.ExecutionKey, Owner: w.s.Owner,
		Text: text, Events: w.takeEvents(),
	}
	var out *SpillRef
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), ActivitySpill, in).Get(ctx, &out); err != nil {
		if ierr := w.interruption(ctx, d, err); ierr != nil {
			return nil, ierr
		}
		return nil, activityFailure(err, "spill")
	}
	return out, nil
}

// processTool applies result middleware to the raw result and, when the
// tool activity stored the result's full text (spill), replaces a result
// over max_result_chars by its preview and records it in
// extensions.result_spill, as the local driver's spill does (pure: the
// bytes are stored by the activity; a spill whose key is not the SHA-256
// of this result's text is ignored, so no reference ever names bytes that
// were not stored). A result with no spill (short, a worker without an
// artifact store, or resolved by the caller before PatchResolvedSpill) is
// kept whole; a long result the caller resolved is stored by spillResolved.
func (w *sessionWorkflow) processTool(ctx workflow.Context, st *runtime.RunState, e *runtime.ToolEntry, spill *SpillRef) error {
	if err := runtime.SetToolStatus(e, runtime.TevProcess); err != nil {
		return err
	}
	res := *e.RawResult
	res.Content = runtime.ApplyToContent(w.tools[e.Call.Name].ResultMiddleware, res.Content)
	if spill != nil {
		if text, format, ok := runtime.SpillText(res.Content, w.def.MaxResultChars); ok && sha256Hex(text) == spill.Key {
			res.Content = runtime.SpillResult(st, e, text, format, spill.Key, spill.ID, w.def.MaxResultChars)
		} else {
			workflow.GetLogger(ctx).Warn("spilled result does not match the processed result; kept whole", "execution_key", e.ExecutionKey)
		}
	}
	e.Result = &res
	w.event(st, runtime.EventToolCallComplete, e.Call, e)
	w.event(st, runtime.EventToolResult, runtime.PublicToolResult(res), e)
	return nil
}

// failRun ends the run as failed (resumable).
func (w *sessionWorkflow) failRun(st *runtime.RunState, typ, msg string) {
	if err := runtime.SetStatus(st, runtime.EvFail); err != nil {
		return
	}
	st.Error = &runtime.RunError{Type: typ, Message: msg}
	w.event(st, runtime.EventError, msg, nil)
	w.event(st, runtime.EventRunResult, st.ResultData(), nil)
}

// interrupted ends a drive that was cancelled or ran out of time: manual
// tools in flight become uncertain, the run ends cancelled.
func (w *sessionWorkflow) interrupted(ctx workflow.Context, st *runtime.RunState, cause string) {
	now := workflow.Now(ctx)
	runtime.EndModelSpan(st, now, runtime.SpanCancelled, nil)
	for i := range st.Tools {
		e := &st.Tools[i]
		if e.Status == runtime.ToolStarted && e.Policy == tool.PolicyManual {
			_ = runtime.SetToolStatus(e, runtime.TevUnknown)
			runtime.EndToolSpan(e, now, runtime.SpanUncertain, nil)
		}
		runtime.EndToolSpan(e, now, runtime.SpanCancelled, nil)
	}
	if cause == causeDeadline {
		runtime.CancelState(st, "timeout", &runtime.RunError{Type: "TimeoutError", Message: "Session duration limit exceeded"})
	} else {
		runtime.CancelState(st, "cancelled", nil)
	}
	w.event(st, runtime.EventRunResult, st.ResultData(), nil)
}

// resume makes the latest unfinished run running again (Runtime.Resume):
// control cleared, status resumed, lost manual outcomes become uncertain.
// The run goes on in the trace of the resuming request (tc, nil without
// tracing).
func (w *sessionWorkflow) resume(ctx workflow.Context, rec *RunRecord, tc *TraceContext) error {
	st := rec.State
	w.s.Control = ""
	prev := st.Status
	if err := runtime.SetStatus(st, runtime.EvResume); err != nil {
		return newAppError(runtime.ErrNotAwaitingResolution, err.Error())
	}
	runtime.NoteResumed(st, workflow.Now(ctx), prev)
	st.Error, st.StopReason = nil, nil
	for i := range st.Tools {
		e := &st.Tools[i]
		if runtime.ResumeTable(e.Status, e.Policy) == runtime.ResumeUncertain {
			e.Status = runtime.ToolUncertain
			w.event(st, runtime.EventRecoveryRequired, map[string]any{"execution_key": e.ExecutionKey, "call": e.Call}, e)
		}
	}
	id := st.RunID
	w.s.Active = &id
	rec.Trace = tc.bounded()
	w.touch(ctx, rec)
	return nil
}
