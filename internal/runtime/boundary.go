package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// This file holds THE boundary helper: every state change of a run reaches
// storage through committer.commit, which writes the new state, the public
// events, the journal records and one checkpoint record in one transaction.

// committer accumulates one boundary and commits it. Records and events
// that failed to commit are retained with their IDs and re-sent with the
// next commit, so a boundary is never inserted twice.
type committer struct {
	r     *Runtime
	st    *RunState
	lease rtstore.Lease

	records []journal.Record
	events  []rtstore.PendingEvent
	kinds   []journal.Kind
	// toolStatus is each entry's status at the last commit (tool rows are
	// written only when it changes).
	toolStatus map[string]ToolStatus
	// stashed are rows of entries of an earlier step not yet committed.
	stashed []rtstore.ToolRow
	// spans is stepSpans of the state at the last commit.
	spans string
	// wait, when set, carries a commit through a storage outage: it runs
	// the commit's tries again while they fail with ErrUnavailable
	// (driver.untilStored). Unset, the error goes back to the caller (a
	// request, which answers it).
	wait func(what string, op func() error) error
	// traceContext, when set, is saved with the next commit as the run's
	// trace context (a resume's new invoke_agent span).
	traceContext string
}

// record adds a boundary record of kind with payload; e ties it to a tool
// entry (execution key, entry attempt). Kinds are tracked even when the run
// does not record (for the crash hook); payloads are encoded only when it does.
func (c *committer) record(kind journal.Kind, payload any, e *ToolEntry) {
	c.kinds = append(c.kinds, kind)
	if !c.st.Recording {
		return
	}
	c.records = append(c.records, c.newRecord(kind, mustJSON(payload), e))
}

func (c *committer) newRecord(kind journal.Kind, payload json.RawMessage, e *ToolEntry) journal.Record {
	rec := journal.Record{
		Version:    1,
		ID:         c.r.cfg.NewIDFunc(),
		Kind:       kind,
		RecordedAt: journal.Timestamp(c.r.cfg.NowFunc()),
		SessionID:  SessionIDOf(c.st.SessionID),
		RunID:      c.st.RunID,
		StepID:     c.st.stepID(),
		AttemptID:  itoa(c.st.Attempt),
		Payload:    payload,
	}
	if e != nil {
		rec.AttemptID = itoa(e.Attempt)
		rec.ExecutionKey = ptr(e.ExecutionKey)
	}
	return rec
}

// event adds a public event; e ties it to a tool entry's attempt. Event
// data is always post-middleware.
func (c *committer) event(typ string, data any, e *ToolEntry) {
	c.events = append(c.events, c.newEvent(typ, data, e))
}

// newEvent builds the pending event of event (with its mirror record for
// a recording run) without adding it to the boundary.
func (c *committer) newEvent(typ string, data any, e *ToolEntry) rtstore.PendingEvent {
	ev := rtstore.RunEvent{
		Type:      typ,
		Data:      mustJSON(data),
		SessionID: SessionIDOf(c.st.SessionID),
		RunID:     c.st.RunID,
		StepID:    c.st.stepID(),
		AttemptID: itoa(c.st.Attempt),
		EventID:   c.r.cfg.NewIDFunc(),
	}
	if e != nil {
		ev.AttemptID = itoa(e.Attempt)
	}
	pe := rtstore.PendingEvent{Event: ev}
	if c.st.Recording {
		// The mirror record takes step/attempt from the run state.
		rec := c.newRecord(journal.KindEvent, nil, nil)
		pe.Record = &rec
	}
	return pe
}

// changedTools returns the tool rows of entries whose status changed
// since the last commit.
func (c *committer) changedTools() []rtstore.ToolRow {
	if c.toolStatus == nil {
		c.toolStatus = map[string]ToolStatus{}
	}
	var rows []rtstore.ToolRow
	for i := range c.st.Tools {
		e := &c.st.Tools[i]
		if c.toolStatus[e.ExecutionKey] == e.Status {
			continue // unchanged since the last commit
		}
		rows = append(rows, rtstore.ToolRow{
			ExecutionKey: e.ExecutionKey,
			HasOutcome:   e.RawResult != nil || e.Result != nil,
			Payload:      mustJSON(e),
		})
	}
	return rows
}

// stashTools keeps the rows of changed entries before the state drops
// them (a new step), so the next commit still writes their outcome.
func (c *committer) stashTools() {
	rows := c.changedTools()
	c.stashed = append(c.stashed, rows...)
	for _, r := range rows {
		c.toolStatus[r.ExecutionKey] = "" // written by the stash, not again
	}
}

// stepSpans identifies the state of the current step's model attempts.
func stepSpans(st *RunState) string {
	n := len(st.ModelAttempts)
	if n == 0 {
		return ""
	}
	return itoa(st.Iterations) + ":" + itoa(n) + ":" + st.ModelAttempts[n-1].Outcome
}

