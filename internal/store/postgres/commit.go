package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
)

// Boundary SQL. Every statement takes parallel arrays and unnests them, so
// one statement (prepared once per connection) serves one boundary or a
// whole group of them.
const (
	// sqlGroupFence is the fence of every boundary of a group, in one
	// statement: a leased boundary's session must still be owned by its
	// lease (owner, generation, expiry on the database clock); an unleased
	// one's session must exist. The rows stay locked until the transaction
	// ends, so no claim can slip in before it commits; sessions are locked
	// in id order, so concurrent groups do not deadlock.
	sqlGroupFence = `SELECT s.id, s.control FROM sessions AS s
JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS f (id, owner, generation) ON s.id = f.id
WHERE f.owner IS NULL
   OR (s.owner = f.owner AND s.generation = f.generation AND s.lease_until > clock_timestamp())
ORDER BY s.id
FOR NO KEY UPDATE OF s`
	// sqlGroupRuns finds the runs that exist in the session named.
	sqlGroupRuns = `SELECT r.id FROM runs AS r
JOIN unnest($1::text[], $2::text[]) AS u (id, session_id) ON r.id = u.id AND r.session_id = u.session_id`
	sqlGroupJournalMax = `SELECT run_id, max(seq) FROM journal WHERE run_id = ANY($1::text[]) GROUP BY run_id`
	sqlGroupEventMax   = `SELECT run_id, max(seq) FROM events WHERE run_id = ANY($1::text[]) GROUP BY run_id`
	// sqlJournalKnown and sqlEventKnown find the ids a boundary re-sends.
	sqlJournalKnown = `SELECT id, payload FROM journal WHERE id = ANY($1::text[])`
	sqlEventKnown   = `SELECT event_id, run_id, seq FROM events WHERE event_id = ANY($1::text[])`

	// sqlGroupRunUpdate writes the run columns; a NULL state keeps the
	// stored one.
	sqlGroupRunUpdate = `UPDATE runs AS r
SET status = u.status, phase = u.phase, payload = COALESCE(u.payload::json, r.payload), updated_at = u.updated_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
    AS u (id, session_id, status, phase, payload, updated_at)
WHERE r.id = u.id AND r.session_id = u.session_id`
	// sqlGroupTraceContext writes the trace context of commits naming one.
	sqlGroupTraceContext = `UPDATE runs AS r SET trace_context = u.trace_context
FROM unnest($1::text[], $2::text[], $3::text[]) AS u (id, session_id, trace_context)
WHERE r.id = u.id AND r.session_id = u.session_id`
	// sqlGroupLastRun skips the write when nothing changes.
	sqlGroupLastRun = `UPDATE sessions AS s SET last_run_id = u.run_id
FROM unnest($1::text[], $2::text[]) AS u (id, run_id)
WHERE s.id = u.id AND s.last_run_id IS DISTINCT FROM u.run_id`
	sqlGroupSnapshots = `INSERT INTO snapshots (session_id, payload)
SELECT u.id, u.payload::json FROM unnest($1::text[], $2::text[]) AS u (id, payload)
ON CONFLICT (session_id) DO UPDATE SET payload = excluded.payload`
	sqlGroupSteps = `INSERT INTO steps (run_id, id, payload)
SELECT u.run_id, u.id, u.payload::json FROM unnest($1::text[], $2::text[], $3::text[]) AS u (run_id, id, payload)
ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload`
	sqlGroupApprovals = `INSERT INTO approvals (run_id, id, payload)
SELECT u.run_id, u.id, u.payload::json FROM unnest($1::text[], $2::text[], $3::text[]) AS u (run_id, id, payload)
ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload`
	sqlGroupToolOutcomes = `INSERT INTO tool_outcomes (run_id, id, payload)
SELECT u.run_id, u.id, u.payload::json FROM unnest($1::text[], $2::text[], $3::text[]) AS u (run_id, id, payload)
ON CONFLICT (run_id, id) DO UPDATE SET payload = excluded.payload`
	// The appends skip rows that collide; the caller counts the rows.
	sqlGroupJournal = `INSERT INTO journal (run_id, seq, id, payload)
SELECT u.run_id, u.seq, u.id, u.payload::json
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[]) AS u (run_id, seq, id, payload)
ON CONFLICT DO NOTHING`
	sqlGroupEvents = `INSERT INTO events (run_id, seq, event_id, payload)
SELECT u.run_id, u.seq, u.id, u.payload::json
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[]) AS u (run_id, seq, id, payload)
ON CONFLICT DO NOTHING`
)

