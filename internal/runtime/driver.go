package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"hxd/internal/agent"
	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/tool"
)

// errInterruptedSpan ends the chat span of a model call a cancel, the
// deadline or a stop interrupted.
var errInterruptedSpan = &model.Failure{Type: "Interrupted", Message: "the call was interrupted"}

// InterruptedCall is the error an execute_tool span of a call a cancel,
// the deadline or a stop interrupted ends with, on both engines.
func InterruptedCall() *RunError {
	return &RunError{Type: "Interrupted", Message: "the call was interrupted"}
}

// toolOutcome is the span outcome (hxd.tool.outcome) of a timeline span
// outcome.
func toolOutcome(timeline string) string {
	switch timeline {
	case SpanSucceeded:
		return ToolOutcomeReturned
	case SpanFailed:
		return ToolOutcomeFailed
	}
	return ToolOutcomeUncertain
}

// endChat ends the open chat span, if any.
func (d *driver) endChat(resp *model.Response, err error) {
	if d.chat == nil {
		return
	}
	d.r.tracing.EndChat(d.chat, d.chatModel, resp, err)
	d.chat = nil
}

// endTool ends e's open execute_tool span, if any.
func (d *driver) endTool(e *ToolEntry, outcome string, res *model.ToolResult, runErr *RunError) {
	span, ok := d.tools[e.ExecutionKey]
	if !ok {
		return
	}
	delete(d.tools, e.ExecutionKey)
	d.r.tracing.EndTool(span, outcome, res, runErr)
}

// endSpans ends the spans still open as the driver ends (a stop in the
// middle of a call), then the attempt's.
func (d *driver) endSpans() {
	if d.span == nil {
		return
	}
	d.endChat(nil, errInterruptedSpan)
	for key, span := range d.tools {
		d.r.tracing.EndTool(span, ToolOutcomeUncertain, nil, InterruptedCall())
		delete(d.tools, key)
	}
	endAgent(d.span, d.st)
}

// Causes that end a drive early.
var (
	errCancelRequested = errors.New("run cancelled")
	errDeadline        = errors.New("session duration limit exceeded")
	errShutdown        = errors.New("process shutting down")
	// errLeaseLost: the session lease could not be renewed; another process
	// may own the session, so the driver stops without committing (the
	// fence would refuse its commits anyway).
	errLeaseLost = errors.New("session lease lost")
	// errStop ends the loop without a further commit (the state on disk is
	// consistent and resumable).
	errStop = errors.New("drive stopped")
)

// driver runs the loop of one run in one goroutine; it alone touches st
// (a concurrent tool batch's goroutines take turns, see runConcurrent).
// Its contexts are made by start and passed down: ctx, to every method
// that calls out or waits, ends at a cancel, the run's deadline or a stop;
// the storage waits (untilStored, through committer.wait) end only when
// the drive stops for good.
type driver struct {
	committer
	b      *binding
	cancel context.CancelCauseFunc
	done   chan struct{}
	soft   atomic.Bool // shutdown: stop at the next boundary
	// batch is the turn the goroutines of a concurrent tool batch take on
	// the run state (runConcurrent); nil outside one.
	batch *sync.Mutex

	// span is the run attempt's invoke_agent span, nil without tracing;
	// chat the open model attempt's chat span (chatModel its model) and
	// tools the open tool attempts' execute_tool spans by execution key
	// (tracing.go). They are touched with the run state (a concurrent
	// batch's goroutines hold the turn) and ended by the time the driver
	// ends.
	span      trace.Span
	chat      trace.Span
	chatModel string
	tools     map[string]trace.Span
}

func (r *Runtime) newDriver(b *binding, st *RunState, lease rtstore.Lease) *driver {
	return &driver{committer: committer{r: r, st: st, lease: lease}, b: b, done: make(chan struct{})}
}

// start runs the loop in the background; the driver owns lease until it ends.
func (d *driver) start() {
	r := d.r
	// The drive's context carries the attempt's span (so its model, tool
	// and commit spans are its children), not the request's cancellation.
	ctx, cancel := context.WithCancelCause(withSpan(context.Background(), d.span))
	limit := r.cfg.MaxSessionDuration
	if s := d.b.def.MaxSessionDurationSeconds; s > 0 {
		limit = time.Duration(s * float64(time.Second))
	}
	var stopDeadline context.CancelFunc = func() {}
	if limit > 0 {
		ctx, stopDeadline = context.WithDeadlineCause(ctx, r.cfg.NowFunc().Add(limit), errDeadline)
	}
	// hard ends when the drive stops for good (shutdown, lease lost, its
	// end), not at a cancel or deadline of the run: what a wait for
	// storage waits on.
	hard, stopHard := context.WithCancelCause(context.Background())
	d.cancel = func(cause error) {
		cancel(cause)
		if errors.Is(cause, errShutdown) || errors.Is(cause, errLeaseLost) || errors.Is(cause, errStop) {
			stopHard(cause)
		}
	}
	d.wait = func(what string, op func() error) error { return d.untilStored(hard, what, op) }
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		defer stopDeadline()
		defer d.finish()
		d.loop(ctx)
	}()
	go func() {
		defer r.wg.Done()
		d.heartbeat(ctx)
	}()
}

