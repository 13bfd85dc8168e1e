package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
)

// Boundary SQL besides runs, sessions, journal and events. An upsert of
// an unchanged payload writes nothing (the WHERE of DO UPDATE), sparing the
// table's page in the WAL.
const (
	sqlSnapshotUpsert = `INSERT INTO snapshots (session_id, payload) VALUES (?, ?)
ON CONFLICT (session_id) DO UPDATE SET payload = excluded.payload WHERE payload IS NOT excluded.payload`
	sqlStepUpsert = `INSERT INTO steps (run_id, id, payload) VALUES (?, ?, ?)
ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload WHERE payload IS NOT excluded.payload`
	sqlApprovalUpsert = `INSERT INTO approvals (run_id, id, payload) VALUES (?, ?, ?)
ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload WHERE payload IS NOT excluded.payload`
	sqlToolOutcomeUpsert = `INSERT INTO tool_outcomes (run_id, id, payload) VALUES (?, ?, ?)
ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload WHERE payload IS NOT excluded.payload`
)

// Commit writes one boundary in one transaction: run status, phase and
// state (a nil State keeps the stored one), the session's latest run, the
// session snapshot (when Snapshot is set), the step row (when Step is set), tool rows (into
// tool_outcomes when HasOutcome, else approvals), journal records (seq
// MAX+1 per run in list order; a known id with identical content is
// skipped) and events (cursor MAX+1 per run; a known event id is skipped
// with its record) with their records. On success it sets every
// c.Events[i].Event.Cursor (a skipped event gets its stored cursor). A
// DeltaOnly commit writes only its events and their records (applyDeltas).
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
	known := s.seqs.get(c)
	err = s.inCommitTx(ctx, op, func(ctx context.Context, t *txn) error {
		var err error
		t.seq = known
		cursors, err = t.applyCommit(ctx, c, now())
		if err == nil {
			known = t.seq
		}
		return err
	})
	if err != nil {
		s.seqs.Forget(c.RunID)
		return err
	}
	s.seqs.put(c, known)
	setCursors(c, cursors)
	return nil
}

// errKnownID is how a batched insert reports a known record or event id:
// the transaction is rolled back and done again one row at a time, which
// skips re-sent rows and detects conflicting ones.
var errKnownID = errors.New("known id in a batch")

// inCommitTx runs fn (a commit) in one transaction by inBoundaryTx; when fn's
// batched inserts meet a known id it runs fn again in a new transaction
// in row-by-row mode.
func (s *Store) inCommitTx(ctx context.Context, op string, fn func(ctx context.Context, t *txn) error) error {
	var known bool
	err := s.inBoundaryTx(ctx, op, func(ctx context.Context, t *txn) error {
		err := fn(ctx, t)
		known = errors.Is(err, errKnownID)
		return err
	})
	if !known {
		return err
	}
	return s.inBoundaryTx(ctx, op, func(ctx context.Context, t *txn) error {
		t.rowByRow = true
		return fn(ctx, t)
	})
}

// runSeqs are what a lease's commits know of a run: its last journal and
// event seq (-1 when unknown), its stored status ("" when unknown) and
// whether it is its session's latest run.
type runSeqs struct {
	journal, event int64
	runSeq         int64 // runs.seq of the run; 0 when unknown
	status         rtstore.RunStatus
	latest         bool // the run is its session's latest
}

// seqCache remembers each run's last seqs and status between the commits
// of one lease, sparing two last-seq reads, a sessions lookup and a
// runs_status index write per commit (rtstore.LeaseCache says why that is
// safe).
type seqCache struct{ storekit.SeqCache[runSeqs] }

// unknownSeqs makes the next commit read what it needs.
var unknownSeqs = runSeqs{journal: -1, event: -1}

// get returns cm's run's cached seqs, or unknownSeqs.
func (c *seqCache) get(cm *rtstore.Commit) runSeqs { return c.Known(cm, unknownSeqs) }

