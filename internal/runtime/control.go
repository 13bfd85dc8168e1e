package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/tool"
)

// Pause asks the latest run to stop at its next boundary as paused and
// returns the latest run (nil when the session has none). A run driven by
// another process sees the request at its next boundary.
func (r *Runtime) Pause(ctx context.Context, sessionID string) (*RunResult, error) {
	return r.control(ctx, sessionID, rtstore.ControlPaused)
}

// Cancel cancels the latest unfinished run: an in-flight call is
// interrupted, open tool calls are answered, the run ends cancelled.
func (r *Runtime) Cancel(ctx context.Context, sessionID string) (*RunResult, error) {
	return r.control(ctx, sessionID, rtstore.ControlCancelled)
}

// controlWait bounds how long pause and cancel wait for the run to stop
// (or for the session's lock); controlRetry is the pause between tries of
// a busy lock.
const (
	controlWait  = 5 * time.Second
	controlRetry = 100 * time.Millisecond
)

func (r *Runtime) control(ctx context.Context, sessionID, ctl string) (*RunResult, error) {
	sess, err := r.ownedSession(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	sessionID = sess.ID // the key, from here on
	if sess.LastRunID == "" {
		return nil, nil
	}
	if sess.LastRunStatus.Finished() {
		return r.GetRun(ctx, sess.LastRunID)
	}
	// Until the run stops here or its owner is found: the session's lock
	// may be held by a driver (of this process, or of another that polls
	// the flag), or only for a moment by an approval or a resume, which
	// drives nothing and may clear the flag; so the flag is written again
	// at every try, and a resume that started meanwhile is found as this
	// process's driver.
	wait := time.NewTimer(controlWait)
	defer wait.Stop()
	var lease rtstore.Lease
	for {
		if err := r.store.SessionControlSet(ctx, sessionID, ctl); err != nil {
			return nil, fmt.Errorf("set control: %w", err)
		}
		r.mu.Lock()
		d := r.active[sessionID]
		r.mu.Unlock()
		if d != nil {
			if ctl == rtstore.ControlCancelled {
				d.cancel(errCancelRequested)
			}
			select {
			case <-d.done:
			case <-wait.C:
			case <-ctx.Done():
			}
			return r.GetRun(ctx, sess.LastRunID)
		}
		// Nobody here drives it: settle it directly if nobody else does.
		lease, err = r.store.SessionLock(ctx, sessionID)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrSessionBusy) {
			return nil, fmt.Errorf("lock session: %w", err)
		}
		select {
		case <-wait.C:
			return r.GetRun(ctx, sess.LastRunID) // its owner sees the flag
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(controlRetry):
		}
	}
	defer func() { _ = lease.Release(context.WithoutCancel(ctx)) }()
	st, err := r.loadState(ctx, sess.LastRunID)
	if err != nil {
		return nil, err
	}
	c := &committer{r: r, st: st, lease: lease}
	switch {
	case ctl == rtstore.ControlCancelled && !st.Status.Finished():
		cancelState(st, "cancelled", nil)
	case ctl == rtstore.ControlPaused && st.Status == StatusRunning:
		st.Status = StatusPaused
	default:
		return r.GetRun(ctx, sess.LastRunID)
	}
	c.event(EventRunResult, st.resultData(), nil)
	if err := c.commit(ctx); err != nil {
		return nil, err
	}
	return r.GetRun(ctx, sess.LastRunID)
}

// Resume resumes the session's latest unfinished run in the background
// and returns its id; "" when nothing is left to resume. Resuming a run
// this process already drives returns its id. Errors: ErrNotFound,
// ErrSessionBusy (another process drives it), ErrRecordingMismatch,
// ErrAgentMismatch.
func (r *Runtime) Resume(ctx context.Context, sessionID string, p ResumeParams) (string, error) {
	sess, err := r.ownedSession(ctx, sessionID)
	if err != nil {
		return "", err
	}
	return r.resume(ctx, sess, p, nil, false)
}

