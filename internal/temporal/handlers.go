package temporal

import (
	"errors"
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"hxd/internal/model"
	"hxd/internal/runtime"
)

// register installs the update and query handlers.
func (w *sessionWorkflow) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryGetRun, w.queryRun); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryGetSession, w.querySession); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryGetPending, w.queryPending); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryGetTimeline, w.queryTimeline); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSubmit, w.submit,
		workflow.UpdateHandlerOptions{Validator: w.validateSubmit}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateControl, w.control,
		workflow.UpdateHandlerOptions{Validator: w.validateControl}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateResolve, w.resolve,
		workflow.UpdateHandlerOptions{Validator: w.validateResolve}); err != nil {
		return err
	}
	return w.registerRetire(ctx)
}

func (w *sessionWorkflow) queryRun(runID string) (runtime.RunResult, error) {
	rec, ok := w.s.Runs[runID]
	if !ok || w.retired != nil {
		return runtime.RunResult{}, newAppError(runtime.ErrNotFound, "run not found")
	}
	return w.view(rec), nil
}

// queryTimeline returns what a run's timeline is built from, its events
// aside (the engine reads them): the model attempts of its earlier steps
// (RunRecord.Steps) and of the current one, the tool entries of its
// earlier steps and of the current one, its resumptions.
func (w *sessionWorkflow) queryTimeline(runID string) (runtime.TimelineSource, error) {
	rec, ok := w.s.Runs[runID]
	if !ok || w.retired != nil {
		return runtime.TimelineSource{}, newAppError(runtime.ErrNotFound, "run not found")
	}
	st := rec.State
	src := runtime.TimelineSource{
		RunID: st.RunID, SessionID: st.SessionID, Status: st.Status, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt,
		Steps: slices.Clone(rec.Steps), Tools: slices.Clone(rec.Tools), Resumptions: st.Resumptions,
	}
	if len(st.ModelAttempts) > 0 {
		src.Steps = append(src.Steps, runtime.StepSpans{StepID: st.StepID(), Attempts: st.ModelAttempts})
	}
	for _, e := range st.Tools {
		src.Tools = append(src.Tools, timelineEntry(e))
	}
	return src, nil
}

// timelineEntry is e without what a timeline does not show (its input
// and results), as RunRecord.Tools keeps it.
func timelineEntry(e runtime.ToolEntry) runtime.ToolEntry {
	e.Call.Input, e.RawResult, e.Result, e.Retry = nil, nil, nil, nil
	return e
}

// archiveStep keeps, in rec, the model attempts and tool entries of the
// step that PrepareModel is about to replace (the run timeline).
func archiveStep(rec *RunRecord) {
	st := rec.State
	if len(st.ModelAttempts) > 0 {
		rec.Steps = append(rec.Steps, runtime.StepSpans{StepID: st.StepID(), Attempts: st.ModelAttempts})
	}
	for _, e := range st.Tools {
		rec.Tools = append(rec.Tools, timelineEntry(e))
	}
}

func (w *sessionWorkflow) querySession() (SessionInfo, error) {
	if w.retired != nil {
		return SessionInfo{}, errRetired()
	}
	info := SessionInfo{
		SessionID: w.s.SessionID, Agent: w.s.Agent, Owner: w.s.Owner, Metadata: w.s.Metadata,
		CreatedAt: w.s.CreatedAt, Recording: w.s.Recording, Busy: w.s.Active != nil,
		Status: StatusIdle, Runs: slices.Clone(w.s.RunOrder), MCPTools: w.s.MCPTools,
	}
	if w.s.Active != nil {
		id := *w.s.Active
		info.Active = &id
		if rec, ok := w.s.Runs[id]; ok {
			info.Status = string(rec.State.Status)
		}
	}
	if rec := w.latest(); rec != nil {
		info.LatestRun = &runtime.RunRef{RunID: rec.State.RunID, Status: rec.State.Status}
		info.LatestUpdatedAt = rec.UpdatedAt
	}
	return info, nil
}

func (w *sessionWorkflow) queryPending() ([]runtime.PendingTool, error) {
	if w.retired != nil {
		return nil, errRetired()
	}
	rec := w.latest()
	if rec == nil {
		return []runtime.PendingTool{}, nil
	}
	return rec.State.PendingTools(), nil
}