func (c *seqCache) put(cm *rtstore.Commit, v runSeqs) { c.Put(cm, v) }

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
	if c.DeltaOnly {
		return t.applyDeltas(ctx, c)
	}
	if c.Status == "" {
		return nil, errors.New("empty run status")
	}
	if err := rtstore.CheckTraceContext(c.TraceContext); err != nil {
		return nil, err
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
	runSeq := t.seq.runSeq
	if runSeq > 0 {
		// The seq is known: a plain exec, one row changed or none.
		var n int64
		var err error
		if t.seq.status == c.Status {
			n, err = t.exec(ctx, "update run", s.ws.runUpdateSameKnown, c.Phase, state, formatTime(ts), c.RunID, c.SessionID)
		} else {
			n, err = t.exec(ctx, "update run", s.ws.runUpdateKnown, string(c.Status), c.Phase, state, formatTime(ts), c.RunID, c.SessionID)
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("run %s of session %s: %w", c.RunID, c.SessionID, rtstore.ErrNotFound)
		}
	} else {
		var row scanner
		if t.seq.status == c.Status {
			row = t.queryRow(ctx, s.ws.runUpdateSame, c.Phase, state, formatTime(ts), c.RunID, c.SessionID)
		} else {
			row = t.queryRow(ctx, s.ws.runUpdate, string(c.Status), c.Phase, state, formatTime(ts), c.RunID, c.SessionID)
		}
		if err := row.Scan(&runSeq); errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("run %s of session %s: %w", c.RunID, c.SessionID, rtstore.ErrNotFound)
		} else if err != nil {
			return nil, s.mapErr(ctx, "update run", err)
		}
		t.seq.runSeq = runSeq
	}
	t.seq.status = c.Status
	if c.TraceContext != "" {
		if _, err := t.exec(ctx, "set trace context", s.ws.runTraceContext, c.TraceContext, c.RunID, c.SessionID); err != nil {
			return nil, err
		}
	}
	if !t.seq.latest {
		if _, err := t.exec(ctx, "set latest run", s.ws.sessionLastRun, c.RunID, c.SessionID); err != nil {
			return nil, err
		}
	}
	// No other run of the session can start before this one is finished.
	t.seq.latest = !c.Status.Finished()
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

	return t.appendJournal(ctx, c, runSeq)
}

// sqlRunSeqOf returns the seq of a run of the session named; no row for
// an unknown run or a run of another session.
const sqlRunSeqOf = `SELECT seq FROM runs WHERE id = ? AND session_id = ?`

// applyDeltas writes a DeltaOnly commit inside t: its events and their
// records, appended as applyCommit appends them, and nothing else (the
// run row, its state and the other tables stay as they are).
func (t *txn) applyDeltas(ctx context.Context, c *rtstore.Commit) ([]string, error) {
	if err := rtstore.CheckDeltaOnly(c); err != nil {
		return nil, err
	}
	for i := range c.Events {
		if r := c.Events[i].Record; r != nil && r.RunID != c.RunID {
			return nil, foreignRecord(r.ID, r.RunID, c.RunID)
		}
	}
	runSeq := t.seq.runSeq
	if runSeq <= 0 {
		err := t.queryRow(ctx, t.s.ws.runSeqOf, c.RunID, c.SessionID).Scan(&runSeq)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("run %s of session %s: %w", c.RunID, c.SessionID, rtstore.ErrNotFound)
		} else if err != nil {
			return nil, t.s.mapErr(ctx, "read run seq", err)
		}
		t.seq.runSeq = runSeq
	}
	return t.appendJournal(ctx, c, runSeq)
}

// appendJournal appends c's records and events to the run of seq runSeq,
// row by row or batched (t.rowByRow), and returns the events' cursors.
func (t *txn) appendJournal(ctx context.Context, c *rtstore.Commit, runSeq int64) ([]string, error) {
	j := journalAppender{t: t, runID: c.RunID, runSeq: runSeq, last: t.seq.journal}
	e := eventAppender{t: t, runID: c.RunID, runSeq: runSeq, last: t.seq.event}
	var (
		cursors []string
		err     error
	)
	if t.rowByRow {
		cursors, err = t.appendRows(ctx, c, &j, &e)
	} else {
		cursors, err = t.appendBatch(ctx, c, &j, &e)
	}
	if err != nil {
		return nil, err
	}
	t.seq.journal, t.seq.event = j.last, e.last
	return cursors, nil
}