func (d *driver) finish() {
	r := d.r
	r.mu.Lock()
	if r.active[d.st.SessionID] == d {
		delete(r.active, d.st.SessionID)
		delete(r.driving, d.st.RunID)
	}
	r.mu.Unlock()
	if err := d.lease.Release(context.Background()); err != nil {
		r.log.Warn("release session lock", "session_id", d.st.SessionID, "error", err)
	}
	d.cancel(errStop)
	d.endSpans()
	close(d.done)
	r.notify.wake(d.st.RunID)
	r.settled.wake(d.st.RunID)
}

// heartbeat polls the session's control flag so a cancel from another
// process interrupts an in-flight call within a second, and renews the
// session lease every LeaseRenewEvery. A renewal that reports the lease
// lost, or a second failed renewal in a row (by then two thirds of the
// lease have passed unrenewed), cancels the driver with errLeaseLost.
func (d *driver) heartbeat(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	renew := time.NewTicker(d.r.cfg.LeaseRenewEvery)
	defer renew.Stop()
	failures := 0
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
			// Bounded, so that a slow read never holds up a renewal.
			cctx, cancel := context.WithTimeout(ctx, min(time.Second, d.r.cfg.LeaseRenewEvery))
			ctl, err := d.r.store.SessionControlGet(cctx, d.st.SessionID)
			cancel()
			if err == nil && ctl == rtstore.ControlCancelled {
				d.cancel(errCancelRequested)
			}
		case <-renew.C:
			if ctx.Err() != nil {
				continue
			}
			// A renewal stuck behind the database counts as failed: by
			// the next tick a third of the lease has passed anyway.
			rctx, cancel := context.WithTimeout(ctx, d.r.cfg.LeaseRenewEvery)
			err := d.lease.Renew(rctx)
			cancel()
			if err == nil {
				failures = 0
				continue
			}
			if ctx.Err() != nil {
				continue
			}
			failures++
			log := d.r.log.With("session_id", d.st.SessionID, "run_id", d.st.RunID, "error", err)
			if errors.Is(err, rtstore.ErrLeaseLost) || failures >= 2 {
				log.Error("session lease lost: driver stops without committing; another process resumes the run")
				d.cancel(fmt.Errorf("%w: %w", errLeaseLost, err))
				if f := d.r.cfg.LeaseLostFunc; f != nil {
					f(SessionIDOf(d.st.SessionID), d.st.RunID, err)
				}
				continue
			}
			log.Warn("session lease renewal failed; retrying")
		}
	}
}

func (d *driver) loop(ctx context.Context) {
	log := d.r.log.With("session_id", d.st.SessionID, "run_id", d.st.RunID)
	for {
		if errors.Is(context.Cause(ctx), errLeaseLost) {
			// Another process may own the session: nothing more is written.
			return
		}
		cmd := NextCommand(d.st)
		if cmd == CommandResult || d.soft.Load() {
			// Whatever happened since the last commit becomes durable now.
			if d.hasPending() {
				if err := d.commit(ctx); err != nil && !errors.Is(err, errStop) {
					log.ErrorContext(ctx, "run stopped: boundary commit failed", "error", err)
				}
			}
			return
		}
		if ctx.Err() != nil {
			// Cancelled, past the deadline or shutting down while a step
			// ended without noticing (a tool returned as the cancel came):
			// the run stops here, as if interrupted mid-step.
			if ierr := d.interrupted(ctx); ierr != nil {
				log.ErrorContext(ctx, "interrupt run", "error", ierr)
			}
			return
		}
		if cmd == Command(PhaseModel) || cmd == Command(PhaseTools) || cmd == Command(PhaseFinish) {
			if stop, err := d.checkControl(ctx); err != nil || stop {
				if err != nil {
					log.ErrorContext(ctx, "run stopped at a boundary", "error", err)
				}
				return
			}
		}
		err := d.step(ctx, cmd)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			if ierr := d.interrupted(ctx); ierr != nil {
				log.ErrorContext(ctx, "interrupt run", "error", ierr)
			}
			return
		}
		if errors.Is(err, errStop) {
			return
		}
		var fatal *commandError
		if errors.As(err, &fatal) {
			if ferr := d.failRun(ctx, fatal.typ, fatal.msg); ferr != nil {
				log.ErrorContext(ctx, "fail run", "error", ferr)
			}
			return
		}
		// A commit failed for good (a transient failure waits in
		// untilStored): nothing past the last commit happened durably.
		log.ErrorContext(ctx, "run stopped: boundary commit failed", "error", err)
		d.settleAfterCommitFailure(ctx, err)
		return
	}
}

// A drive that meets a storage outage (ErrUnavailable: disk full, too many
// open files, the database unreachable or locked) waits and goes on where
// it was; a run is never failed for it (DESIGN §10). The pause between
// tries doubles from storageWaitMin up to storageWaitMax.
const (
	storageWaitMin = 100 * time.Millisecond
	storageWaitMax = 5 * time.Second
)

