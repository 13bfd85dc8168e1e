package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"hxd/internal/runtime/rtstore"
)

var _ rtstore.RetentionStore = (*Store)(nil)

// Retention SQL (issue 23, migration 0005). The append-only triggers of
// journal, events, ids and artifacts let a row go only while its run (or,
// for artifacts, run_seq 0) is listed in gc_deleting; gc lists and
// unlists them inside its own transaction.
const (
	sqlGCCandidates = `SELECT s.seq, s.id, s.principal, s.agent_name, s.agent_version, r.updated_at
FROM sessions s JOIN runs r ON r.id = s.last_run_id
WHERE s.seq > ? AND r.status IN ('completed', 'cancelled') AND r.updated_at < ?
ORDER BY s.seq LIMIT ?`
	sqlGCSession = `SELECT s.principal, COALESCE(r.status, ''), COALESCE(r.updated_at, '')
FROM sessions s LEFT JOIN runs r ON r.id = s.last_run_id WHERE s.id = ?`
	sqlGCRuns       = `SELECT seq, id, request_id FROM runs WHERE session_id = ? ORDER BY seq`
	sqlGCMark       = `INSERT INTO gc_deleting (run_seq, run_id) VALUES (?, ?)`
	sqlGCUnmark     = `DELETE FROM gc_deleting`
	sqlGCRecordSize = `SELECT COUNT(*), COALESCE(SUM(length(payload)), 0) FROM journal WHERE k BETWEEN ? AND ?`
	sqlGCEventSize  = `SELECT COUNT(*), COALESCE(SUM(length(payload)), 0) FROM events WHERE k BETWEEN ? AND ?`
	sqlGCRecordIDs  = `DELETE FROM ids WHERE tag = 0 AND id IN (SELECT id FROM journal WHERE k BETWEEN ? AND ?)`
	sqlGCEventIDs   = `DELETE FROM ids WHERE tag = 1 AND id IN (SELECT event_id FROM events WHERE k BETWEEN ? AND ?)`
	sqlGCRecords    = `DELETE FROM journal WHERE k BETWEEN ? AND ?`
	sqlGCEvents     = `DELETE FROM events WHERE k BETWEEN ? AND ?`
	sqlGCSteps      = `DELETE FROM steps WHERE run_id = ?`
	sqlGCApprovals  = `DELETE FROM approvals WHERE run_id = ?`
	sqlGCOutcomes   = `DELETE FROM tool_outcomes WHERE run_id = ?`
	sqlGCRun        = `DELETE FROM runs WHERE id = ?`
	sqlGCSnapshot   = `DELETE FROM snapshots WHERE session_id = ?`
	sqlGCRefs       = `DELETE FROM artifact_refs WHERE session_id = ?`
	sqlGCSessionDel = `DELETE FROM sessions WHERE id = ?`
	sqlTombstonePut = `INSERT INTO tombstones (kind, id, session_id, principal, request_id, deleted_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (kind, id) DO UPDATE SET deleted_at = excluded.deleted_at, expires_at = excluded.expires_at`
	sqlTombstoneColumns = `kind, id, session_id, principal, request_id, deleted_at, expires_at`
	sqlTombstoneGet     = `SELECT ` + sqlTombstoneColumns + ` FROM tombstones WHERE kind = ? AND id = ?`
	sqlTombstoneRequest = `SELECT ` + sqlTombstoneColumns + ` FROM tombstones
WHERE session_id = ? AND request_id = ? AND kind = 'run' LIMIT 1`
	sqlTombstonePurge = `DELETE FROM tombstones WHERE (kind, id) IN
(SELECT kind, id FROM tombstones WHERE expires_at < ? LIMIT ?)`
	sqlTombstoneCount  = `SELECT COUNT(*) FROM tombstones`
	sqlArtifactOrphans = `SELECT a.id, length(a.content) FROM artifacts a
WHERE NOT EXISTS (SELECT 1 FROM artifact_refs r WHERE r.sha256 = a.id) ORDER BY a.id LIMIT ?`
	// sqlArtifactMeasure: ?1 is a JSON array of the session ids whose
	// references do not count.
	sqlArtifactMeasure = `SELECT COUNT(*), COALESCE(SUM(length(a.content)), 0) FROM artifacts a
WHERE NOT EXISTS (SELECT 1 FROM artifact_refs r WHERE r.sha256 = a.id
AND r.session_id NOT IN (SELECT value FROM json_each(?)))`
	sqlArtifactMark = `INSERT INTO gc_deleting (run_seq, run_id) VALUES (0, '')`
	sqlArtifactDel  = `DELETE FROM artifacts WHERE id = ?`
)

