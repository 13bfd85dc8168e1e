package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/runtime/rtstore"
)

// SubmitRun starts a run of a session and drives it in the background.
// The same request id with the same message returns the existing run
// (created=false). Errors: ErrNotFound, ErrInvalidMessage,
// ErrRequestConflict, ErrSessionBusy, ErrAgentMismatch.
func (r *Runtime) SubmitRun(ctx context.Context, p SubmitParams) (*RunResult, bool, error) {
	sess, err := r.ownedSession(ctx, p.SessionID)
	if err != nil {
		return nil, false, err
	}
	if _, err := userMessage(p.Message); err != nil {
		return nil, false, err
	}
	b, err := r.bindSession(sess)
	if err != nil {
		return nil, false, err
	}
	requestID := p.RequestID
	if requestID == "" {
		requestID = r.cfg.NewIDFunc()
	}
	digest := messageDigest(p.Message)
	release, err := r.takeSubmitTurn(ctx, sess.ID)
	if err != nil {
		return nil, false, err
	}
	defer release()
	lease, err := r.lockSession(ctx, sess.ID)
	if errors.Is(err, ErrSessionBusy) {
		// The session is driven right now; an idempotent re-submission of
		// that very run still answers with it.
		if run, ok, ferr := r.findSubmitted(ctx, sess.ID, requestID, digest); ferr != nil || ok {
			return run, false, ferr
		}
	}
	if err != nil {
		return nil, false, err
	}
	var history []model.Message
	if sess.LastRunID != "" {
		prev, err := r.loadState(ctx, sess.LastRunID)
		if err != nil {
			_ = lease.Release(ctx)
			return nil, false, err
		}
		history = prev.Messages
	}
	now := r.cfg.NowFunc().UTC()
	st := &RunState{
		Version: 1, SessionID: sess.ID, RunID: r.cfg.NewIDFunc(), RequestID: requestID,
		Message: p.Message, Messages: append([]model.Message{}, history...), Metadata: json.RawMessage(`{}`),
		Phase: PhaseStart, Status: StatusRunning, Durable: true, Recording: sess.Recording,
		Stream: p.Stream, Tools: []ToolEntry{}, Extensions: map[string]any{},
	}
	st.Agent.Name, st.Agent.Version = sess.AgentName, sess.AgentVersion
	d := r.newDriver(b, st, lease)
	initial := st.Messages
	if initial == nil {
		initial = []model.Message{}
	}
	started := map[string]any{
		"message": p.Message, "initial_messages": initial, "agent": st.Agent, "config": b.config,
	}
	startedMCP(started, sess)
	d.record(journal.KindRunStarted, started, nil)
	cm := d.build()
	// The attempt's span, a child of the request's, is saved with the run.
	d.span = r.tracing.startAgent(ctx, st, "", false)
	var row *rtstore.RunRow
	var created bool
	err = d.apply(withSpan(ctx, d.span), func(ctx context.Context) error {
		var err error
		row, created, err = r.store.RunInsert(ctx, &rtstore.RunInsertParams{
			Run: rtstore.RunRow{
				ID: st.RunID, SessionID: sess.ID, RequestID: requestID, MessageDigest: digest,
				Status: st.Status, Phase: string(st.Phase), State: cm.State, CreatedAt: now, UpdatedAt: now,
				TraceContext: traceContextOf(d.span),
			},
			Commit: cm,
		})
		return err
	})
	if err != nil || !created {
		_ = lease.Release(ctx)
		// No attempt started: a duplicate submission answers with the
		// run it repeats.
		endSpan(d.span, err)
		if err != nil {
			return nil, false, fmt.Errorf("submit run: %w", err)
		}
		res, err := runView(row)
		return res, false, err
	}
	r.launch(d)
	res, err := runView(row)
	return res, true, err
}

// launch registers and starts a driver.
func (r *Runtime) launch(d *driver) {
	r.mu.Lock()
	r.active[d.st.SessionID] = d
	r.driving[d.st.RunID] = struct{}{}
	r.mu.Unlock()
	d.start()
}