// Commit writes one boundary in one transaction: run status, phase and
// state (a nil State keeps the stored one), the session's latest run, the
// session snapshot (when Snapshot is set), the step row (when Step is set),
// tool rows (into tool_outcomes when HasOutcome, else approvals), journal
// records (seq MAX+1 per run in list order; a known id with identical
// content is skipped) and events (cursor MAX+1 per run; a known event id is
// skipped with its record) with their records; once committed, appended
// events wake ListenEvents with the run id. On success it sets every
// c.Events[i].Event.Cursor (a skipped event gets its stored cursor). A
// DeltaOnly commit writes only its events and their records, with the
// same fence and run check (addBoundary).
//
// Concurrent Commits of different sessions share transactions (group
// commit, see committer): one WAL flush for the whole group, and one
// statement, a call of the schema's hxd_commit function, when every
// boundary's run seqs are cached under its lease (the common case: see
// fastPath), else a transaction of two round trips (reads, then writes).
// Whether alone or grouped, a boundary commits all or nothing and the
// outcome of one never depends on another's.
//
// Returns ErrLeaseLost if c.Lease is not a live lease of this Store for
// c.SessionID (released, expired, superseded: checked inside the
// transaction while holding the session row); ErrNotFound for an unknown
// run or a run of another session; ErrForeignRecord for a record of
// another run; ErrRecordConflict for a known record id with different
// content. On any error nothing is written; when ctx ends while the
// boundary is already being written, Commit waits for the outcome.
func (s *Store) Commit(ctx context.Context, c *rtstore.Commit) error {
	if c == nil {
		return errors.New("commit: nil commit")
	}
	op := "commit run " + c.RunID
	l, err := s.leaseOf(c.Lease, c.SessionID)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := s.checkOpen(op); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	deadline, _ := ctx.Deadline()
	r := &commitReq{deadline: deadline, c: c, l: l, op: op, cached: s.seqs.get(c), done: make(chan struct{})}
	if l != nil && r.cached.journal >= 0 && r.cached.event >= 0 && validateCommit(c) == nil {
		w := newCommitWork(c, now(), r.cached)
		if plan, err := w.plan(); err == nil {
			r.pre, r.prePlan = w, plan
		}
	}
	s.group.submit(r)
	select {
	case <-r.done:
	case <-ctx.Done():
		if s.group.withdraw(r) {
			return fmt.Errorf("%s: %w", op, ctx.Err())
		}
		<-r.done
	}
	if r.err != nil {
		s.seqs.Forget(c.RunID)
		return r.err
	}
	return nil
}

// validateCommit checks what needs no database, in the order SQLite
// reports it.
func validateCommit(c *rtstore.Commit) error {
	if c.DeltaOnly {
		if err := rtstore.CheckDeltaOnly(c); err != nil {
			return err
		}
	} else if c.Status == "" {
		return errors.New("empty run status")
	}
	if err := rtstore.CheckTraceContext(c.TraceContext); err != nil {
		return err
	}
	for i := range c.Records {
		if c.Records[i].RunID != c.RunID {
			return foreignRecord(c.Records[i].ID, c.Records[i].RunID, c.RunID)
		}
	}
	for i := range c.Events {
		if r := c.Events[i].Record; r != nil && r.RunID != c.RunID {
			return foreignRecord(r.ID, r.RunID, c.RunID)
		}
	}
	return nil
}