// untilStored runs op, a storage call of the drive (a boundary commit with
// its bounded tries, a control read, an artifact write), again while it
// fails with ErrUnavailable, and returns its first other outcome. A
// boundary is sent again as it was, with the ids of its records and
// events, so nothing is lost or written twice. Only the drive's stop
// (shutdown, lease lost) ends the wait, with an error wrapping errStop:
// storage then holds the run as of its last commit, to be resumed.
func (d *driver) untilStored(hard context.Context, what string, op func() error) error {
	err := op()
	if err == nil || !errors.Is(err, rtstore.ErrUnavailable) {
		return err
	}
	log := d.r.log.With("session_id", d.st.SessionID, "run_id", d.st.RunID, "op", what)
	log.Warn("storage unavailable: the run waits for it", "error", err)
	wait := storageWaitMin
	for tries := 1; ; tries++ {
		if serr := d.r.cfg.SleepFunc(hard, wait); serr != nil {
			log.Info("drive stopped while waiting for storage; the run stays as last committed", "cause", context.Cause(hard))
			return fmt.Errorf("%w: %s: %w", errStop, what, err)
		}
		if err = op(); err == nil || !errors.Is(err, rtstore.ErrUnavailable) {
			if err == nil {
				log.Info("storage available again: the run goes on", "tries", tries+1)
			}
			return err
		}
		wait = min(2*wait, storageWaitMax)
	}
}