// resume implements Resume; lease, when set, is already held. The new
// attempt's invoke_agent span is a child of the span in ctx (the request
// resuming it) or, with newTrace (a resume at start-up or by the reaper,
// which no request asked for), the root of a new trace; either way it
// links to the span of the run's previous attempt, and its context is
// saved with the run.resumed boundary.
func (r *Runtime) resume(ctx context.Context, sess *rtstore.SessionRow, p ResumeParams, lease rtstore.Lease, newTrace bool) (string, error) {
	if p.Recording != nil && *p.Recording != sess.Recording {
		return "", publicErr(ErrRecordingMismatch, "Recording configuration differs from persisted session")
	}
	if lease == nil {
		r.mu.Lock()
		d := r.active[sess.ID]
		r.mu.Unlock()
		if d != nil {
			return d.st.RunID, nil
		}
		var err error
		if lease, err = r.lockSession(ctx, sess.ID); err != nil {
			return "", err
		}
	}
	release := func() { _ = lease.Release(context.WithoutCancel(ctx)) }
	if sess.LastRunID == "" {
		release()
		return "", nil
	}
	row, err := r.store.RunGet(ctx, sess.LastRunID)
	if err != nil {
		release()
		return "", fmt.Errorf("run %s: %w", sess.LastRunID, err)
	}
	st, err := decodeState(row.State)
	if err != nil {
		release()
		return "", err
	}
	if st.Status.Finished() {
		release()
		return "", nil
	}
	b, err := r.bindSession(sess)
	if err != nil {
		release()
		return "", err
	}
	if err := r.store.SessionControlSet(ctx, sess.ID, rtstore.ControlNone); err != nil {
		release()
		return "", fmt.Errorf("reset control: %w", err)
	}
	prev := st.Status
	if st.Status, err = NextStatus(prev, EvResume); err != nil {
		release()
		return "", err
	}
	st.Error, st.StopReason = nil, nil
	NoteResumed(st, r.cfg.NowFunc(), prev)
	d := r.newDriver(b, st, lease)
	d.record(journal.KindRunResumed, map[string]any{"previous_status": prev}, nil)
	recoverState(d)
	d.span = r.tracing.startAgent(ctx, st, row.TraceContext, newTrace)
	d.traceContext = traceContextOf(d.span)
	if err := d.commit(withSpan(ctx, d.span)); err != nil {
		endSpan(d.span, err)
		release()
		return "", err
	}
	r.launch(d)
	return st.RunID, nil
}

// recoverState applies REFERENCE §4.3 to a state left by a process that
// stopped mid-boundary.
func recoverState(d *driver) {
	st := d.st
	if st.Phase == PhaseModel && st.ModelAttemptOpen {
		// hxd closes the lost attempt so a resumed run can export complete.
		d.record(journal.KindModelFailed, map[string]any{
			"type": "ProcessLost", "message": "The process running this model attempt was lost",
		}, nil)
		st.ModelAttemptOpen = false
	}
	for i := range st.Tools {
		e := &st.Tools[i]
		if ResumeTable(e.Status, e.Policy) == ResumeUncertain {
			e.Status = ToolUncertain
			d.event(EventRecoveryRequired, map[string]any{"execution_key": e.ExecutionKey, "call": e.Call}, e)
		}
	}
}

// ResumeInterrupted resumes every run left running by a process that
// stopped (start-up recovery). Runs owned by another live process are
// skipped. Returns how many runs were resumed.
func (r *Runtime) ResumeInterrupted(ctx context.Context) (int, error) {
	rows, err := r.store.RunListByStatus(ctx, StatusRunning)
	if err != nil {
		return 0, fmt.Errorf("list interrupted runs: %w", err)
	}
	return r.resumeRows(ctx, rows)
}

// Reap resumes the runs whose session lease expired or whose owner died
// (Config.ExpiredRunsFunc): the process that drove them died or lost its
// lease. A run another
// process claims first (ErrSessionBusy) is skipped. Returns how many runs
// this process took over; 0 without an ExpiredRunsFunc.
func (r *Runtime) Reap(ctx context.Context) (int, error) {
	if r.cfg.ExpiredRunsFunc == nil {
		return 0, nil
	}
	rows, err := r.cfg.ExpiredRunsFunc(ctx)
	if err != nil {
		return 0, fmt.Errorf("list expired runs: %w", err)
	}
	return r.resumeRows(ctx, rows)
}

// StartReaper calls Reap every interval, and whenever
// Config.ExpiredRunsWake receives, in the background until ctx ends or
// Stop is called. A no-op without an ExpiredRunsFunc or once stopping.
func (r *Runtime) StartReaper(ctx context.Context, every time.Duration) {
	if r.cfg.ExpiredRunsFunc == nil || every <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.quit:
				return
			case <-t.C:
			case <-r.cfg.ExpiredRunsWake: // nil: never
			}
			n, err := r.Reap(ctx)
			if n > 0 {
				r.log.Info("reaper resumed runs whose owner died or whose lease expired", "runs", n)
			}
			if err != nil && ctx.Err() == nil {
				r.log.Warn("reaper", "error", err)
			}
		}
	}()
}