// foreignRecord is the ErrForeignRecord of a record.
func foreignRecord(id, recordRun, commitRun string) error {
	return fmt.Errorf("journal record %s of run %s in a commit of run %s: %w", id, recordRun, commitRun, rtstore.ErrForeignRecord)
}

// commitWork is one boundary's plan inputs.
type commitWork struct {
	c   *rtstore.Commit
	ts  time.Time
	seq runSeqs // last seqs; -1 until read

	known       map[string][]byte      // stored journal record JSON by id
	knownEvents map[string]storedEvent // stored events by event id
}

// storedEvent is where a known event id lives.
type storedEvent struct {
	runID string
	seq   int64
}

func newCommitWork(c *rtstore.Commit, ts time.Time, seq runSeqs) *commitWork {
	return &commitWork{c: c, ts: ts, seq: seq}
}

// ids lists the record ids (the commit's and its events') and the event ids
// of the boundary.
func (w *commitWork) ids() (recordIDs, eventIDs []string) {
	c := w.c
	recordIDs = make([]string, 0, len(c.Records)+len(c.Events))
	for i := range c.Records {
		recordIDs = append(recordIDs, c.Records[i].ID)
	}
	for i := range c.Events {
		eventIDs = append(eventIDs, c.Events[i].Event.EventID)
		if r := c.Events[i].Record; r != nil {
			recordIDs = append(recordIDs, r.ID)
		}
	}
	return recordIDs, eventIDs
}

// queueKnown queues the reads of the boundary's record and event ids that
// are already stored (re-sends) into w.known and w.knownEvents.
func (w *commitWork) queueKnown(b *pgx.Batch) {
	recordIDs, eventIDs := w.ids()
	queueKnown(b, recordIDs, eventIDs, &w.known, &w.knownEvents)
}

// queueKnown queues the reads of stored records and events among the ids
// given; the maps are created when something is found.
func queueKnown(b *pgx.Batch, recordIDs, eventIDs []string, known *map[string][]byte, knownEvents *map[string]storedEvent) {
	if len(recordIDs) > 0 {
		b.Queue(sqlJournalKnown, recordIDs).Query(func(rows pgx.Rows) error {
			var id string
			var payload []byte
			_, err := pgx.ForEachRow(rows, []any{&id, &payload}, func() error {
				if *known == nil {
					*known = make(map[string][]byte)
				}
				(*known)[id] = payload
				return nil
			})
			return err
		})
	}
	if len(eventIDs) > 0 {
		b.Queue(sqlEventKnown, eventIDs).Query(func(rows pgx.Rows) error {
			var id, runID string
			var seq int64
			_, err := pgx.ForEachRow(rows, []any{&id, &runID, &seq}, func() error {
				if *knownEvents == nil {
					*knownEvents = make(map[string]storedEvent)
				}
				(*knownEvents)[id] = storedEvent{runID: runID, seq: seq}
				return nil
			})
			return err
		})
	}
}

// writeSet is the writes of the boundaries of one transaction as parallel
// arrays, one statement per table.
type writeSet struct {
	runID, runSession, runStatus, runPhase []string
	runPayload                             []json.RawMessage // nil: keep the stored state
	runUpdated                             []time.Time

	lastSession, lastRun []string

	snapSession, snapPayload []string

	stepRun, stepID, stepPayload []string

	appRun, appKey, appPayload []string
	outRun, outKey, outPayload []string

	// traceRun, traceSession, traceContext: the runs whose trace context
	// a commit sets (a resume's).
	traceRun, traceSession, traceContext []string

	journal, events appendSet
}

// appendSet is rows to append to the journal or events.
type appendSet struct {
	run     []string
	seq     []int64
	id      []string
	payload []string
}

func (a *appendSet) add(runID string, rows *rowSet) {
	for range rows.seq {
		a.run = append(a.run, runID)
	}
	a.seq = append(a.seq, rows.seq...)
	a.id = append(a.id, rows.id...)
	a.payload = append(a.payload, rows.payload...)
}