// stepSpansChanged reports whether the step's model attempts changed since
// the last commit (its steps row is stale).
func (c *committer) stepSpansChanged() bool {
	s := stepSpans(c.st)
	return s != "" && s != c.spans
}

// hasPending reports whether boundaries or events await a commit.
func (c *committer) hasPending() bool { return len(c.kinds) > 0 || len(c.events) > 0 }

// build returns the Commit of everything accumulated plus a fresh checkpoint.
func (c *committer) build() *rtstore.Commit {
	records := c.records
	if c.st.Recording {
		cp := c.newRecord(journal.KindCheckpoint, mustJSON(c.st.checkpointPayload()), nil)
		records = append(records[:len(records):len(records)], cp)
	}
	tools := append(c.stashed[:len(c.stashed):len(c.stashed)], c.changedTools()...)
	return &rtstore.Commit{
		SessionID: c.st.SessionID,
		RunID:     c.st.RunID,
		Lease:     c.lease,
		Status:    c.st.Status,
		Phase:     string(c.st.Phase),
		State:     mustJSON(c.st),
		StepID:    c.st.stepID(),
		Step:      mustJSON(c.st.stepPayload()),
		Tools:     tools,
		Records:   records,
		Events:    c.events,
		Snapshot:  c.st.Status != StatusRunning,

		TraceContext: c.traceContext,
	}
}

// commit writes the accumulated boundary in one transaction, retrying a
// transient failure a few times with the same record IDs (and, with
// c.wait, for as long as storage is unavailable). It ignores cancellation
// of ctx (a boundary whose effect happened must not be lost) but bounds
// each try by the commit timeout. On failure the records and events stay
// pending; the error wraps ErrRecording for a recording run.
func (c *committer) commit(ctx context.Context) error {
	cm := c.build()
	return c.apply(ctx, func(ctx context.Context) error { return c.r.store.Commit(ctx, cm) })
}

// apply runs write (a commit of c's boundary) with retries and, on
// success, clears the pending boundary and runs the after-commit hooks.
func (c *committer) apply(ctx context.Context, write func(context.Context) error) error {
	ctx, span := c.r.tracing.startCommit(ctx, c.st, c.kinds)
	err := c.write(ctx, write)
	endSpan(span, err)
	if err != nil {
		return err
	}
	kinds := c.kinds
	c.records, c.events, c.kinds, c.stashed = nil, nil, nil, nil
	c.traceContext = ""
	for i := range c.st.Tools {
		c.toolStatus[c.st.Tools[i].ExecutionKey] = c.st.Tools[i].Status
	}
	c.spans = stepSpans(c.st)
	c.r.notify.wake(c.st.RunID)
	if c.st.Status != StatusRunning {
		c.r.settled.wake(c.st.RunID)
	}
	if c.r.cfg.CheckpointFunc != nil {
		c.r.cfg.CheckpointFunc(SessionIDOf(c.st.SessionID), c.st.RunID, c.st.Status, c.st.Phase)
	}
	if c.r.cfg.AfterCommitFunc != nil && len(kinds) > 0 {
		c.r.cfg.AfterCommitFunc(kinds)
	}
	return nil
}

// write runs write, a commit, with the commit's tries: a transient
// failure is tried again a few times and, with c.wait, for as long as
// storage is unavailable. Each try is bounded by the commit timeout and
// ignores cancellation of ctx. The error wraps ErrRecording for a
// recording run.
func (c *committer) write(ctx context.Context, write func(context.Context) error) error {
	base := context.WithoutCancel(ctx)
	tries := func() error {
		var err error
		for try := 1; try <= c.r.cfg.CommitAttempts; try++ {
			tctx, cancel := context.WithTimeout(base, c.r.cfg.CommitTimeout)
			err = write(tctx)
			cancel()
			if err == nil {
				break
			}
			if errors.Is(err, rtstore.ErrLeaseLost) || errors.Is(err, rtstore.ErrRecordConflict) ||
				errors.Is(err, rtstore.ErrForeignRecord) || errors.Is(err, rtstore.ErrNotFound) ||
				errors.Is(err, rtstore.ErrSessionBusy) || errors.Is(err, rtstore.ErrRequestConflict) {
				break
			}
			if try < c.r.cfg.CommitAttempts {
				_ = c.r.cfg.SleepFunc(base, time.Duration(try)*50*time.Millisecond)
			}
		}
		return err
	}
	var err error
	if c.wait != nil {
		err = c.wait("commit", tries)
	} else {
		err = tries()
	}
	if err != nil {
		if c.st.Recording {
			return fmt.Errorf("%w: commit run %s: %w", ErrRecording, c.st.RunID, err)
		}
		return fmt.Errorf("commit run %s: %w", c.st.RunID, err)
	}
	return nil
}

// mustJSON encodes values the runtime built itself; a failure is a bug.
func mustJSON(v any) json.RawMessage {
	if raw, ok := v.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("runtime: encode %T: %v", v, err))
	}
	return b
}
