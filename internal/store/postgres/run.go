package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hxd/internal/runtime/rtstore"
)

// Run SQL.
const (
	sqlRunColumns = `seq, id, session_id, request_id, message_digest, status, phase, payload, created_at, updated_at,
    COALESCE(trace_context, '')`
	sqlRunColumnsR = `r.seq, r.id, r.session_id, r.request_id, r.message_digest, r.status, r.phase, r.payload,
    r.created_at, r.updated_at, COALESCE(r.trace_context, '')`

	sqlRunInsert = `INSERT INTO runs
    (id, session_id, request_id, message_digest, status, phase, payload, created_at, updated_at, trace_context)
VALUES ($1, $2, $3, $4, $5, $6, $7::json, $8, $9, $10)
RETURNING ` + sqlRunColumns

	sqlRunGet        = `SELECT ` + sqlRunColumns + ` FROM runs WHERE id = $1`
	sqlRunExists     = `SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)`
	sqlRunByRequest  = `SELECT ` + sqlRunColumns + ` FROM runs WHERE session_id = $1 AND request_id = $2`
	sqlRunUnfinished = `SELECT id, status FROM runs
WHERE session_id = $1 AND status NOT IN ('completed', 'cancelled')
LIMIT 1`
	sqlRunList = `SELECT ` + sqlRunColumns + ` FROM runs
WHERE session_id = $1 AND seq > $2
ORDER BY seq
LIMIT $3`
	sqlRunListByStatus = `SELECT ` + sqlRunColumns + ` FROM runs WHERE status = $1 ORDER BY seq`

	// sqlSessionForRun locks the session row for a run insert and reports
	// its lease: owner, generation, live (NULL without owner).
	sqlSessionForRun = `SELECT owner, generation, lease_until > clock_timestamp() FROM sessions
WHERE id = $1
FOR NO KEY UPDATE`
	// sqlSessionStartRun points the session at a new run and clears its
	// control flag.
	sqlSessionStartRun = `UPDATE sessions SET control = '', last_run_id = $1 WHERE id = $2`
)

// RunInsert creates a run and applies p.Commit (if any) in the same
// transaction; it resets the session's control flag and makes the run the
// session's latest. CreatedAt and UpdatedAt default to now, Status to
// running, a nil State to JSON null. The returned row reflects the commit.
// Same (session, request id) with the same MessageDigest returns the
// existing run and created=false (p.Commit is not applied again); a
// different digest returns ErrRequestConflict; an unfinished run of the
// session (status other than completed and cancelled) returns
// ErrSessionBusy; an unknown session returns ErrNotFound; a taken run id
// returns ErrAlreadyExists. p.Commit fails as Commit does (ErrLeaseLost,
// ErrRecordConflict, ErrForeignRecord) and then nothing is written.
//
// The session row stays locked from the first statement to the commit, so
// concurrent inserts of one session (leased or not) cannot both pass the
// request and busy checks. Two round trips.
func (s *Store) RunInsert(ctx context.Context, p *rtstore.RunInsertParams) (*rtstore.RunRow, bool, error) {
	if p == nil || p.Run.ID == "" {
		return nil, false, errors.New("insert run: empty run id")
	}
	r := p.Run
	op := "insert run " + r.ID
	c := p.Commit
	var le rtstore.Lease
	if c != nil {
		if c.RunID != r.ID || c.SessionID != r.SessionID {
			return nil, false, fmt.Errorf("%s: commit is for run %s of session %s, not %s of %s",
				op, c.RunID, c.SessionID, r.ID, r.SessionID)
		}
		le = c.Lease
	}
	if err := rtstore.CheckTraceContext(r.TraceContext); err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	l, err := s.leaseOf(le, r.SessionID)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}

	ts := now()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = ts
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	if r.Status == "" {
		r.Status = rtstore.StatusRunning
	}
	// The row as the commit leaves it.
	status, phase, state, updated := r.Status, r.Phase, jsonOr(r.State, "null"), r.UpdatedAt
	if c != nil {
		status, phase, updated = c.Status, c.Phase, ts
		if c.State != nil {
			state = string(c.State)
		}
	}

	var (
		out     *rtstore.RunRow
		created bool
		plan    *commitPlan
	)
	// The insert clears the session's control flag.
	s.ctl.forget(r.SessionID)
	defer s.ctl.forget(r.SessionID)
	err = s.withTx(ctx, op, func(ctx context.Context, t *tx) error {
		out, created, plan = nil, false, nil
		var (
			found              bool
			owner              *string
			gen                int64
			live               *bool
			existing           *rtstore.RunRow
			busyID, busyStatus string
			idTaken            bool
			invalid            error
			w                  *commitWork
		)
		b := &pgx.Batch{}
		b.Queue(sqlSessionForRun, r.SessionID).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&owner, &gen, &live)
			found = err == nil
			if isNoRows(err) {
				return nil
			}
			return err
		})
		b.Queue(sqlRunByRequest, r.SessionID, r.RequestID).QueryRow(func(row pgx.Row) error {
			run, err := scanRun(row)
			if isNoRows(err) {
				return nil
			}
			existing = run
			return err
		})
		b.Queue(sqlRunUnfinished, r.SessionID).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&busyID, &busyStatus); err != nil && !isNoRows(err) {
				return err
			}
			return nil
		})
		b.Queue(sqlRunExists, r.ID).QueryRow(func(row pgx.Row) error { return row.Scan(&idTaken) })
		if c != nil {
			if invalid = validateCommit(c); invalid == nil {
				// A new run has no journal and no events yet.
				w = newCommitWork(c, ts, runSeqs{journal: 0, event: 0})
				w.queueKnown(b)
			}
		}
		if err := t.send(ctx, b, false); err != nil {
			return err
		}
		switch {
		case !found:
			return fmt.Errorf("session %s: %w", r.SessionID, rtstore.ErrNotFound)
		case l != nil && (owner == nil || *owner != l.token || gen != l.gen || live == nil || !*live):
			return fmt.Errorf("session %s: %w: lease expired or was superseded", r.SessionID, rtstore.ErrLeaseLost)
		case existing != nil:
			if existing.MessageDigest != r.MessageDigest {
				return fmt.Errorf("request %s of session %s: %w", r.RequestID, r.SessionID, rtstore.ErrRequestConflict)
			}
			out = existing
			return nil // nothing written: withTx rolls back
		case busyID != "":
			return fmt.Errorf("session %s: %w: run %s is %s", r.SessionID, rtstore.ErrSessionBusy, busyID, busyStatus)
		case idTaken:
			return fmt.Errorf("run id %s: %w", r.ID, rtstore.ErrAlreadyExists)
		case invalid != nil:
			return invalid
		}
		if w != nil {
			var err error
			if plan, err = w.plan(); err != nil {
				return err
			}
		}

		b = &pgx.Batch{}
		b.Queue(sqlRunInsert, r.ID, r.SessionID, r.RequestID, r.MessageDigest, string(status), phase, state,
			dbTime(r.CreatedAt), dbTime(updated), nullText(r.TraceContext),
		).QueryRow(func(row pgx.Row) error {
			run, err := scanRun(row)
			out = run
			return err
		})
		b.Queue(sqlSessionStartRun, r.ID, r.SessionID)
		if w != nil {
			var ws writeSet
			ws.addBoundary(w, plan, false, false)
			ws.queue(b, errRetry)
		}
		if err := t.send(ctx, b, true); err != nil {
			if isUniqueViolation(err, "runs_id_key") {
				return fmt.Errorf("run id %s: %w", r.ID, rtstore.ErrAlreadyExists)
			}
			if isUniqueViolation(err, "runs_session_id_request_id_key") {
				return errRetry // a concurrent insert of the same request: look again
			}
			return err
		}
		created = true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if created && plan != nil {
		s.seqs.runStarted(c, plan.last)
		setCursors(c, plan.cursors)
		if len(plan.events.seq) > 0 {
			s.notify.add(r.ID)
		}
	}
	return out, created, nil
}