// appendRows appends c's records and events one row at a time: a record
// whose id is stored with the same content is skipped, as is an event
// whose id is stored (and its record).
func (t *txn) appendRows(ctx context.Context, c *rtstore.Commit, j *journalAppender, e *eventAppender) ([]string, error) {
	for i := range c.Records {
		if err := j.append(ctx, c.Records[i]); err != nil {
			return nil, err
		}
	}
	if len(c.Events) == 0 {
		return nil, nil
	}
	cursors := make([]string, len(c.Events))
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

// appendBatch appends c's records and events assuming every id is new,
// with one multi-row INSERT per table (and per batchRows rows): the
// records in order, then each event's record. The rows are exactly those
// appendRows writes when no id is known, and their ids rows go first: a
// known id fails that INSERT with a PRIMARY KEY violation, returned as
// errKnownID.
func (t *txn) appendBatch(ctx context.Context, c *rtstore.Commit, j *journalAppender, e *eventAppender) ([]string, error) {
	s := t.s
	var cursors []string
	enc := rowEncoder{buf: make([]byte, 0, encodedSize(c))}
	evArgs := make([]any, 0, len(c.Events)*eventCols)
	mirrors := make([]journal.Record, 0, len(c.Events))
	idArgs := make([]any, 0, (len(c.Records)+2*len(c.Events))*idsCols)
	if len(c.Events) > 0 {
		if err := e.load(ctx); err != nil {
			return nil, err
		}
		if e.last+int64(len(c.Events)) > maxSeq {
			return nil, fmt.Errorf("event stream of run %s is full (%d events)", e.runID, e.last)
		}
		cursors = make([]string, len(c.Events))
		created := formatTime(now()) // the events' created_at
		for i := range c.Events {
			pe := &c.Events[i]
			ev := pe.Event
			seq := e.last + 1 + int64(i)
			ev.Cursor = storekit.FormatCursor(seq)
			data, err := enc.encode(&ev)
			if err != nil {
				return nil, fmt.Errorf("encode event %s: %w", ev.EventID, err)
			}
			cursors[i] = ev.Cursor
			k := seqKey(e.runSeq, seq)
			evArgs = append(evArgs, k, e.runID, seq, ev.EventID, string(data), created)
			idArgs = append(idArgs, ev.EventID, idTagEvent, k)
			if pe.Record != nil {
				rec := *pe.Record
				rec.Payload = data
				mirrors = append(mirrors, rec)
			}
		}
	}
	nrec := len(c.Records) + len(mirrors)
	jArgs := make([]any, 0, nrec*journalCols)
	if nrec > 0 {
		if err := j.load(ctx); err != nil {
			return nil, err
		}
		if j.last+int64(nrec) > maxSeq {
			return nil, fmt.Errorf("journal of run %s is full (%d records)", j.runID, j.last)
		}
		seq := j.last
		for _, list := range [][]journal.Record{c.Records, mirrors} {
			for _, rec := range list {
				seq++
				rec.Seq = seq
				data, err := enc.encode(&rec)
				if err != nil {
					return nil, fmt.Errorf("encode journal record %s: %w", rec.ID, err)
				}
				k := seqKey(j.runSeq, seq)
				jArgs = append(jArgs, k, j.runID, seq, rec.ID, string(data))
				idArgs = append(idArgs, rec.ID, idTagJournal, k)
			}
		}
	}
	// The ids first: a known id fails here, before the rows are written.
	if err := t.insertRows(ctx, "insert ids", &s.ws.idsInsertN, idsCols, idArgs); err != nil {
		return nil, err
	}
	if err := t.insertRows(ctx, "insert events", &s.ws.eventInsertN, eventCols, evArgs); err != nil {
		return nil, err
	}
	if err := t.insertRows(ctx, "insert journal records", &s.ws.journalInsertN, journalCols, jArgs); err != nil {
		return nil, err
	}
	e.last += int64(len(c.Events))
	j.last += int64(nrec)
	return cursors, nil
}

// encodedSize estimates the JSON of c's events and records (a mirror
// record holds its event's JSON), so their buffer grows at most rarely.
func encodedSize(c *rtstore.Commit) int {
	const fields = 320 // ids, kind, timestamps, names
	n := 0
	for i := range c.Records {
		n += len(c.Records[i].Payload) + fields
	}
	for i := range c.Events {
		ev := len(c.Events[i].Event.Data) + fields
		n += ev
		if c.Events[i].Record != nil {
			n += ev + fields
		}
	}
	return n
}

// insertRows inserts the rows of args (cols values each) with the
// multi-row statements stmts (stmts[n-1] inserts n rows). A UNIQUE
// violation comes back as errKnownID.
func (t *txn) insertRows(ctx context.Context, op string, stmts *[batchRows]*sql.Stmt, cols int, args []any) error {
	for len(args) > 0 {
		n := min(len(args)/cols, batchRows)
		_, err := t.execRaw(ctx, stmts[n-1], args[:n*cols]...)
		if isKnownID(err) {
			return errKnownID
		}
		if err != nil {
			return t.s.mapErr(ctx, op, err)
		}
		args = args[n*cols:]
	}
	return nil
}

// foreignRecord is the ErrForeignRecord of a record.
func foreignRecord(id, recordRun, commitRun string) error {
	return fmt.Errorf("journal record %s of run %s in a commit of run %s: %w", id, recordRun, commitRun, rtstore.ErrForeignRecord)
}
