package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"hxd/internal/runtime/rtstore"
)

// Boundary SQL besides runs, sessions, journal and events.
const (
	sqlSnapshotUpsert = `INSERT INTO snapshots (session_id, payload) VALUES (?, ?)
ON CONFLICT (session_id) DO UPDATE SET payload = excluded.payload`
	sqlStepUpsert = `INSERT INTO steps (run_id, id, payload) VALUES (?, ?, ?)
ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload`
	sqlApprovalUpsert = `INSERT INTO approvals (run_id, id, payload) VALUES (?, ?, ?)
ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload`
	sqlToolOutcomeUpsert = `INSERT INTO tool_outcomes (run_id, id, payload) VALUES (?, ?, ?)
ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload`
)

// Commit writes one boundary in one transaction: run status, phase and
// state (a nil State keeps the stored one), the session's latest run, the
// session snapshot (when Snapshot is set), the step row (when Step is set), tool rows (into
// tool_outcomes when HasOutcome, else approvals), journal records (seq
// MAX+1 per run in list order; a known id with identical content is
// skipped) and events (cursor MAX+1 per run; a known event id is skipped
// with its record) with their records. On success it sets every
// c.Events[i].Event.Cursor (a skipped event gets its stored cursor).
//
// Returns ErrLeaseLost if c.Lease is not a live lease of this Store for
// c.SessionID; ErrNotFound for an unknown run or a run of another session;
// ErrForeignRecord for a record of another run; ErrRecordConflict for a
// known record id with different content; ErrUnavailable when the database
// stays locked. On any error nothing is written.
func (s *Store) Commit(ctx context.Context, c *rtstore.Commit) error {
	if c == nil {
		return errors.New("commit: nil commit")
	}
	op := "commit run " + c.RunID
	release, err := s.fence(c.Lease, c.SessionID)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer release()
	var cursors []string
	seq := s.seqs.get(c)
	err = s.inTx(ctx, op, func(ctx context.Context, t *txn) error {
		var err error
		t.seq = seq
		cursors, err = t.applyCommit(ctx, c, now())
		seq = t.seq
		return err
	})
	if err != nil {
		s.seqs.forget(c.RunID)
		return err
	}
	s.seqs.put(c, seq)
	setCursors(c, cursors)
	return nil
}

// runSeqs are a run's last journal and event seq; -1 when unknown.
type runSeqs struct {
	token          string
	journal, event int64
}

// seqCache remembers each run's last seqs between the commits of one
// lease, sparing two MAX(seq) reads per commit. Only the lease holder
// writes a run's journal and events, so the values stay true for as long
// as the same lease commits; any failure forgets them.
type seqCache struct {
	mu   sync.Mutex
	runs map[string]runSeqs
}

func (c *seqCache) get(cm *rtstore.Commit) runSeqs {
	unknown := runSeqs{journal: -1, event: -1}
	if cm.Lease == nil {
		return unknown
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.runs[cm.RunID]; ok && v.token == cm.Lease.Token() {
		return v
	}
	return unknown
}

func (c *seqCache) put(cm *rtstore.Commit, v runSeqs) {
	if cm.Lease == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]runSeqs{}
	}
	if len(c.runs) > 10000 {
		clear(c.runs) // bounded: a cold entry costs two reads
	}
	v.token = cm.Lease.Token()
	c.runs[cm.RunID] = v
}

func (c *seqCache) forget(runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.runs, runID)
}

// setCursors writes the cursors assigned in a committed transaction back
// into the commit's events.
func setCursors(c *rtstore.Commit, cursors []string) {
	for i := range cursors {
		c.Events[i].Event.Cursor = cursors[i]
	}
}

// applyCommit writes c inside t and returns the cursor of each event.
func (t *txn) applyCommit(ctx context.Context, c *rtstore.Commit, ts time.Time) ([]string, error) {
	s := t.s
	if c.Status == "" {
		return nil, errors.New("empty run status")
	}
	// Reject foreign records before writing anything.
	for i := range c.Records {
		if c.Records[i].RunID != c.RunID {
			return nil, foreignRecord(c.Records[i].ID, c.Records[i].RunID, c.RunID)
		}
	}
	for i := range c.Events {
		if r := c.Events[i].Record; r != nil && r.RunID != c.RunID {
			return nil, foreignRecord(r.ID, r.RunID, c.RunID)
		}
	}

	var state any // NULL keeps the stored state
	if c.State != nil {
		state = string(c.State)
	}
	n, err := t.exec(ctx, "update run", s.ws.runUpdate, string(c.Status), c.Phase, state, formatTime(ts), c.RunID, c.SessionID)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("run %s of session %s: %w", c.RunID, c.SessionID, rtstore.ErrNotFound)
	}
	if _, err := t.exec(ctx, "set latest run", s.ws.sessionLastRun, c.RunID, c.SessionID); err != nil {
		return nil, err
	}
	if c.State != nil && c.Snapshot {
		if _, err := t.exec(ctx, "upsert snapshot", s.ws.snapshotUpsert, c.SessionID, state); err != nil {
			return nil, err
		}
	}
	if c.Step != nil {
		if _, err := t.exec(ctx, "upsert step", s.ws.stepUpsert, c.RunID, c.StepID, string(c.Step)); err != nil {
			return nil, err
		}
	}
	for _, tr := range c.Tools {
		st, op := s.ws.approvalUpsert, "upsert approval"
		if tr.HasOutcome {
			st, op = s.ws.toolOutcomeUpsert, "upsert tool outcome"
		}
		if _, err := t.exec(ctx, op, st, c.RunID, tr.ExecutionKey, jsonOr(tr.Payload, "null")); err != nil {
			return nil, err
		}
	}

	j := journalAppender{t: t, runID: c.RunID, last: t.seq.journal}
	defer func() { t.seq.journal = j.last }()
	for i := range c.Records {
		if err := j.append(ctx, c.Records[i]); err != nil {
			return nil, err
		}
	}

	if len(c.Events) == 0 {
		return nil, nil
	}
	cursors := make([]string, len(c.Events))
	e := eventAppender{t: t, runID: c.RunID, last: t.seq.event}
	defer func() { t.seq.event = e.last }()
	for i := range c.Events {
		pe := &c.Events[i]
		payload, cursor, inserted, err := e.append(ctx, pe.Event)
		if err != nil {
			return nil, err
		}
		cursors[i] = cursor
		if !inserted || pe.Record == nil {
			continue
		}
		rec := *pe.Record
		rec.Payload = payload
		if err := j.append(ctx, rec); err != nil {
			return nil, err
		}
	}
	return cursors, nil
}

// foreignRecord is the ErrForeignRecord of a record.
func foreignRecord(id, recordRun, commitRun string) error {
	return fmt.Errorf("journal record %s of run %s in a commit of run %s: %w", id, recordRun, commitRun, rtstore.ErrForeignRecord)
}

// formatCursor renders an event seq as its public cursor.
func formatCursor(seq int64) string { return strconv.FormatInt(seq, 10) }