// RunGet returns a run. Returns ErrNotFound.
func (s *Store) RunGet(ctx context.Context, id string) (*rtstore.RunRow, error) {
	op := "get run " + id
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	row, err := scanRun(s.pool.QueryRow(ctx, sqlRunGet, id))
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return row, nil
}

// RunList returns a session's runs with Seq > p.After in Seq order, at most
// p.Limit (all when Limit <= 0). An unknown session has no runs.
func (s *Store) RunList(ctx context.Context, sessionID string, p rtstore.ListParams) ([]*rtstore.RunRow, error) {
	op := "list runs of session " + sessionID
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, sqlRunList, sessionID, p.After, limitArg(p.Limit))
	return s.collectRuns(ctx, op, rows, err)
}

// RunListByStatus returns every run in the given status, all sessions, in
// Seq order.
func (s *Store) RunListByStatus(ctx context.Context, status rtstore.RunStatus) ([]*rtstore.RunRow, error) {
	op := "list runs by status " + string(status)
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, sqlRunListByStatus, string(status))
	return s.collectRuns(ctx, op, rows, err)
}

// collectRuns scans a run query.
func (s *Store) collectRuns(ctx context.Context, op string, rows pgx.Rows, err error) ([]*rtstore.RunRow, error) {
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*rtstore.RunRow, error) {
		return scanRun(r)
	})
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// scanRun reads the columns of sqlRunColumns.
func scanRun(row pgx.Row) (*rtstore.RunRow, error) {
	var (
		r                rtstore.RunRow
		status           string
		state            []byte
		created, updated time.Time
	)
	if err := row.Scan(&r.Seq, &r.ID, &r.SessionID, &r.RequestID, &r.MessageDigest,
		&status, &r.Phase, &state, &created, &updated, &r.TraceContext); err != nil {
		return nil, err
	}
	r.Status = rtstore.RunStatus(status)
	r.State = state
	r.CreatedAt = created.UTC()
	r.UpdatedAt = updated.UTC()
	return &r, nil
}

// nullText is s as a statement argument, NULL when empty.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
