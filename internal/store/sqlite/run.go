package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"hxd/internal/runtime/rtstore"
)

// Run SQL.
const (
	sqlRunColumns = `seq, id, session_id, request_id, message_digest, status, phase, payload, created_at, updated_at,
    COALESCE(trace_context, '')`

	sqlRunInsert = `INSERT INTO runs
    (id, session_id, request_id, message_digest, status, phase, payload, created_at, updated_at, trace_context)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING seq`

	sqlRunGet        = `SELECT ` + sqlRunColumns + ` FROM runs WHERE id = ?`
	sqlRunByRequest  = `SELECT ` + sqlRunColumns + ` FROM runs WHERE session_id = ? AND request_id = ?`
	sqlRunUnfinished = `SELECT id, status FROM runs
WHERE session_id = ? AND status NOT IN ('completed', 'cancelled')
LIMIT 1`
	sqlRunList = `SELECT ` + sqlRunColumns + ` FROM runs
WHERE session_id = ? AND seq > ?
ORDER BY seq
LIMIT ?`
	sqlRunListByStatus = `SELECT ` + sqlRunColumns + ` FROM runs WHERE status = ? ORDER BY seq`

	// sqlRunUpdate writes a boundary's run columns and returns the run's
	// seq; it matches no row for an unknown run or a run of another
	// session. A NULL state keeps the stored one.
	sqlRunUpdate = `UPDATE runs
SET status = ?, phase = ?, payload = COALESCE(?, payload), updated_at = ?
WHERE id = ? AND session_id = ?
RETURNING seq`
	// sqlRunUpdateSameStatus is sqlRunUpdate for a status known to be the
	// stored one: SQLite rewrites the entry of an index on every column a
	// SET names, so leaving status out spares a runs_status page per commit.
	sqlRunUpdateSameStatus = `UPDATE runs
SET phase = ?, payload = COALESCE(?, payload), updated_at = ?
WHERE id = ? AND session_id = ?
RETURNING seq`
	// sqlRunUpdateKnown and sqlRunUpdateSameStatusKnown are the two above
	// without RETURNING, for a run whose seq the lease already knows: a
	// plain exec costs less than a query (the caller checks that one row
	// changed).
	sqlRunUpdateKnown = `UPDATE runs
SET status = ?, phase = ?, payload = COALESCE(?, payload), updated_at = ?
WHERE id = ? AND session_id = ?`
	sqlRunUpdateSameStatusKnown = `UPDATE runs
SET phase = ?, payload = COALESCE(?, payload), updated_at = ?
WHERE id = ? AND session_id = ?`
	// sqlRunTraceContext writes a commit's trace context (a resume's).
	sqlRunTraceContext = `UPDATE runs SET trace_context = ? WHERE id = ? AND session_id = ?`
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
func (s *Store) RunInsert(ctx context.Context, p *rtstore.RunInsertParams) (*rtstore.RunRow, bool, error) {
	if p == nil || p.Run.ID == "" {
		return nil, false, errors.New("insert run: empty run id")
	}
	r := p.Run
	op := "insert run " + r.ID
	var le rtstore.Lease
	if c := p.Commit; c != nil {
		if c.RunID != r.ID || c.SessionID != r.SessionID {
			return nil, false, fmt.Errorf("%s: commit is for run %s of session %s, not %s of %s",
				op, c.RunID, c.SessionID, r.ID, r.SessionID)
		}
		le = c.Lease
	}
	if err := rtstore.CheckTraceContext(r.TraceContext); err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	release, err := s.fence(le, r.SessionID)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", op, err)
	}
	defer release()

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

	var (
		out     *rtstore.RunRow
		created bool
		cursors []string
		known   runSeqs // the new run's seqs after p.Commit
	)
	err = s.inCommitTx(ctx, op, func(ctx context.Context, t *txn) error {
		if err := t.sessionMustExist(ctx, r.SessionID); err != nil {
			return err
		}
		existing, err := scanRun(t.queryRow(ctx, s.ws.runByRequest, r.SessionID, r.RequestID))
		switch {
		case err == nil:
			if existing.MessageDigest != r.MessageDigest {
				return fmt.Errorf("request %s of session %s: %w", r.RequestID, r.SessionID, rtstore.ErrRequestConflict)
			}
			out = existing
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return s.mapErr(ctx, "find run by request", err)
		}
		var busyID, busyStatus string
		err = t.queryRow(ctx, s.ws.runUnfinished, r.SessionID).Scan(&busyID, &busyStatus)
		switch {
		case err == nil:
			return fmt.Errorf("session %s: %w: run %s is %s", r.SessionID, rtstore.ErrSessionBusy, busyID, busyStatus)
		case !errors.Is(err, sql.ErrNoRows):
			return s.mapErr(ctx, "find unfinished run", err)
		}
		var seq int64
		err = t.queryRow(ctx, s.ws.runInsert, r.ID, r.SessionID, r.RequestID, r.MessageDigest,
			string(r.Status), r.Phase, jsonOr(r.State, "null"), formatTime(r.CreatedAt), formatTime(r.UpdatedAt),
			nullString(r.TraceContext), // "" stays NULL
		).Scan(&seq)
		if isUniqueViolation(err) {
			return fmt.Errorf("run id %s: %w", r.ID, rtstore.ErrAlreadyExists)
		}
		if err != nil {
			return s.mapErr(ctx, "insert", err)
		}
		if _, err := t.exec(ctx, "start session run", s.ws.sessionStartRun, r.ID, r.SessionID); err != nil {
			return err
		}
		if p.Commit != nil {
			t.seq = runSeqs{journal: 0, event: 0, latest: true, runSeq: seq} // a new run has no rows and is the latest
			if cursors, err = t.applyCommit(ctx, p.Commit, ts); err != nil {
				return err
			}
			known = t.seq
		}
		if out, err = scanRun(t.queryRow(ctx, s.ws.runGet, r.ID)); err != nil {
			return s.mapErr(ctx, "read back", err)
		}
		created = true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if created && p.Commit != nil {
		s.seqs.put(p.Commit, known)
		setCursors(p.Commit, cursors)
	}
	if created {
		// The new run cleared the session's control flag.
		if err := s.signalControl(r.SessionID); err != nil {
			s.logger.WarnContext(ctx, "run inserted, but its control reset was not signalled", "run_id", r.ID, "error", err)
		}
	}
	return out, created, nil
}

// RunGet returns a run. Returns ErrNotFound.
func (s *Store) RunGet(ctx context.Context, id string) (*rtstore.RunRow, error) {
	row, err := scanRun(s.rs.runGet.QueryRowContext(ctx, id))
	if err != nil {
		return nil, s.mapErr(ctx, "get run "+id, err)
	}
	return row, nil
}

// RunList returns a session's runs with Seq > p.After in Seq order, at most
// p.Limit (all when Limit <= 0). An unknown session has no runs.
func (s *Store) RunList(ctx context.Context, sessionID string, p rtstore.ListParams) ([]*rtstore.RunRow, error) {
	rows, err := s.rs.runList.QueryContext(ctx, sessionID, p.After, limitArg(p.Limit))
	return s.collectRuns(ctx, "list runs of session "+sessionID, rows, err)
}

// RunListByStatus returns every run in the given status, all sessions, in
// Seq order.
func (s *Store) RunListByStatus(ctx context.Context, status rtstore.RunStatus) ([]*rtstore.RunRow, error) {
	rows, err := s.rs.runListByStatus.QueryContext(ctx, string(status))
	return s.collectRuns(ctx, "list runs by status "+string(status), rows, err)
}

// collectRuns scans a run query.
func (s *Store) collectRuns(ctx context.Context, op string, rows *sql.Rows, err error) ([]*rtstore.RunRow, error) {
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	defer func() { _ = rows.Close() }()
	var out []*rtstore.RunRow
	for rows.Next() {
		row, err := scanRun(rows)
		if err != nil {
			return nil, s.mapErr(ctx, op, err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// scanRun reads the columns of sqlRunColumns.
func scanRun(sc scanner) (*rtstore.RunRow, error) {
	var (
		row              rtstore.RunRow
		status, state    string
		created, updated string
	)
	if err := sc.Scan(&row.Seq, &row.ID, &row.SessionID, &row.RequestID, &row.MessageDigest,
		&status, &row.Phase, &state, &created, &updated, &row.TraceContext); err != nil {
		return nil, err
	}
	var err error
	if row.CreatedAt, err = parseTime(created); err != nil {
		return nil, err
	}
	if row.UpdatedAt, err = parseTime(updated); err != nil {
		return nil, err
	}
	row.Status = rtstore.RunStatus(status)
	row.State = []byte(state)
	return &row, nil
}

// nullString is s as a statement argument, NULL when empty (nil: no
// allocation for the common case of no value).
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