// addBoundary adds w's writes with plan p: the run's update (updateRun),
// the session's latest run (setLastRun), snapshot, step, tools, records
// and events.
func (ws *writeSet) addBoundary(w *commitWork, p *commitPlan, updateRun, setLastRun bool) {
	c := w.c
	if c.DeltaOnly {
		// Events and their records only (validateCommit checked that
		// the commit names nothing else).
		ws.journal.add(c.RunID, &p.journal)
		ws.events.add(c.RunID, &p.events)
		return
	}
	if updateRun {
		ws.runID = append(ws.runID, c.RunID)
		ws.runSession = append(ws.runSession, c.SessionID)
		ws.runStatus = append(ws.runStatus, string(c.Status))
		ws.runPhase = append(ws.runPhase, c.Phase)
		ws.runPayload = append(ws.runPayload, c.State)
		ws.runUpdated = append(ws.runUpdated, w.ts)
	}
	if c.TraceContext != "" {
		ws.traceRun, ws.traceSession = append(ws.traceRun, c.RunID), append(ws.traceSession, c.SessionID)
		ws.traceContext = append(ws.traceContext, c.TraceContext)
	}
	if setLastRun {
		ws.lastSession, ws.lastRun = append(ws.lastSession, c.SessionID), append(ws.lastRun, c.RunID)
	}
	if c.State != nil && c.Snapshot {
		ws.snapSession, ws.snapPayload = append(ws.snapSession, c.SessionID), append(ws.snapPayload, string(c.State))
	}
	if c.Step != nil {
		ws.stepRun = append(ws.stepRun, c.RunID)
		ws.stepID = append(ws.stepID, c.StepID)
		ws.stepPayload = append(ws.stepPayload, string(c.Step))
	}
	// One row per key and table, the last one winning as if upserted in
	// order (one statement cannot upsert a key twice).
	type slot struct {
		outcome bool
		key     string
	}
	last := make(map[slot]int, len(c.Tools))
	for i, tr := range c.Tools {
		last[slot{tr.HasOutcome, tr.ExecutionKey}] = i
	}
	for i, tr := range c.Tools {
		if last[slot{tr.HasOutcome, tr.ExecutionKey}] != i {
			continue
		}
		if tr.HasOutcome {
			ws.outRun, ws.outKey = append(ws.outRun, c.RunID), append(ws.outKey, tr.ExecutionKey)
			ws.outPayload = append(ws.outPayload, jsonOr(tr.Payload, "null"))
		} else {
			ws.appRun, ws.appKey = append(ws.appRun, c.RunID), append(ws.appKey, tr.ExecutionKey)
			ws.appPayload = append(ws.appPayload, jsonOr(tr.Payload, "null"))
		}
	}
	ws.journal.add(c.RunID, &p.journal)
	ws.events.add(c.RunID, &p.events)
}

// queue queues the writes. A run update or append that changes fewer rows
// than planned (a run gone, a seq or id taken by a concurrent writer) fails
// the batch with collided.
func (ws *writeSet) queue(b *pgx.Batch, collided error) {
	expect := func(n int) func(pgconn.CommandTag) error {
		return func(ct pgconn.CommandTag) error {
			if ct.RowsAffected() != int64(n) {
				return collided
			}
			return nil
		}
	}
	if n := len(ws.runID); n > 0 {
		b.Queue(sqlGroupRunUpdate, ws.runID, ws.runSession, ws.runStatus, ws.runPhase, nullableStrings(ws.runPayload), ws.runUpdated).
			Exec(expect(n))
	}
	if n := len(ws.traceRun); n > 0 {
		b.Queue(sqlGroupTraceContext, ws.traceRun, ws.traceSession, ws.traceContext).Exec(expect(n))
	}
	ws.queueUpserts(b)
	if n := len(ws.journal.seq); n > 0 {
		b.Queue(sqlGroupJournal, ws.journal.run, ws.journal.seq, ws.journal.id, ws.journal.payload).Exec(expect(n))
	}
	if n := len(ws.events.seq); n > 0 {
		b.Queue(sqlGroupEvents, ws.events.run, ws.events.seq, ws.events.id, ws.events.payload).Exec(expect(n))
	}
}