// checkSubmit returns the run a request already started (nil when new)
// or the rejection.
func (w *sessionWorkflow) checkSubmit(req SubmitRequest) (*RunRecord, error) {
	if w.retired != nil {
		return nil, errRetired()
	}
	if req.RequestID == "" || req.RunID == "" {
		return nil, newAppError(nil, "submit needs a request_id and a run_id")
	}
	if _, err := runtime.UserMessage(req.Message); err != nil {
		return nil, newAppError(runtime.ErrInvalidMessage, err.Error())
	}
	digest := runtime.MessageDigest(req.Message)
	if r, ok := w.s.Requests[req.RequestID]; ok {
		if r.Digest != digest {
			return nil, newAppError(runtime.ErrRequestConflict, "Request ID already used with different input")
		}
		return w.s.Runs[r.RunID], nil
	}
	if w.s.Active != nil {
		return nil, newAppError(runtime.ErrSessionBusy, "Session already has an unfinished run")
	}
	if _, ok := w.s.Runs[req.RunID]; ok {
		return nil, newAppError(nil, "run_id already used")
	}
	return nil, nil
}

func (w *sessionWorkflow) validateSubmit(_ workflow.Context, req SubmitRequest) error {
	_, err := w.checkSubmit(req)
	return err
}

func (w *sessionWorkflow) submit(ctx workflow.Context, req SubmitRequest) (SubmitResult, error) {
	existing, err := w.checkSubmit(req)
	if err != nil {
		return SubmitResult{}, err
	}
	if existing != nil {
		return SubmitResult{Run: w.view(existing)}, nil
	}
	var history []model.Message
	if prev := w.latest(); prev != nil {
		history = append(history, prev.State.Messages...)
		// Older runs keep their result, not their conversation.
		prev.State.Messages, prev.State.Response = nil, nil
	}
	now := workflow.Now(ctx).UTC()
	st := &runtime.RunState{
		Version: 1, SessionID: w.s.SessionID, RunID: req.RunID, RequestID: req.RequestID, Agent: w.s.Agent,
		Message: req.Message, Messages: history, Metadata: []byte(`{}`),
		Phase: runtime.PhaseStart, Status: runtime.StatusRunning, Durable: true, Stream: req.Stream,
		Tools: []runtime.ToolEntry{}, Extensions: map[string]any{},
	}
	if st.Messages == nil {
		st.Messages = []model.Message{}
	}
	digest := runtime.MessageDigest(req.Message)
	rec := &RunRecord{State: st, CreatedAt: now, UpdatedAt: now, Digest: digest, Trace: req.Trace.bounded()}
	w.s.Runs[req.RunID] = rec
	w.s.RunOrder = append(w.s.RunOrder, req.RunID)
	w.s.Requests[req.RequestID] = RequestRecord{RunID: req.RunID, Digest: digest}
	id := req.RunID
	w.s.Active = &id
	w.s.Control = ""
	return SubmitResult{Run: w.view(rec), Created: true}, nil
}

func (w *sessionWorkflow) validateControl(_ workflow.Context, req ControlRequest) error {
	if w.retired != nil {
		return errRetired()
	}
	switch req.Action {
	case ActionResume, ActionPaused, ActionCancelled:
		return nil
	}
	return newAppError(nil, fmt.Sprintf("unknown control action %q", req.Action))
}