// runRange is the k range of a run's journal and events rows.
func runRange(runSeq int64) (lo, hi int64) {
	return runSeq << 32, runSeq<<32 | 0xFFFFFFFF
}

// GCCandidates lists the sessions whose latest run finished before
// p.FinishedBefore.
func (s *Store) GCCandidates(ctx context.Context, p rtstore.GCCandidateParams) ([]rtstore.GCCandidate, error) {
	const op = "list gc candidates"
	rows, err := s.r.QueryContext(ctx, sqlGCCandidates, p.After, formatTime(p.FinishedBefore), limitArg(p.Limit))
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	defer func() { _ = rows.Close() }()
	var out []rtstore.GCCandidate
	for rows.Next() {
		var (
			c  rtstore.GCCandidate
			at string
		)
		if err := rows.Scan(&c.Seq, &c.SessionID, &c.Principal, &c.AgentName, &c.AgentVersion, &at); err != nil {
			return nil, s.mapErr(ctx, op, err)
		}
		if c.FinishedAt, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// gcRun is a run being deleted.
type gcRun struct {
	seq       int64
	id        string
	requestID string
}

// SessionDelete deletes a finished session in one writer transaction,
// fenced by p.Lease (the session's OS lock, held by this Store).
func (s *Store) SessionDelete(ctx context.Context, p *rtstore.SessionDeleteParams) (*rtstore.SessionDeleted, error) {
	op := "delete session " + p.SessionID
	if p.Lease == nil {
		return nil, fmt.Errorf("%s: %w: no lease", op, rtstore.ErrLeaseLost)
	}
	unfence, err := s.fence(p.Lease, p.SessionID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer unfence()
	var (
		out  *rtstore.SessionDeleted
		runs []gcRun
	)
	err = s.inTx(ctx, op, func(ctx context.Context, t *txn) error {
		out = &rtstore.SessionDeleted{}
		var principal, status, updated string
		err := t.tx.QueryRowContext(ctx, sqlGCSession, p.SessionID).Scan(&principal, &status, &updated)
		if errors.Is(err, sql.ErrNoRows) {
			return rtstore.ErrNotFound
		}
		if err != nil {
			return err
		}
		if !rtstore.RunStatus(status).Finished() || updated >= formatTime(p.FinishedBefore) {
			return fmt.Errorf("%w: latest run %q updated %s", rtstore.ErrNotEligible, status, updated)
		}
		runs, err = t.gcRuns(ctx, p.SessionID)
		if err != nil {
			return err
		}
		deleted, until := formatTime(p.DeletedAt), formatTime(p.TombstoneUntil)
		for _, r := range runs {
			if _, err := t.tx.ExecContext(ctx, sqlGCMark, r.seq, r.id); err != nil {
				return err
			}
			if err := t.gcRun(ctx, r, out); err != nil {
				return err
			}
			if _, err := t.tx.ExecContext(ctx, sqlTombstonePut, rtstore.TombstoneRun, r.id, p.SessionID, principal, r.requestID, deleted, until); err != nil {
				return err
			}
		}
		for _, q := range []string{sqlGCSnapshot, sqlGCRefs, sqlGCSessionDel} {
			if _, err := t.tx.ExecContext(ctx, q, p.SessionID); err != nil {
				return err
			}
		}
		if _, err := t.tx.ExecContext(ctx, sqlTombstonePut, rtstore.TombstoneSession, p.SessionID, p.SessionID, principal, "", deleted, until); err != nil {
			return err
		}
		_, err = t.tx.ExecContext(ctx, sqlGCUnmark)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		s.seqs.Forget(r.id)
	}
	return out, nil
}

// gcRuns lists a session's runs.
func (t *txn) gcRuns(ctx context.Context, sessionID string) ([]gcRun, error) {
	rows, err := t.tx.QueryContext(ctx, sqlGCRuns, sessionID)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var runs []gcRun
	for rows.Next() {
		var r gcRun
		if err := rows.Scan(&r.seq, &r.id, &r.requestID); err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

// gcRun deletes one run (listed in gc_deleting) and its rows, counting
// them into out.
func (t *txn) gcRun(ctx context.Context, r gcRun, out *rtstore.SessionDeleted) error {
	if err := measureRun(ctx, t.tx, r, out); err != nil {
		return err
	}
	lo, hi := runRange(r.seq)
	for _, q := range []string{sqlGCRecordIDs, sqlGCEventIDs, sqlGCRecords, sqlGCEvents} {
		if _, err := t.tx.ExecContext(ctx, q, lo, hi); err != nil {
			return err
		}
	}
	for _, q := range []string{sqlGCSteps, sqlGCApprovals, sqlGCOutcomes, sqlGCRun} {
		if _, err := t.tx.ExecContext(ctx, q, r.id); err != nil {
			return err
		}
	}
	return nil
}

// measureRun counts a run's journal records and events and their bytes,
// and the run, into out.
func measureRun(ctx context.Context, tx *sql.Tx, r gcRun, out *rtstore.SessionDeleted) error {
	lo, hi := runRange(r.seq)
	var n, b int64
	if err := tx.QueryRowContext(ctx, sqlGCRecordSize, lo, hi).Scan(&n, &b); err != nil {
		return err
	}
	out.Records += int(n)
	out.Bytes += b
	if err := tx.QueryRowContext(ctx, sqlGCEventSize, lo, hi).Scan(&n, &b); err != nil {
		return err
	}
	out.Events += int(n)
	out.Bytes += b
	out.Runs++
	return nil
}

// SessionMeasure counts, in one read transaction, what SessionDelete
// would delete of the session now (gc --dry-run).
func (s *Store) SessionMeasure(ctx context.Context, sessionID string, finishedBefore time.Time) (*rtstore.SessionDeleted, error) {
	op := "measure session " + sessionID
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	defer func() { _ = tx.Rollback() }()
	var principal, status, updated string
	if err := tx.QueryRowContext(ctx, sqlGCSession, sessionID).Scan(&principal, &status, &updated); err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	if !rtstore.RunStatus(status).Finished() || updated >= formatTime(finishedBefore) {
		return nil, fmt.Errorf("%s: %w: latest run %q updated %s", op, rtstore.ErrNotEligible, status, updated)
	}
	t := &txn{tx: tx}
	runs, err := t.gcRuns(ctx, sessionID)
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	out := &rtstore.SessionDeleted{}
	for _, r := range runs {
		if err := measureRun(ctx, tx, r, out); err != nil {
			return nil, s.mapErr(ctx, op, err)
		}
	}
	return out, nil
}

// ArtifactMeasure counts the artifacts no session outside sessionIDs
// references, in one query (gc --dry-run).
func (s *Store) ArtifactMeasure(ctx context.Context, sessionIDs []string) (rtstore.ArtifactSwept, error) {
	const op = "measure artifacts"
	ids, err := json.Marshal(sessionIDs)
	if err != nil {
		return rtstore.ArtifactSwept{}, fmt.Errorf("%s: %w", op, err)
	}
	if sessionIDs == nil {
		ids = []byte("[]")
	}
	var out rtstore.ArtifactSwept
	if err := s.r.QueryRowContext(ctx, sqlArtifactMeasure, string(ids)).Scan(&out.Artifacts, &out.Bytes); err != nil {
		return rtstore.ArtifactSwept{}, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// ArtifactSweep deletes up to limit unreferenced artifacts in one writer
// transaction: the single writer serialises it with ArtifactPut, and the
// trigger of migration 0005 refuses a referenced artifact.
func (s *Store) ArtifactSweep(ctx context.Context, limit int) (rtstore.ArtifactSwept, error) {
	const op = "sweep artifacts"
	var out rtstore.ArtifactSwept
	err := s.inTx(ctx, op, func(ctx context.Context, t *txn) error {
		out = rtstore.ArtifactSwept{}
		orphans, err := t.artifactOrphans(ctx, limit)
		if err != nil {
			return err
		}
		if len(orphans) == 0 {
			return nil
		}
		if _, err := t.tx.ExecContext(ctx, sqlArtifactMark); err != nil {
			return err
		}
		for _, o := range orphans {
			if _, err := t.tx.ExecContext(ctx, sqlArtifactDel, o.id); err != nil {
				return err
			}
			out.Artifacts++
			out.Bytes += o.size
		}
		_, err = t.tx.ExecContext(ctx, sqlGCUnmark)
		return err
	})
	if err != nil {
		return rtstore.ArtifactSwept{}, err
	}
	return out, nil
}

// orphan is an artifact no session references.
type orphan struct {
	id   string
	size int64
}

// artifactOrphans lists up to limit artifacts no session references.
func (t *txn) artifactOrphans(ctx context.Context, limit int) ([]orphan, error) {
	rows, err := t.tx.QueryContext(ctx, sqlArtifactOrphans, limitArg(limit))
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []orphan
	for rows.Next() {
		var o orphan
		if err := rows.Scan(&o.id, &o.size); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// TombstoneGet returns the tombstone of a deleted session or run.
func (s *Store) TombstoneGet(ctx context.Context, kind rtstore.TombstoneKind, id string) (*rtstore.Tombstone, error) {
	return s.scanTombstone(ctx, "get tombstone "+id, s.r.QueryRowContext(ctx, sqlTombstoneGet, kind, id))
}

// TombstoneRequest returns the tombstone of a deleted run by request id.
func (s *Store) TombstoneRequest(ctx context.Context, sessionID, requestID string) (*rtstore.Tombstone, error) {
	return s.scanTombstone(ctx, "get tombstone of request "+requestID, s.r.QueryRowContext(ctx, sqlTombstoneRequest, sessionID, requestID))
}

func (s *Store) scanTombstone(ctx context.Context, op string, row *sql.Row) (*rtstore.Tombstone, error) {
	var (
		ts      rtstore.Tombstone
		kind    string
		del, ex string
	)
	if err := row.Scan(&kind, &ts.ID, &ts.SessionID, &ts.Principal, &ts.RequestID, &del, &ex); err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	ts.Kind = rtstore.TombstoneKind(kind)
	var err error
	if ts.DeletedAt, err = parseTime(del); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if ts.ExpiresAt, err = parseTime(ex); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return &ts, nil
}

// TombstonePurge deletes up to limit tombstones expired before now.
func (s *Store) TombstonePurge(ctx context.Context, now time.Time, limit int) (int, error) {
	const op = "purge tombstones"
	var n int64
	err := s.inTx(ctx, op, func(ctx context.Context, t *txn) error {
		res, err := t.tx.ExecContext(ctx, sqlTombstonePurge, formatTime(now), limitArg(limit))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// TombstoneCount returns the number of tombstones.
func (s *Store) TombstoneCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, sqlTombstoneCount).Scan(&n); err != nil {
		return 0, s.mapErr(ctx, "count tombstones", err)
	}
	return n, nil
}