// nullableStrings is raw as text array elements, nil ones NULL.
func nullableStrings(raw []json.RawMessage) []*string {
	out := make([]*string, len(raw))
	for i, r := range raw {
		if r != nil {
			s := string(r)
			out[i] = &s
		}
	}
	return out
}

// queueUpserts queues the writes that cannot collide: the session's latest
// run, snapshot, step and tool rows.
func (ws *writeSet) queueUpserts(b *pgx.Batch) {
	for _, u := range ws.upserts() {
		args := make([]any, len(u.args))
		for i, a := range u.args {
			args[i] = a
		}
		b.Queue(u.sql, args...)
	}
}

// upsert is a write that cannot collide: its statement and its text[]
// arguments.
type upsert struct {
	sql  string
	args [][]string
}

// upserts lists the writes of queueUpserts: the session's latest run, snapshot, step and tool rows, each
// when it has rows.
func (ws *writeSet) upserts() []upsert {
	var out []upsert
	add := func(sql string, args ...[]string) {
		if len(args[0]) > 0 {
			out = append(out, upsert{sql, args})
		}
	}
	add(sqlGroupLastRun, ws.lastSession, ws.lastRun)
	add(sqlGroupSnapshots, ws.snapSession, ws.snapPayload)
	add(sqlGroupSteps, ws.stepRun, ws.stepID, ws.stepPayload)
	add(sqlGroupApprovals, ws.appRun, ws.appKey, ws.appPayload)
	add(sqlGroupToolOutcomes, ws.outRun, ws.outKey, ws.outPayload)
	return out
}

// commitPlan is what a boundary appends, decided from the reads.
type commitPlan struct {
	journal, events rowSet
	cursors         []string // per event of the commit
	last            runSeqs  // the run's last seqs once committed
}

// rowSet is rows to insert as parallel arrays.
type rowSet struct {
	seq     []int64
	id      []string
	payload []string
}

func (r *rowSet) add(seq int64, id string, payload string) {
	r.seq = append(r.seq, seq)
	r.id = append(r.id, id)
	r.payload = append(r.payload, payload)
}

// plan numbers the commit's records and events exactly as the SQLite store
// appends them one by one: records in order, then each event followed by
// its record; a record whose id is stored (or earlier in the commit) with
// equal content is skipped and consumes no seq, with other content it is
// ErrRecordConflict; an event whose id is stored (or earlier in the
// commit) is skipped together with its record and gets the stored cursor
// (its own Cursor when it belongs to another run).
func (w *commitWork) plan() (*commitPlan, error) {
	c := w.c
	p := &commitPlan{last: w.seq}
	j := journalPlanner{runID: c.RunID, last: w.seq.journal, known: w.known, rows: &p.journal}
	for i := range c.Records {
		if err := j.append(c.Records[i]); err != nil {
			return nil, err
		}
	}
	if len(c.Events) > 0 {
		p.cursors = make([]string, len(c.Events))
		pending := make(map[string]int64, len(c.Events))
		last := w.seq.event
		for i := range c.Events {
			pe := &c.Events[i]
			ev := pe.Event
			if st, ok := w.knownEvents[ev.EventID]; ok {
				p.cursors[i] = ev.Cursor
				if st.runID == c.RunID {
					p.cursors[i] = formatCursor(st.seq)
				}
				continue
			}
			if seq, ok := pending[ev.EventID]; ok {
				p.cursors[i] = formatCursor(seq)
				continue
			}
			last++
			ev.Cursor = formatCursor(last)
			data, err := marshalJSON(&ev)
			if err != nil {
				return nil, fmt.Errorf("encode event %s: %w", ev.EventID, err)
			}
			p.events.add(last, ev.EventID, data)
			pending[ev.EventID] = last
			p.cursors[i] = ev.Cursor
			if pe.Record == nil {
				continue
			}
			rec := *pe.Record
			rec.Payload = json.RawMessage(data)
			if err := j.append(rec); err != nil {
				return nil, err
			}
		}
		p.last.event = last
	}
	p.last.journal = j.last
	return p, nil
}