func (w *sessionWorkflow) control(ctx workflow.Context, req ControlRequest) (ControlResult, error) {
	rec := w.latest()
	if rec == nil {
		return ControlResult{}, nil
	}
	st := rec.State
	id := st.RunID
	if req.Action == ActionResume {
		if st.Status.Finished() {
			return ControlResult{}, nil
		}
		if w.drive == nil && st.Status != runtime.StatusRunning {
			if err := w.resume(ctx, rec, req.Trace); err != nil {
				return ControlResult{}, err
			}
		}
		return ControlResult{RunID: &id}, nil
	}
	if st.Status.Finished() {
		v := w.view(rec)
		return ControlResult{Run: &v}, nil
	}
	w.s.Control = req.Action
	if d := w.drive; d != nil && d.runID == id {
		if req.Action == ActionCancelled {
			d.cause = causeCancelled
			d.cancel()
		}
		_, err := workflow.AwaitWithTimeout(ctx, controlWait, func() bool { return w.drive != d })
		if err != nil {
			return ControlResult{}, err
		}
		v := w.view(rec)
		return ControlResult{Run: &v}, nil
	}
	// Nobody drives it: settle it here.
	switch {
	case req.Action == ActionCancelled:
		runtime.CancelState(st, "cancelled", nil)
		w.s.Active = nil
	case st.Status == runtime.StatusRunning:
		st.Status = runtime.StatusPaused
	default:
		v := w.view(rec)
		return ControlResult{Run: &v}, nil
	}
	w.event(st, runtime.EventRunResult, st.ResultData(), nil)
	w.touch(ctx, rec)
	w.settle(ctx)
	v := w.view(rec)
	return ControlResult{Run: &v}, nil
}

// checkResolve finds the entry a decision is about, or the rejection. With
// dryRun the decision is tried on a copy of the state.
func (w *sessionWorkflow) checkResolve(req ResolveRequest) (*RunRecord, int, error) {
	if w.retired != nil {
		return nil, 0, errRetired()
	}
	noKey := newAppError(runtime.ErrUnknownExecutionKey, fmt.Sprintf("No pending tool has execution key '%s'", req.Key))
	rec := w.latest()
	if rec == nil {
		return nil, 0, noKey
	}
	st := rec.State
	if w.drive != nil || !runtime.AwaitingResolution(st.Status) {
		return nil, 0, newAppError(runtime.ErrNotAwaitingResolution, "Run is not awaiting a resolution")
	}
	idx := -1
	for i := range st.Tools {
		if st.Tools[i].ExecutionKey == req.Key {
			idx = i
		}
	}
	if idx < 0 {
		return nil, 0, noKey
	}
	return rec, idx, nil
}

func decisionOf(req ResolveRequest) runtime.Decision {
	return runtime.Decision{Allow: req.Allow, Result: req.Result, Retry: req.Retry, Abort: req.Abort}
}

func resolutionError(err error) error {
	if errors.Is(err, runtime.ErrResolutionInvalid) {
		return newAppError(runtime.ErrResolutionInvalid, err.Error())
	}
	return err
}

func (w *sessionWorkflow) validateResolve(_ workflow.Context, req ResolveRequest) error {
	rec, idx, err := w.checkResolve(req)
	if err != nil {
		return err
	}
	// Try the decision on a copy: the validator must not change state.
	cp := *rec.State
	cp.Tools = slices.Clone(rec.State.Tools)
	cp.Tools[idx].Attempts = slices.Clone(cp.Tools[idx].Attempts) // resolving marks the last span
	cp.Messages = slices.Clip(rec.State.Messages)
	return resolutionError(runtime.ResolveEntry(&cp, &cp.Tools[idx], decisionOf(req)))
}

func (w *sessionWorkflow) resolve(ctx workflow.Context, req ResolveRequest) (ResolveResult, error) {
	rec, idx, err := w.checkResolve(req)
	if err != nil {
		return ResolveResult{}, err
	}
	st := rec.State
	dec := decisionOf(req)
	dec.At = workflow.Now(ctx)
	if err := runtime.ResolveEntry(st, &st.Tools[idx], dec); err != nil {
		return ResolveResult{}, resolutionError(err)
	}
	w.touch(ctx, rec)
	if req.Abort {
		if w.s.Active != nil && *w.s.Active == st.RunID {
			w.s.Active = nil
		}
		w.event(st, runtime.EventRunResult, st.ResultData(), nil)
		w.settle(ctx)
	}
	if req.Resume && !st.Status.Finished() {
		if err := w.resume(ctx, rec, req.Trace); err != nil {
			return ResolveResult{}, err
		}
		// The answer is the run's result once it stops again.
		if err := workflow.Await(ctx, func() bool {
			return st.Status != runtime.StatusRunning && (w.drive == nil || w.drive.runID != st.RunID)
		}); err != nil {
			return ResolveResult{}, err
		}
	}
	return ResolveResult{Run: w.view(rec)}, nil
}