// resumeParallel is how many runs resumeRows resumes at once: a dead
// process's runs are taken over together, their boundary commits sharing
// the store's group commits, instead of one after another.
const resumeParallel = 8

// resumeRows resumes the runs among rows that are their session's latest,
// resumeParallel at a time.
func (r *Runtime) resumeRows(ctx context.Context, rows []*rtstore.RunRow) (int, error) {
	var (
		mu   sync.Mutex
		n    int
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, resumeParallel)
	for _, row := range rows {
		if ctx.Err() != nil {
			mu.Lock()
			errs = append(errs, ctx.Err())
			mu.Unlock()
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ok, err := r.resumeRow(ctx, row)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				n++
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// resumeRow resumes row's run if it is its session's latest and nobody
// drives it; false (and no error) when another process claimed it first.
func (r *Runtime) resumeRow(ctx context.Context, row *rtstore.RunRow) (bool, error) {
	sess, err := r.store.SessionGet(ctx, row.SessionID)
	if err != nil {
		return false, err
	}
	if sess.LastRunID != row.ID {
		return false, nil
	}
	r.mu.Lock()
	_, driving := r.active[sess.ID]
	r.mu.Unlock()
	if driving {
		return false, nil // this process drives it already
	}
	id, err := r.resume(ctx, sess, ResumeParams{}, nil, true)
	if err != nil {
		if !errors.Is(err, ErrSessionBusy) {
			return false, fmt.Errorf("resume session %s: %w", sess.ID, err)
		}
		return false, nil
	}
	return id != "", nil
}

// Pending lists the latest run's tool entries awaiting a decision.
func (r *Runtime) Pending(ctx context.Context, sessionID string) ([]PendingTool, error) {
	sess, err := r.ownedSession(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if sess.LastRunID == "" {
		return []PendingTool{}, nil
	}
	st, err := r.loadState(ctx, sess.LastRunID)
	if err != nil {
		return nil, err
	}
	p := st.pending()
	if p == nil {
		p = []PendingTool{}
	}
	return p, nil
}

// Approve decides an approval (allow or decline).
func (r *Runtime) Approve(ctx context.Context, p ApproveParams) (*RunResult, error) {
	allow := p.Allow
	return r.decide(ctx, p.SessionID, p.ExecutionKey, p.Resume, decision{allow: &allow})
}

// Resolve decides an uncertain outcome: exactly one of result, retry, abort.
func (r *Runtime) Resolve(ctx context.Context, p ResolveParams) (*RunResult, error) {
	return r.decide(ctx, p.SessionID, p.ExecutionKey, p.Resume, decision{result: p.Result, retry: p.Retry, abort: p.Abort})
}

type decision struct {
	allow  *bool
	result *model.ToolResult
	retry  bool
	abort  bool
	at     time.Time // when it was decided (timeline)
}

func (r *Runtime) decide(ctx context.Context, sessionID, key string, resume bool, dec decision) (*RunResult, error) {
	sess, err := r.ownedSession(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	sessionID = sess.ID // the key, from here on
	if sess.LastRunID == "" {
		return nil, publicErr(ErrUnknownExecutionKey, fmt.Sprintf("No pending tool has execution key '%s'", key))
	}
	lease, err := r.lockForDecision(ctx, sessionID, sess.LastRunID)
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			_ = lease.Release(context.WithoutCancel(ctx))
		}
	}()
	st, err := r.loadState(ctx, sess.LastRunID)
	if err != nil {
		return nil, err
	}
	if !decidable(st.Status) {
		return nil, publicErr(ErrNotAwaitingResolution, "Run is not awaiting a resolution")
	}
	var e *ToolEntry
	for i := range st.Tools {
		if st.Tools[i].ExecutionKey == key {
			e = &st.Tools[i]
		}
	}
	if e == nil {
		return nil, publicErr(ErrUnknownExecutionKey, fmt.Sprintf("No pending tool has execution key '%s'", key))
	}
	dec.at = r.cfg.NowFunc()
	if err := resolveEntry(st, e, dec); err != nil {
		return nil, err
	}
	c := &committer{r: r, st: st, lease: lease}
	var result any
	if dec.result != nil {
		result = dec.result
	}
	c.record(journal.KindToolResolved, map[string]any{
		"allow": dec.allow, "result": result, "retry": dec.retry, "abort": dec.abort, "status": e.Status,
	}, e)
	if dec.abort {
		c.event(EventRunResult, st.resultData(), nil)
	}
	if err := c.commit(ctx); err != nil {
		return nil, err
	}
	if resume && !st.Status.Finished() {
		sess.LastRunStatus = st.Status
		keep = true
		if _, err := r.resume(ctx, sess, ResumeParams{}, lease, false); err != nil {
			return nil, err
		}
		// The answer is the run's result once it stops again.
		r.mu.Lock()
		d := r.active[sessionID]
		r.mu.Unlock()
		if d != nil {
			select {
			case <-d.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return r.GetRun(ctx, sess.LastRunID)
}

// lockForDecision takes the session for a decision. A run driven here is
// not awaiting a decision, unless its drive has just stopped at a status
// that takes one (its last commit is stored, so WaitRun has already
// answered) and is still releasing the session: that release is waited
// for. Other decisions of this process on the same session are waited for
// (they hold the lock for one commit); a session owned by another process
// is busy.
func (r *Runtime) lockForDecision(ctx context.Context, sessionID, runID string) (rtstore.Lease, error) {
	deadline := r.cfg.NowFunc().Add(5 * time.Second)
	for {
		r.mu.Lock()
		d := r.active[sessionID]
		r.mu.Unlock()
		if d != nil {
			row, err := r.store.RunGet(ctx, runID)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", runID, err)
			}
			if !decidable(row.Status) {
				return nil, publicErr(ErrNotAwaitingResolution, "Run is not awaiting a resolution")
			}
			select {
			case <-d.done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		lease, err := r.lockSession(ctx, sessionID)
		if err == nil || !errors.Is(err, ErrSessionBusy) || r.cfg.NowFunc().After(deadline) {
			return lease, err
		}
		if err := r.cfg.SleepFunc(ctx, 10*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// resolveEntry applies the reference's resolution rules (REFERENCE §4.4).
func resolveEntry(st *RunState, e *ToolEntry, dec decision) error {
	invalid := func(msg string) error { return publicErr(ErrResolutionInvalid, msg) }
	if dec.allow != nil {
		if e.Status != ToolApproval {
			return invalid("Tool is not awaiting approval")
		}
		e.ApprovalDecidedAt = dec.at.UTC()
		if *dec.allow {
			e.Status, _ = NextToolStatus(e.Status, TevApprove)
			e.Approved = ptr(true)
			return nil
		}
		e.Status, _ = NextToolStatus(e.Status, TevDecline)
		e.Result = &model.ToolResult{ToolCallID: e.Call.ID, Content: tool.TextContent("Permission denied"), IsError: true}
		return nil
	}
	n := 0
	for _, b := range []bool{dec.result != nil, dec.retry, dec.abort} {
		if b {
			n++
		}
	}
	if n != 1 {
		return invalid("Choose exactly one of result, retry, abort")
	}
	if e.Status != ToolUncertain && e.Status != ToolStarted {
		return invalid("Tool has no uncertain outcome")
	}
	resolveSpan(e, dec)
	switch {
	case dec.abort:
		cancelState(st, "cancelled", nil)
	case dec.retry:
		if st.Status == StatusCancelled {
			return invalid("Cancelled runs cannot be retried; supply a verified outcome or start a new turn")
		}
		e.Status, _ = NextToolStatus(e.Status, TevResolveRetry)
	default:
		if dec.result.ToolCallID != e.Call.ID {
			return invalid("Resolution must match tool call ID")
		}
		res := *dec.result
		if len(res.Content) == 0 {
			res.Content = tool.TextContent("")
		}
		e.Status, _ = NextToolStatus(e.Status, TevResolveValue)
		e.RawResult = &res
	}
	return nil
}

// Stop ends the runtime: drivers stop at their next boundary (runs stay
// resumable); when ctx ends first, in-flight calls are cancelled.
func (r *Runtime) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.stopping {
		close(r.quit)
	}
	r.stopping = true
	drivers := make([]*driver, 0, len(r.active))
	for _, d := range r.active {
		drivers = append(drivers, d)
	}
	r.mu.Unlock()
	for _, d := range drivers {
		d.soft.Store(true)
	}
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, d := range drivers {
		d.cancel(errShutdown)
	}
	<-done
	return nil
}

// decidable reports whether a run with this status can take a decision
// (approve, resolve).
func decidable(s RunStatus) bool {
	switch s {
	case StatusAwaitingInput, StatusPaused, StatusFailed, StatusCancelled:
		return true
	}
	return false
}