// lockSession takes the session's ownership for this process.
func (r *Runtime) lockSession(ctx context.Context, sessionID string) (rtstore.Lease, error) {
	r.mu.Lock()
	_, driving := r.active[sessionID]
	stopping := r.stopping
	r.mu.Unlock()
	if driving || stopping {
		return nil, fmt.Errorf("session %s: %w", sessionID, ErrSessionBusy)
	}
	lease, err := r.store.SessionLock(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("lock session: %w", err)
	}
	return lease, nil
}

// submitTurn serializes the submissions of one session in this process
// (SubmitRun): a re-submission racing the one it repeats (a client retrying
// while its first try is in flight) waits until that one has inserted its
// run, and then answers with it instead of session_busy.
type submitTurn struct {
	ch      chan struct{} // holds a token while a submission has the turn
	waiters int           // submissions holding or awaiting the turn
}

// takeSubmitTurn waits for the session's submission turn, or for ctx.
func (r *Runtime) takeSubmitTurn(ctx context.Context, sessionID string) (release func(), err error) {
	r.mu.Lock()
	t := r.submits[sessionID]
	if t == nil {
		t = &submitTurn{ch: make(chan struct{}, 1)}
		r.submits[sessionID] = t
	}
	t.waiters++
	r.mu.Unlock()
	leave := func() {
		r.mu.Lock()
		if t.waiters--; t.waiters == 0 {
			delete(r.submits, sessionID)
		}
		r.mu.Unlock()
	}
	select {
	case t.ch <- struct{}{}:
		return func() { <-t.ch; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// findSubmitted is findRequest for a submission that found the session
// busy. When another process holds the session, it may be between locking
// it and inserting the very run this one repeats, so a request not found
// yet is looked for again, briefly (300 ms in all). A session driven here
// has its run inserted already (submitTurn).
func (r *Runtime) findSubmitted(ctx context.Context, sessionID, requestID, digest string) (*RunResult, bool, error) {
	r.mu.Lock()
	_, here := r.active[sessionID]
	r.mu.Unlock()
	waits := []time.Duration{0, 20 * time.Millisecond, 80 * time.Millisecond, 200 * time.Millisecond}
	if here {
		waits = waits[:1]
	}
	for _, wait := range waits {
		if err := r.cfg.SleepFunc(ctx, wait); err != nil {
			return nil, false, err
		}
		if run, ok, err := r.findRequest(ctx, sessionID, requestID, digest); err != nil || ok {
			return run, ok, err
		}
	}
	return nil, false, nil
}

func (r *Runtime) findRequest(ctx context.Context, sessionID, requestID, digest string) (*RunResult, bool, error) {
	var after int64
	for {
		rows, err := r.store.RunList(ctx, sessionID, rtstore.ListParams{After: after, Limit: 500})
		if err != nil {
			return nil, false, fmt.Errorf("list runs: %w", err)
		}
		for _, row := range rows {
			if row.RequestID == requestID {
				if row.MessageDigest != digest {
					return nil, false, ErrRequestConflict
				}
				res, err := runView(row)
				return res, true, err
			}
			after = row.Seq
		}
		if len(rows) < 500 {
			return nil, false, nil
		}
	}
}

// bindSession binds the session's agent and refuses a changed definition.
func (r *Runtime) bindSession(sess *rtstore.SessionRow) (*binding, error) {
	b, err := r.bindRef(sess.AgentName, sess.AgentVersion)
	if err != nil {
		return nil, publicErr(ErrAgentMismatch, "the session's agent is no longer registered")
	}
	if !jsonEqual(b.config, sess.AgentConfig) {
		return nil, publicErr(ErrAgentMismatch, "Agent configuration differs from persisted session")
	}
	return r.withMCP(b, sess)
}

func (r *Runtime) loadState(ctx context.Context, runID string) (*RunState, error) {
	row, err := r.store.RunGet(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	return decodeState(row.State)
}

func decodeState(raw json.RawMessage) (*RunState, error) {
	var st RunState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("decode run state: %w", err)
	}
	return &st, nil
}

// ownedRun returns a run whose session the calling principal owns.
func (r *Runtime) ownedRun(ctx context.Context, runID string) (*rtstore.RunRow, error) {
	row, err := r.store.RunGet(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("run: %w", r.gone(ctx, rtstore.TombstoneRun, runID, err))
	}
	if _, err := r.ownedSessionKey(ctx, row.SessionID); err != nil {
		return nil, err
	}
	return row, nil
}

// GetRun returns a run. Errors: ErrNotFound.
func (r *Runtime) GetRun(ctx context.Context, runID string) (*RunResult, error) {
	row, err := r.ownedRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	return runView(row)
}

// WaitRun returns the run once it is no longer running, or after d.
func (r *Runtime) WaitRun(ctx context.Context, runID string, d time.Duration) (*RunResult, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	// Only a commit that leaves the run not running (or its driver's end,
	// or another process's notification) can end the wait, so commits
	// that keep it running do not cost a read; WatchPoll bounds the wait
	// for writers this process hears nothing from.
	poll := time.NewTimer(r.cfg.WatchPoll)
	defer poll.Stop()
	for {
		ch, unwatch := r.settled.watch(runID)
		res, err := r.GetRun(ctx, runID)
		if err != nil || res.Status != StatusRunning {
			unwatch()
			return res, err
		}
		select {
		case <-ch:
		case <-poll.C:
			poll.Reset(r.cfg.WatchPoll)
		case <-deadline.C:
			unwatch()
			return r.GetRun(ctx, runID)
		case <-ctx.Done():
			unwatch()
			return nil, ctx.Err()
		}
		unwatch()
	}
}

// ListRuns pages a session's runs.
func (r *Runtime) ListRuns(ctx context.Context, sessionID string, p ListParams) (Page[RunResult], error) {
	sess, err := r.ownedSession(ctx, sessionID)
	if err != nil {
		return Page[RunResult]{}, err
	}
	after, limit, err := pageParams(p)
	if err != nil {
		return Page[RunResult]{}, err
	}
	rows, err := r.store.RunList(ctx, sess.ID, rtstore.ListParams{After: after, Limit: limit + 1})
	if err != nil {
		return Page[RunResult]{}, fmt.Errorf("list runs: %w", err)
	}
	page := Page[RunResult]{Items: []RunResult{}}
	for i, row := range rows {
		if i == limit {
			page.NextCursor = strconv.FormatInt(rows[i-1].Seq, 10)
			break
		}
		res, err := runView(row)
		if err != nil {
			return Page[RunResult]{}, err
		}
		page.Items = append(page.Items, *res)
	}
	return page, nil
}

// ListEvents returns up to limit events with cursor > after.
func (r *Runtime) ListEvents(ctx context.Context, runID string, after int64, limit int) ([]RunEvent, error) {
	if _, err := r.ownedRun(ctx, runID); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	evs, err := r.store.EventListAfter(ctx, runID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return evs, nil
}

func runView(row *rtstore.RunRow) (*RunResult, error) {
	st, err := decodeState(row.State)
	if err != nil {
		return nil, err
	}
	p := st.pending()
	if p == nil {
		p = []PendingTool{}
	}
	return &RunResult{
		SessionID: SessionIDOf(row.SessionID), RunID: row.ID, Output: st.Output, Status: row.Status,
		StopReason: st.StopReason, Usage: st.Usage, Error: st.Error, Pending: p,
		UsageIncomplete: st.UsageIncomplete, CreatedAt: row.CreatedAt.UTC(), UpdatedAt: row.UpdatedAt.UTC(),
	}, nil
}

// putArtifact stores bytes content-addressed, linked to the session, and
// returns the key.
func (r *Runtime) putArtifact(ctx context.Context, sessionID string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	key := hex.EncodeToString(sum[:])
	if err := r.store.ArtifactPut(context.WithoutCancel(ctx), sessionID, key, data); err != nil {
		return "", fmt.Errorf("store artifact: %w", err)
	}
	return key, nil
}