// journalPlanner numbers the records of one run.
type journalPlanner struct {
	runID   string
	last    int64
	known   map[string][]byte
	pending map[string]journal.Record // appended in this commit, by id
	rows    *rowSet
}

// append plans rec with the next seq, or skips it when its id is known
// with equal content. Returns ErrForeignRecord or ErrRecordConflict.
func (j *journalPlanner) append(rec journal.Record) error {
	if rec.RunID != j.runID {
		return foreignRecord(rec.ID, rec.RunID, j.runID)
	}
	if stored, ok := j.known[rec.ID]; ok {
		var old journal.Record
		if err := json.Unmarshal(stored, &old); err != nil {
			return fmt.Errorf("decode stored journal record %s: %w", rec.ID, err)
		}
		if !journal.SameContent(&old, &rec) {
			return fmt.Errorf("journal record %s: %w", rec.ID, rtstore.ErrRecordConflict)
		}
		return nil
	}
	if old, ok := j.pending[rec.ID]; ok {
		if !journal.SameContent(&old, &rec) {
			return fmt.Errorf("journal record %s: %w", rec.ID, rtstore.ErrRecordConflict)
		}
		return nil
	}
	rec.Seq = j.last + 1
	data, err := marshalJSON(&rec)
	if err != nil {
		return fmt.Errorf("encode journal record %s: %w", rec.ID, err)
	}
	j.rows.add(rec.Seq, rec.ID, data)
	if j.pending == nil {
		j.pending = make(map[string]journal.Record)
	}
	j.pending[rec.ID] = rec
	j.last = rec.Seq
	return nil
}

// setCursors writes the cursors assigned in a committed transaction back
// into the commit's events.
func setCursors(c *rtstore.Commit, cursors []string) {
	for i := range cursors {
		c.Events[i].Event.Cursor = cursors[i]
	}
}

// formatCursor renders an event seq as its public cursor.
func formatCursor(seq int64) string { return storekit.FormatCursor(seq) }

// runSeqs are a run's last journal and event seq (-1 when unknown) and
// whether the session's latest run is known to be this run.
type runSeqs struct {
	journal, event int64
	lastRun        bool
}

// unknownSeqs makes the next commit read both seqs.
var unknownSeqs = runSeqs{journal: -1, event: -1}

// seqCache remembers, between the commits of one lease, each run's last
// seqs and that the session already points at the run, sparing two
// MAX(seq) reads and an update per commit (rtstore.LeaseCache says why
// that is safe). A stale value (a writer bypassing the lease) makes the
// appends collide, which the commit detects and retries from the database.
type seqCache struct{ storekit.SeqCache[runSeqs] }

// get returns cm's run's cached seqs, or unknownSeqs.
func (c *seqCache) get(cm *rtstore.Commit) runSeqs { return c.Known(cm, unknownSeqs) }

// put records the seqs of a run after a commit under cm's lease; the
// session now points at the run.
func (c *seqCache) put(cm *rtstore.Commit, v runSeqs) {
	v.lastRun = true
	c.Put(cm, v)
}

// runStarted records that the session of cm's lease now points at cm's run
// (a run insert): the lease's other runs no longer know the latest run.
func (c *seqCache) runStarted(cm *rtstore.Commit, v runSeqs) {
	v.lastRun = true
	c.RunStarted(cm, v, func(e *runSeqs) { e.lastRun = false })
}