// settleAfterCommitFailure writes why the run stopped once storage takes
// writes again, so clients see it and can resume the run (REFERENCE §3.3).
// The boundary that failed is written with it, records and all: what the
// driver did before it happened (a tool that returned did run), and the
// effect it guarded did not (settleInFlight closes it). A boundary the
// store refused as such (a conflicting record) is dropped instead, and the
// failure written on top of the stored state. It retries with capped
// backoff until it succeeds, the lease is lost or the drive is stopped.
func (d *driver) settleAfterCommitFailure(ctx context.Context, cause error) {
	typ, msg := "StorageError", "Run state could not be committed"
	if d.st.Recording {
		typ, msg = "RecordingError", "Required flight-recording commit failed"
	}
	write := func() error { return d.failStored(ctx, typ, msg) }
	if !errors.Is(cause, rtstore.ErrRecordConflict) && !errors.Is(cause, rtstore.ErrForeignRecord) {
		d.settleInFlight(typ, msg)
		write = func() error { return d.commit(ctx) }
	}
	wait := 100 * time.Millisecond
	for {
		err := write()
		if err == nil || errors.Is(err, rtstore.ErrLeaseLost) || errors.Is(err, rtstore.ErrRecordConflict) || d.soft.Load() {
			return
		}
		if d.r.cfg.SleepFunc(ctx, wait) != nil {
			return
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// settleInFlight closes, in the driver's state, the effect the failed
// boundary guarded, which never happened, and ends a running run: an open
// model attempt (its model.started is in the boundary) gets model.failed;
// a tool entry whose tool.dispatched is in the boundary gets tool.failed
// with outcome "unknown" and, when manual, becomes uncertain (REFERENCE
// §3.3: handled like a tool exception). The run then waits for those
// decisions (awaiting_input) or fails with {typ, msg}.
func (d *driver) settleInFlight(typ, msg string) {
	st := d.st
	now := d.r.cfg.NowFunc()
	if st.ModelAttemptOpen {
		d.record(journal.KindModelFailed, map[string]any{"type": typ, "message": msg}, nil)
		st.ModelAttemptOpen = false
		EndModelSpan(st, now, SpanFailed, &RunError{Type: typ, Message: msg})
		d.endChat(nil, &model.Failure{Type: typ, Message: msg})
	}
	dispatched := map[string]bool{}
	for _, r := range d.records {
		if r.Kind == journal.KindToolDispatched && r.ExecutionKey != nil {
			dispatched[*r.ExecutionKey] = true
		}
	}
	for i := range st.Tools {
		e := &st.Tools[i]
		if e.Status != ToolStarted || !dispatched[e.ExecutionKey] {
			continue
		}
		d.record(journal.KindToolFailed, map[string]any{"type": typ, "message": msg, "outcome": "unknown"}, e)
		outcome := SpanFailed
		if e.Policy == tool.PolicyManual {
			outcome = SpanUncertain
		}
		EndToolSpan(e, now, outcome, &RunError{Type: typ, Message: msg})
		d.endTool(e, toolOutcome(outcome), nil, &RunError{Type: typ, Message: msg})
		if e.Policy == tool.PolicyManual && d.setToolStatus(e, TevUnknown) == nil {
			d.event(EventRecoveryRequired, map[string]any{"execution_key": e.ExecutionKey, "call": e.Call}, e)
		}
	}
	if st.Status != StatusRunning {
		return
	}
	if len(st.pending()) > 0 && d.setStatus(EvAwait) == nil {
		d.event(EventRunResult, st.resultData(), nil)
		return
	}
	if d.setStatus(EvFail) != nil {
		return
	}
	st.Error = &RunError{Type: typ, Message: msg}
	d.event(EventError, msg, nil)
	d.record(journal.KindCommandFailed, map[string]any{"phase": st.Phase, "type": typ, "message": msg}, nil)
	d.event(EventRunResult, st.resultData(), nil)
}

// failStored commits the stored run state as failed with {typ, msg}.
func (d *driver) failStored(ctx context.Context, typ, msg string) error {
	row, err := d.r.store.RunGet(ctx, d.st.RunID)
	if err != nil {
		return err
	}
	st, err := decodeState(row.State)
	if err != nil || st.Status != StatusRunning {
		return err
	}
	c := &committer{r: d.r, st: st, lease: d.lease}
	st.Status, st.Error = StatusFailed, &RunError{Type: typ, Message: msg}
	c.event(EventError, msg, nil)
	c.record(journal.KindCommandFailed, map[string]any{"phase": st.Phase, "type": typ, "message": msg}, nil)
	c.event(EventRunResult, st.resultData(), nil)
	return c.commit(ctx)
}

// commandError fails the run with {type, message}.
type commandError struct{ typ, msg string }

func (e *commandError) Error() string { return e.typ + ": " + e.msg }

func (d *driver) step(ctx context.Context, cmd Command) error {
	switch Phase(cmd) {
	case PhaseStart:
		return d.cmdStart()
	case PhasePrepareModel:
		return d.cmdPrepareModel(ctx)
	case PhaseModel:
		return d.cmdModel(ctx)
	case PhasePrepareTools:
		return d.cmdPrepareTools()
	case PhaseTools:
		return d.cmdTools(ctx)
	case PhaseFinish:
		d.cmdFinish()
		return d.commit(ctx)
	}
	return &commandError{typ: "RuntimeError", msg: fmt.Sprintf("unknown phase %q", cmd)}
}

// checkControl applies a pause or cancel requested through storage.
func (d *driver) checkControl(ctx context.Context) (stop bool, err error) {
	var ctl string
	err = d.wait("read control", func() error {
		var err error
		ctl, err = d.r.store.SessionControlGet(ctx, d.st.SessionID)
		return err
	})
	if err != nil {
		return true, fmt.Errorf("read control: %w", err)
	}
	switch ctl {
	case rtstore.ControlPaused:
		if err := d.setStatus(EvPause); err != nil {
			return true, err
		}
		d.event(EventRunResult, d.st.resultData(), nil)
		return true, d.commit(ctx)
	case rtstore.ControlCancelled:
		d.cancelState("cancelled", nil)
		return true, d.commit(ctx)
	}
	return false, nil
}

func (d *driver) advance(o Outcome) error { return asCommandError(Advance(d.st, o)) }

func (d *driver) setStatus(ev StatusEvent) error { return asCommandError(SetStatus(d.st, ev)) }

func (d *driver) setToolStatus(e *ToolEntry, ev ToolEvent) error {
	return asCommandError(SetToolStatus(e, ev))
}

// cmdStart appends the user message (pure).
func (d *driver) cmdStart() error { return asCommandError(StartRun(d.st)) }

// cmdPrepareModel opens a new step (pure).
func (d *driver) cmdPrepareModel(ctx context.Context) error {
	if d.st.Iterations < d.b.def.MaxIterations {
		// The step's row keeps its model attempts' times: a step whose
		// last attempt closed since the last commit (its tool calls all
		// answered without a call, so no commit followed) is committed
		// before the next step replaces the row's content.
		if d.stepSpansChanged() {
			if err := d.commit(ctx); err != nil {
				return err
			}
		}
		d.stashTools()
	}
	return asCommandError(PrepareModel(d.st, d.b.def.MaxIterations))
}

func (d *driver) buildRequest() *model.Request { return BuildModelRequest(d.b.def, d.b.specs, d.st) }

// cmdModel makes one model attempt: commit model.started, call, commit the
// outcome (two commits per call; a streamed call commits its deltas in
// between, callModel).
func (d *driver) cmdModel(ctx context.Context) error {
	st := d.st
	now := d.r.cfg.NowFunc()
	if st.Attempt != 0 {
		st.UsageIncomplete = true
		d.event(EventAttemptReset, map[string]any{"attempt": st.Attempt}, nil)
		ResetModelSpan(st, now)
	}
	st.Attempt++
	BeginAttemptUsage(st)
	BeginModelSpan(d.b.def, st, now)
	req := d.buildRequest()
	st.Request = req
	st.ModelAttemptOpen = true
	d.record(journal.KindModelStarted, req, nil)
	if err := d.commit(ctx); err != nil {
		return err
	}
	callCtx := ctx
	if d.r.tracing != nil {
		m := ChainModel(d.b.def, st.ModelIndex)
		callCtx, d.chat = d.r.tracing.StartChat(ctx, ChatAttempt{
			SessionID: st.SessionID, RunID: st.RunID, Provider: m.Provider, Model: m.Model, Attempt: st.Attempt, Request: req,
		})
		d.chatModel = m.Model
	}
	resp, streamed, err := d.callModel(callCtx, req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if dce := (*deltaCommitError)(nil); errors.As(err, &dce) {
			return dce.err
		}
		f := model.AsFailure(err)
		d.record(journal.KindModelFailed, map[string]any{"type": f.Type, "message": f.Message}, nil)
		st.ModelAttemptOpen = false
		EndModelSpan(st, d.r.cfg.NowFunc(), SpanFailed, &RunError{Type: f.Type, Message: f.Message})
		d.endChat(nil, f)
		if f.Usage != nil { // what the provider reported before failing
			AccountAttemptUsage(st, *f.Usage, true)
		}
		retry := d.b.def.Retry
		if RetrySameModel(d.b.def, st, f) {
			wait := model.Backoff(ModelAttempt(st), retry.BackoffSeconds, retry.MaxBackoffSeconds, f.RetryAfterSeconds, d.r.cfg.RandFunc)
			SetModelSpanWait(st, wait)
			d.event(EventWaiting, map[string]any{"on": "model", "seconds": journal.Float(wait.Seconds())}, nil)
			if err := d.commit(ctx); err != nil {
				return err
			}
			return d.r.cfg.SleepFunc(ctx, wait)
		}
		if FallBack(d.b.def, st, f) {
			return d.fallBack(ctx)
		}
		return &commandError{typ: f.Type, msg: f.Message}
	}
	processed := ProcessResponse(d.b.def, resp)
	d.record(journal.KindModelResponse, ResponsePayload(d.b.def, st, resp), nil)
	d.record(journal.KindModelProcessed, processed, nil)
	st.Response = &processed
	AccountAttemptUsage(st, resp.Usage, resp.UsageReported)
	d.record(journal.KindModelCompleted, CompletedPayload(&processed), nil)
	st.ModelAttemptOpen = false
	EndModelSpan(st, d.r.cfg.NowFunc(), SpanSucceeded, nil)
	d.endChat(resp, nil)
	if processed.Text != "" {
		if !streamed { // streamed: its deltas are committed
			d.event(EventTextDelta, processed.Text, nil)
		}
		d.event(EventTextComplete, processed.Text, nil)
	}
	if len(processed.ToolCalls) > 0 {
		if err := d.advance(OutToolCalls); err != nil {
			return err
		}
		if err := d.cmdPrepareTools(); err != nil {
			return err
		}
	} else if err := d.advance(OutFinal); err != nil {
		return err
	}
	// Committed with the next boundary: before the next effect, or with
	// the finish, which the loop runs after reading the control flag (a
	// pause that came during the call stops the run before it finishes).
	return nil
}

// cmdPrepareTools turns the response's tool calls into entries (pure).
func (d *driver) cmdPrepareTools() error {
	return asCommandError(PrepareTools(d.st, func(name string) (tool.Config, bool) {
		t, ok := d.b.tools[name]
		if !ok {
			return tool.Config{}, false
		}
		return t.Config(), true
	}))
}

// cmdTools runs every entry that can run, then either stops for decisions
// or appends the results and moves to the next step. A batch whose tools
// are all concurrent runs in parallel (REFERENCE §4.2); any other batch
// runs one entry after the other.
func (d *driver) cmdTools(ctx context.Context) error {
	st := d.st
	if ConcurrentBatch(st.Tools) {
		if err := d.runConcurrent(ctx); err != nil {
			return err
		}
	} else {
		for i := range st.Tools {
			if err := d.runEntry(ctx, &st.Tools[i]); err != nil {
				return err
			}
		}
	}
	if len(st.pending()) > 0 {
		if err := d.setStatus(EvAwait); err != nil {
			return err
		}
		d.event(EventRunResult, st.resultData(), nil)
		return d.commit(ctx)
	}
	return asCommandError(CollectResults(st))
}

// runnable reports whether an entry still has a call or its processing
// ahead of it.
func runnable(e *ToolEntry) bool {
	return e.Status == ToolPrepared || e.Status == ToolStarted || e.Status == ToolRawCompleted
}

// runEntry takes one entry through its calls (retries included) and its
// processing, until it is completed or waits for a decision. Once the
// drive is cancelled no entry is called (again): only a raw result is
// still processed.
func (d *driver) runEntry(ctx context.Context, e *ToolEntry) error {
	for runnable(e) {
		if e.Status != ToolRawCompleted && ctx.Err() != nil {
			return ctx.Err()
		}
		var err error
		if e.Status == ToolRawCompleted {
			err = d.processTool(ctx, e)
		} else {
			err = d.runTool(ctx, e)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runConcurrent runs an all-concurrent batch in parallel. The dispatches
// of every entry commit together before any handler starts; each handler
// then runs in its own goroutine, and each outcome commits as it comes
// (tool.returned in completion order), so a raw result is durable without
// waiting for slower calls. A retried call goes on in its goroutine, one
// attempt after the other. The goroutines take turns on the run state
// (d.batch): one at a time records, commits or processes, and none holds
// it during a handler call or a backoff. Every call finishes before the
// first error, in entry order, is returned.
func (d *driver) runConcurrent(ctx context.Context) error {
	st := d.st
	type call struct {
		e *ToolEntry
		t tool.Tool
	}
	var calls []call
	for i := range st.Tools {
		e := &st.Tools[i]
		if e.Status == ToolRawCompleted {
			if err := d.processTool(ctx, e); err != nil {
				return err
			}
			continue
		}
		if !runnable(e) {
			continue
		}
		t, err := d.dispatch(e)
		if err != nil {
			return err
		}
		if t != nil {
			calls = append(calls, call{e, t})
		}
	}
	if len(calls) == 0 {
		return nil
	}
	if err := d.commit(ctx); err != nil {
		// No handler ran: storage still holds the entries as they were.
		return err
	}
	var mu sync.Mutex
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	mu.Lock()
	d.batch = &mu
	for i, c := range calls {
		wg.Go(func() {
			mu.Lock()
			defer mu.Unlock()
			err := d.callTool(ctx, c.t, c.e)
			if err == nil && d.hasPending() {
				// An outcome that is no result (uncertain, a failure
				// before its retry); a result committed itself.
				if cerr := d.commit(ctx); cerr != nil && ctx.Err() == nil {
					err = cerr
				}
			}
			if err == nil {
				err = d.runEntry(ctx, c.e) // a retry, or nothing left
			}
			errs[i] = err
		})
	}
	mu.Unlock()
	wg.Wait()
	mu.Lock()
	d.batch = nil
	mu.Unlock()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// unlocked runs f, a handler call or a wait, with the batch's turn given
// up while it runs (see runConcurrent); outside a concurrent batch it
// just runs f.
func (d *driver) unlocked(f func()) {
	if mu := d.batch; mu != nil {
		mu.Unlock()
		defer mu.Lock()
	}
	f()
}

// answer completes an entry without dispatching it (deny, unknown tool,
// invalid input).
func (d *driver) answer(e *ToolEntry, text string) error {
	res, err := AnswerTool(e, text)
	if err != nil {
		return asCommandError(err)
	}
	d.event(EventToolResult, PublicToolResult(res), e)
	return nil
}

// runTool runs one attempt of an entry: commit tool.started + tool.dispatched,
// call the handler, commit the outcome (two commits per call).
func (d *driver) runTool(ctx context.Context, e *ToolEntry) error {
	t, err := d.dispatch(e)
	if err != nil || t == nil {
		return err
	}
	if err := d.commit(ctx); err != nil {
		// The handler never ran: storage still holds the entry as it was.
		return err
	}
	return d.callTool(ctx, t, e)
}

// dispatch gates and validates an entry and, when it may run, opens its
// next attempt: tool.started and tool.dispatched, to commit before the
// call. It returns the entry's tool, or nil when the entry was answered
// (unknown tool, denied, invalid input) or waits for an approval.
func (d *driver) dispatch(e *ToolEntry) (tool.Tool, error) {
	t, ok := d.b.tools[e.Call.Name]
	if !ok {
		return nil, d.answer(e, "Unknown tool: "+e.Call.Name)
	}
	switch GateTool(t.Config(), e) {
	case GateDeny:
		return nil, d.answer(e, "Permission denied")
	case GateAsk:
		if err := d.setToolStatus(e, TevNeedApproval); err != nil {
			return nil, err
		}
		RequestApproval(e, d.r.cfg.NowFunc())
		d.event(EventApprovalRequired, map[string]any{"execution_key": e.ExecutionKey, "call": e.Call}, e)
		return nil, nil
	}
	if err := t.ValidateInput(e.Call.Input); err != nil && e.Status == ToolPrepared {
		return nil, d.answer(e, "Invalid tool input: "+err.Error())
	}
	if err := d.setToolStatus(e, TevStart); err != nil {
		return nil, err
	}
	e.Attempt++
	BeginToolSpan(e, d.r.cfg.NowFunc())
	d.record(journal.KindToolStarted, toolStartedPayload{Call: e.Call, ReplayPolicy: e.Policy}, e)
	d.event(EventToolCallStart, e.Call, e)
	d.record(journal.KindToolDispatched, toolDispatchedPayload{Call: e.Call}, e)
	return t, nil
}

// The payloads of tool.started and tool.dispatched, written on every tool
// call. Structs encode several times faster than maps; their fields are in
// key order, so the JSON is what the maps gave.
type (
	toolStartedPayload struct {
		Call         model.ToolCall `json:"call"`
		ReplayPolicy string         `json:"replay_policy"`
	}
	toolDispatchedPayload struct {
		Call model.ToolCall `json:"call"`
	}
)

// callTool calls the handler of a dispatched entry (its dispatch is
// committed) and takes in the outcome.
func (d *driver) callTool(ctx context.Context, t tool.Tool, e *ToolEntry) error {
	var out tool.Outcome
	var err error
	toolCtx := ctx
	if d.r.tracing != nil {
		var span trace.Span
		toolCtx, span = d.r.tracing.StartTool(ctx, d.st.SessionID, d.st.RunID, e)
		if d.tools == nil {
			d.tools = map[string]trace.Span{}
		}
		d.tools[e.ExecutionKey] = span
	}
	d.unlocked(func() {
		callCtx, cancel := context.WithTimeout(toolCtx, time.Duration(float64(e.Timeout)*float64(time.Second)))
		out, err = t.Call(callCtx, tool.Invocation{
			SessionID: SessionIDOf(d.st.SessionID), RunID: d.st.RunID, ExecutionKey: e.ExecutionKey, Attempt: e.Attempt, Call: e.Call,
		})
		cancel()
	})
	switch {
	case errors.Is(err, tool.ErrClientResult):
		if err := d.setToolStatus(e, TevUnknown); err != nil {
			return err
		}
		EndToolSpan(e, d.r.cfg.NowFunc(), SpanUncertain, nil)
		d.endTool(e, ToolOutcomeUncertain, nil, nil)
		d.event(EventRecoveryRequired, map[string]any{"execution_key": e.ExecutionKey, "call": e.Call, "reason": "client_result"}, e)
		return nil
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil && !d.failedWithResult(e, tool.AsFailure(err), out):
		return d.toolFailed(ctx, e, tool.AsFailure(err))
	}
	res := out.Result
	res.ToolCallID = e.Call.ID
	if len(res.Content) == 0 {
		res.Content = tool.TextContent("")
	}
	if len(out.Artifacts) > 0 {
		content, err := d.storeArtifacts(ctx, e, res.Content, out.Artifacts)
		if err != nil {
			return err
		}
		res.Content = content
	}
	return d.returned(ctx, e, res)
}

// returned captures a raw result and commits it (entry raw_completed,
// tool.returned) before any result middleware runs (REFERENCE §4.2 step
// 6): from here on no crash, failed processing or resume calls the tool
// again. The caller's loop (runEntry) processes it next; tool.processed
// commits with the next boundary. A drive cancelled meanwhile skips the
// commit: interrupted() commits the raw result with the cancel.
func (d *driver) returned(ctx context.Context, e *ToolEntry, raw model.ToolResult) error {
	if err := d.setToolStatus(e, TevReturn); err != nil {
		return err
	}
	e.RawResult = &raw
	EndToolSpan(e, d.r.cfg.NowFunc(), SpanSucceeded, nil)
	d.endTool(e, ToolOutcomeReturned, &raw, nil)
	d.record(journal.KindToolReturned, raw, e)
	if ctx.Err() != nil {
		return nil
	}
	if err := d.commit(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// processTool applies result middleware to the raw result and spills a
// long result into an artifact. The raw result is already committed
// (returned), so should the spill fail, a resume processes it again
// instead of calling the tool again.
func (d *driver) processTool(ctx context.Context, e *ToolEntry) error {
	res := *e.RawResult
	res.Content = applyToContent(d.b.resultMW[e.Call.Name], res.Content)
	content, err := d.spill(ctx, e, res.Content)
	if err != nil {
		return err
	}
	if err := d.setToolStatus(e, TevProcess); err != nil {
		return err
	}
	res.Content = content
	e.Result = &res
	d.record(journal.KindToolProcessed, res, e)
	d.event(EventToolCallComplete, e.Call, e)
	d.event(EventToolResult, PublicToolResult(res), e)
	return nil
}

// toolFailed handles a failed attempt per replay policy (REFERENCE §4.2).
func (d *driver) toolFailed(ctx context.Context, e *ToolEntry, f *tool.Failure) error {
	// "failed": a declared transient failure known not to have taken
	// effect (REFERENCE §2.4); anything else may have.
	outcome := "unknown"
	if f.Transient && !f.MayHaveRun {
		outcome = "failed"
	}
	d.record(journal.KindToolFailed, map[string]any{"type": f.Type, "message": f.Message, "outcome": outcome}, e)
	action := ToolFailureAction(e, f)
	span := SpanFailed
	if action == FailUncertain {
		span = SpanUncertain
	}
	EndToolSpan(e, d.r.cfg.NowFunc(), span, &RunError{Type: f.Type, Message: f.Message})
	d.endTool(e, toolOutcome(span), nil, &RunError{Type: f.Type, Message: f.Message})
	retry := e.Retry
	if retry == nil {
		retry = &tool.DefaultRetry
	}
	switch action {
	case FailErrorResult:
		return d.returned(ctx, e, model.ToolResult{ToolCallID: e.Call.ID, Content: tool.TextContent(ToolErrorText(f.Message)), IsError: true})
	case FailUncertain:
		if err := d.setToolStatus(e, TevUnknown); err != nil {
			return err
		}
		d.event(EventRecoveryRequired, map[string]any{"execution_key": e.ExecutionKey, "call": e.Call}, e)
		return nil
	case FailRetry:
		if err := d.setToolStatus(e, TevRetry); err != nil {
			return err
		}
		wait := model.Backoff(e.Attempt, retry.BackoffSeconds, retry.MaxBackoffSeconds, 0, d.r.cfg.RandFunc)
		SetToolSpanWait(e, wait)
		d.event(EventWaiting, map[string]any{"on": "tool", "seconds": journal.Float(wait.Seconds())}, e)
		if err := d.commit(ctx); err != nil {
			return err
		}
		var err error
		d.unlocked(func() { err = d.r.cfg.SleepFunc(ctx, wait) })
		return err
	default:
		return &commandError{typ: f.Type, msg: f.Message}
	}
}

// storeArtifacts stores the files a tool returned as content-addressed
// artifacts, records them in the state's extensions (artifacts.results,
// keyed by execution key) and, for text content, appends one
// `[artifact://<sha256> <media type>, <n> bytes]` line per file, so the
// model and the journal carry references, never host paths.
func (d *driver) storeArtifacts(ctx context.Context, e *ToolEntry, content json.RawMessage, arts []tool.Artifact) (json.RawMessage, error) {
	refs := make([]ArtifactRef, 0, len(arts))
	for _, a := range arts {
		key, err := d.putArtifact(ctx, a.Data)
		if err != nil {
			return nil, err
		}
		refs = append(refs, ArtifactRef{Key: key, MediaType: a.MediaType, Size: len(a.Data)})
	}
	RecordArtifacts(d.st, e.ExecutionKey, refs)
	return AttachArtifacts(content, refs), nil
}

// cmdFinish ends the run as completed (pure).
func (d *driver) cmdFinish() {
	st := d.st
	out := FinishRun(st)
	d.event(EventTurnComplete, out, nil)
	d.event(EventRunResult, st.resultData(), nil)
}

// failRun ends the run as failed (resumable) and commits it.
func (d *driver) failRun(ctx context.Context, typ, msg string) error {
	st := d.st
	if err := d.setStatus(EvFail); err != nil {
		return err
	}
	st.Error = &RunError{Type: typ, Message: msg}
	d.event(EventError, msg, nil)
	d.record(journal.KindCommandFailed, map[string]any{"phase": st.Phase, "type": typ, "message": msg}, nil)
	d.event(EventRunResult, st.resultData(), nil)
	return d.commit(ctx)
}

// interrupted handles a cancelled drive: a requested cancel or the session
// deadline ends the run as cancelled; a shutdown leaves storage as it is.
func (d *driver) interrupted(ctx context.Context) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, errShutdown) || errors.Is(cause, errStop) || errors.Is(cause, errLeaseLost) {
		return nil
	}
	st := d.st
	now := d.r.cfg.NowFunc()
	if st.Phase == PhaseModel && st.ModelAttemptOpen {
		d.record(journal.KindModelInterrupted, map[string]any{"outcome": "incomplete"}, nil)
		EndModelSpan(st, now, SpanCancelled, nil)
		d.endChat(nil, errInterruptedSpan)
	}
	for i := range st.Tools {
		e := &st.Tools[i]
		if e.Status == ToolStarted {
			if e.Policy == tool.PolicyManual {
				_ = d.setToolStatus(e, TevUnknown)
				EndToolSpan(e, now, SpanUncertain, nil)
			}
			EndToolSpan(e, now, SpanCancelled, nil)
			d.endTool(e, ToolOutcomeUncertain, nil, InterruptedCall())
			d.record(journal.KindToolInterrupted, map[string]any{"outcome": "unknown", "status": e.Status}, e)
		}
	}
	if errors.Is(cause, errDeadline) {
		d.cancelState("timeout", &RunError{Type: "TimeoutError", Message: "Session duration limit exceeded"})
	} else {
		d.cancelState("cancelled", nil)
	}
	return d.commit(context.WithoutCancel(ctx))
}

// cancelState ends the run as cancelled; open tool calls are answered so
// the conversation stays well-formed.
func (d *driver) cancelState(stopReason string, runErr *RunError) {
	cancelState(d.st, stopReason, runErr)
	d.event(EventRunResult, d.st.resultData(), nil)
}

func cancelState(st *RunState, stopReason string, runErr *RunError) {
	st.Status = StatusCancelled
	st.StopReason = ptr(stopReason)
	st.Error = runErr
	if st.Phase == PhaseTools && len(st.Tools) > 0 && callsOpen(st) {
		blocks := make([]model.ContentBlock, 0, len(st.Tools))
		for i := range st.Tools {
			e := &st.Tools[i]
			if e.Result != nil {
				blocks = append(blocks, model.ContentBlock{Type: model.BlockToolResult, ToolUseID: e.Call.ID, Content: e.Result.Content, IsError: e.Result.IsError})
				continue
			}
			blocks = append(blocks, model.ContentBlock{Type: model.BlockToolResult, ToolUseID: e.Call.ID,
				Content: tool.TextContent("Run cancelled; execution outcome may be unknown."), IsError: true})
		}
		st.Messages = append(st.Messages, model.Message{Role: model.RoleUser, Content: blocks})
	}
	if st.Output == nil {
		st.Output = ptr("")
	}
}

// callsOpen reports whether the step's tool calls still wait for their
// answers: the conversation ends with the assistant's turn that made them
// (a cancel answers them once; aborting an uncertain call of a cancelled
// run must not answer them again).
func callsOpen(st *RunState) bool {
	return len(st.Messages) > 0 && st.Messages[len(st.Messages)-1].Role == model.RoleAssistant
}

// userMessage turns a submitted message (a JSON string or content blocks)
// into a user message.
func userMessage(raw json.RawMessage) (model.Message, error) {
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		if strings.TrimSpace(text) == "" {
			return model.Message{}, fmt.Errorf("%w: message is empty", ErrInvalidMessage)
		}
		return model.TextMessage(model.RoleUser, text), nil
	}
	var blocks []model.ContentBlock
	if err := json.Unmarshal(raw, &blocks); err != nil || len(blocks) == 0 {
		return model.Message{}, fmt.Errorf("%w: message must be a string or a non-empty array of content blocks", ErrInvalidMessage)
	}
	for i, b := range blocks {
		if b.Type != model.BlockText || b.Text == "" {
			return model.Message{}, fmt.Errorf("%w: content block %d must be a non-empty text block", ErrInvalidMessage, i)
		}
	}
	return model.Message{Role: model.RoleUser, Content: blocks}, nil
}

// applyToContent applies middleware to every string in a result's content.
func applyToContent(mws []agent.Middleware, content json.RawMessage) json.RawMessage {
	if len(mws) == 0 {
		return content
	}
	dec := json.NewDecoder(strings.NewReader(string(content)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return content
	}
	return mustJSON(walkStrings(v, func(s string) string { return agent.ApplyAll(mws, s) }))
}

func walkStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		for i := range x {
			x[i] = walkStrings(x[i], f)
		}
	case map[string]any:
		for k := range x {
			x[k] = walkStrings(x[k], f)
		}
	}
	return v
}

// spill stores a tool result longer than the agent's max_result_chars as a
// content-addressed artifact and returns a preview that carries its
// artifact:// URI; the mapping result id → URI is kept in the state's
// extensions (result_spill), as the reference's result-spill extension does.
func (d *driver) spill(ctx context.Context, e *ToolEntry, content json.RawMessage) (json.RawMessage, error) {
	limit := d.b.def.MaxResultChars
	text, format, ok := SpillText(content, limit)
	if !ok {
		return content, nil
	}
	key, err := d.putArtifact(ctx, []byte(text))
	if err != nil {
		return nil, err
	}
	return SpillResult(d.st, e, text, format, key, "r_"+d.r.cfg.NewIDFunc(), limit), nil
}

// putArtifact stores data as an artifact of the run's session, waiting
// through a storage outage (untilStored), and returns its key.
func (d *driver) putArtifact(ctx context.Context, data []byte) (string, error) {
	var key string
	err := d.wait("store artifact", func() error {
		var err error
		key, err = d.r.putArtifact(ctx, d.st.SessionID, data)
		return err
	})
	return key, err
}
