package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hxd/internal/runtime/rtstore"
)

var _ rtstore.RetentionStore = (*Store)(nil)

// Retention SQL (issue 23, migration 0005). The append-only triggers of
// journal, events and artifacts let a DELETE pass only in a transaction
// that set hxd.gc to 'on' (transaction-local), and never for an artifact
// a session references.
const (
	sqlGCCandidates = `SELECT s.seq, s.id, s.principal, s.agent_name, s.agent_version, r.updated_at
FROM sessions s JOIN runs r ON r.id = s.last_run_id
WHERE s.seq > $1 AND r.status IN ('completed', 'cancelled') AND r.updated_at < $2
ORDER BY s.seq LIMIT $3`
	// sqlGCSession is the fence: the row only while the lease holds the
	// session, locked until the transaction ends.
	sqlGCSession = `SELECT s.principal, COALESCE(r.status, ''), r.updated_at
FROM sessions s LEFT JOIN runs r ON r.id = s.last_run_id
WHERE s.id = $1 AND s.owner = $2 AND s.generation = $3 AND s.lease_until > clock_timestamp()
FOR UPDATE OF s`
	// sqlGCMeasureSession is sqlGCSession without the lease (a dry run).
	sqlGCMeasureSession = `SELECT COALESCE(r.status, ''), r.updated_at
FROM sessions s LEFT JOIN runs r ON r.id = s.last_run_id WHERE s.id = $1`
	sqlGCOn         = `SELECT set_config('hxd.gc', 'on', true)`
	sqlGCRuns       = `SELECT id, request_id FROM runs WHERE session_id = $1 ORDER BY seq`
	sqlGCRecordSize = `SELECT COUNT(*), COALESCE(SUM(octet_length(payload::text)), 0) FROM journal WHERE run_id = $1`
	sqlGCEventSize  = `SELECT COUNT(*), COALESCE(SUM(octet_length(payload::text)), 0) FROM events WHERE run_id = $1`
	sqlGCRecords    = `DELETE FROM journal WHERE run_id = $1`
	sqlGCEvents     = `DELETE FROM events WHERE run_id = $1`
	sqlGCSteps      = `DELETE FROM steps WHERE run_id = $1`
	sqlGCApprovals  = `DELETE FROM approvals WHERE run_id = $1`
	sqlGCOutcomes   = `DELETE FROM tool_outcomes WHERE run_id = $1`
	sqlGCRun        = `DELETE FROM runs WHERE id = $1`
	sqlGCSnapshot   = `DELETE FROM snapshots WHERE session_id = $1`
	sqlGCRefs       = `DELETE FROM artifact_refs WHERE session_id = $1`
	sqlGCSessionDel = `DELETE FROM sessions WHERE id = $1`
	sqlTombstonePut = `INSERT INTO tombstones (kind, id, session_id, principal, request_id, deleted_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (kind, id) DO UPDATE SET deleted_at = excluded.deleted_at, expires_at = excluded.expires_at`
	sqlTombstoneColumns = `kind, id, session_id, principal, request_id, deleted_at, expires_at`
	sqlTombstoneGet     = `SELECT ` + sqlTombstoneColumns + ` FROM tombstones WHERE kind = $1 AND id = $2`
	sqlTombstoneRequest = `SELECT ` + sqlTombstoneColumns + ` FROM tombstones
WHERE session_id = $1 AND request_id = $2 AND kind = 'run' LIMIT 1`
	sqlTombstonePurge = `DELETE FROM tombstones WHERE (kind, id) IN
(SELECT kind, id FROM tombstones WHERE expires_at < $1 LIMIT $2)`
	sqlTombstoneCount = `SELECT COUNT(*) FROM tombstones`
	// sqlArtifactMeasure counts the artifacts no session outside $1 references.
	sqlArtifactMeasure = `SELECT COUNT(*), COALESCE(SUM(octet_length(a.content)), 0) FROM artifacts a
WHERE NOT EXISTS (SELECT 1 FROM artifact_refs r WHERE r.sha256 = a.id AND r.session_id <> ALL($1::text[]))`
	// sqlArtifactSweep deletes unreferenced artifacts. An ArtifactPut
	// racing it either sees the row gone (its INSERT … ON CONFLICT waits
	// for this transaction and inserts the content again) or has linked
	// it first: then the trigger (which reads the latest committed refs)
	// or the FOREIGN KEY of artifact_refs fails this sweep, never the put.
	sqlArtifactSweep = `DELETE FROM artifacts WHERE id IN (
SELECT a.id FROM artifacts a
WHERE NOT EXISTS (SELECT 1 FROM artifact_refs r WHERE r.sha256 = a.id)
ORDER BY a.id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING octet_length(content)`
)

// GCCandidates lists the sessions whose latest run finished before
// p.FinishedBefore.
func (s *Store) GCCandidates(ctx context.Context, p rtstore.GCCandidateParams) ([]rtstore.GCCandidate, error) {
	const op = "list gc candidates"
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, sqlGCCandidates, p.After, p.FinishedBefore, limitArg(p.Limit))
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rtstore.GCCandidate, error) {
		var c rtstore.GCCandidate
		err := row.Scan(&c.Seq, &c.SessionID, &c.Principal, &c.AgentName, &c.AgentVersion, &c.FinishedAt)
		c.FinishedAt = c.FinishedAt.UTC()
		return c, err
	})
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// SessionDelete deletes a finished session in one transaction fenced by
// p.Lease: the session row is selected FOR UPDATE only while the lease
// holds it, so no commit of the runtime and no other sweeper interleaves.
func (s *Store) SessionDelete(ctx context.Context, p *rtstore.SessionDeleteParams) (*rtstore.SessionDeleted, error) {
	op := "delete session " + p.SessionID
	l, err := s.leaseOf(p.Lease, p.SessionID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if l == nil {
		return nil, fmt.Errorf("%s: %w: no lease", op, rtstore.ErrLeaseLost)
	}
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	var runIDs []string
	out := &rtstore.SessionDeleted{}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			principal, status string
			updated           *time.Time
		)
		err := tx.QueryRow(ctx, sqlGCSession, p.SessionID, l.token, l.gen).Scan(&principal, &status, &updated)
		if isNoRows(err) {
			var exists bool
			if err := tx.QueryRow(ctx, sqlSessionExists, p.SessionID).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				return rtstore.ErrNotFound
			}
			return fmt.Errorf("%w: lease expired or was superseded", rtstore.ErrLeaseLost)
		}
		if err != nil {
			return err
		}
		if !rtstore.RunStatus(status).Finished() || updated == nil || !updated.Before(p.FinishedBefore) {
			return fmt.Errorf("%w: latest run %q", rtstore.ErrNotEligible, status)
		}
		if _, err := tx.Exec(ctx, sqlGCOn); err != nil {
			return err
		}
		type run struct{ id, requestID string }
		rows, err := tx.Query(ctx, sqlGCRuns, p.SessionID)
		if err != nil {
			return err
		}
		runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (run, error) {
			var r run
			err := row.Scan(&r.id, &r.requestID)
			return r, err
		})
		if err != nil {
			return err
		}
		for _, r := range runs {
			runIDs = append(runIDs, r.id)
			if err := measureRun(ctx, tx, r.id, out); err != nil {
				return err
			}
			for _, q := range []string{sqlGCRecords, sqlGCEvents, sqlGCSteps, sqlGCApprovals, sqlGCOutcomes, sqlGCRun} {
				if _, err := tx.Exec(ctx, q, r.id); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, sqlTombstonePut, rtstore.TombstoneRun, r.id, p.SessionID, principal, r.requestID, p.DeletedAt, p.TombstoneUntil); err != nil {
				return err
			}
		}
		for _, q := range []string{sqlGCSnapshot, sqlGCRefs, sqlGCSessionDel} {
			if _, err := tx.Exec(ctx, q, p.SessionID); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, sqlTombstonePut, rtstore.TombstoneSession, p.SessionID, p.SessionID, principal, "", p.DeletedAt, p.TombstoneUntil)
		return err
	})
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	for _, id := range runIDs {
		s.seqs.Forget(id)
	}
	s.ctl.forget(p.SessionID)
	return out, nil
}

// measureRun counts a run's journal records and events and their bytes,
// and the run, into out.
func measureRun(ctx context.Context, tx pgx.Tx, runID string, out *rtstore.SessionDeleted) error {
	var n, b int64
	if err := tx.QueryRow(ctx, sqlGCRecordSize, runID).Scan(&n, &b); err != nil {
		return err
	}
	out.Records += int(n)
	out.Bytes += b
	if err := tx.QueryRow(ctx, sqlGCEventSize, runID).Scan(&n, &b); err != nil {
		return err
	}
	out.Events += int(n)
	out.Bytes += b
	out.Runs++
	return nil
}

// SessionMeasure counts, in one read-only transaction, what SessionDelete
// would delete of the session now (gc --dry-run).
func (s *Store) SessionMeasure(ctx context.Context, sessionID string, finishedBefore time.Time) (*rtstore.SessionDeleted, error) {
	op := "measure session " + sessionID
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	out := &rtstore.SessionDeleted{}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var (
			status  string
			updated *time.Time
		)
		if err := tx.QueryRow(ctx, sqlGCMeasureSession, sessionID).Scan(&status, &updated); err != nil {
			return err
		}
		if !rtstore.RunStatus(status).Finished() || updated == nil || !updated.Before(finishedBefore) {
			return fmt.Errorf("%w: latest run %q", rtstore.ErrNotEligible, status)
		}
		rows, err := tx.Query(ctx, sqlGCRuns, sessionID)
		if err != nil {
			return err
		}
		runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
			var id, requestID string
			err := row.Scan(&id, &requestID)
			return id, err
		})
		if err != nil {
			return err
		}
		for _, id := range runs {
			if err := measureRun(ctx, tx, id, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// ArtifactMeasure counts the artifacts no session outside sessionIDs
// references, in one query (gc --dry-run).
func (s *Store) ArtifactMeasure(ctx context.Context, sessionIDs []string) (rtstore.ArtifactSwept, error) {
	const op = "measure artifacts"
	if err := s.checkOpen(op); err != nil {
		return rtstore.ArtifactSwept{}, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	if sessionIDs == nil {
		sessionIDs = []string{}
	}
	var out rtstore.ArtifactSwept
	if err := s.pool.QueryRow(ctx, sqlArtifactMeasure, sessionIDs).Scan(&out.Artifacts, &out.Bytes); err != nil {
		return rtstore.ArtifactSwept{}, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// ArtifactSweep deletes up to limit unreferenced artifacts in one
// transaction (see sqlArtifactSweep for why a concurrent put is safe).
func (s *Store) ArtifactSweep(ctx context.Context, limit int) (rtstore.ArtifactSwept, error) {
	const op = "sweep artifacts"
	if err := s.checkOpen(op); err != nil {
		return rtstore.ArtifactSwept{}, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	var out rtstore.ArtifactSwept
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = rtstore.ArtifactSwept{}
		if _, err := tx.Exec(ctx, sqlGCOn); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlArtifactSweep, limitArg(limit))
		if err != nil {
			return err
		}
		sizes, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		for _, n := range sizes {
			out.Artifacts++
			out.Bytes += n
		}
		return nil
	})
	if err != nil {
		return rtstore.ArtifactSwept{}, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// TombstoneGet returns the tombstone of a deleted session or run.
func (s *Store) TombstoneGet(ctx context.Context, kind rtstore.TombstoneKind, id string) (*rtstore.Tombstone, error) {
	return s.queryTombstone(ctx, "get tombstone "+id, sqlTombstoneGet, string(kind), id)
}

// TombstoneRequest returns the tombstone of a deleted run by request id.
func (s *Store) TombstoneRequest(ctx context.Context, sessionID, requestID string) (*rtstore.Tombstone, error) {
	return s.queryTombstone(ctx, "get tombstone of request "+requestID, sqlTombstoneRequest, sessionID, requestID)
}

func (s *Store) queryTombstone(ctx context.Context, op, q string, args ...any) (*rtstore.Tombstone, error) {
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	var (
		ts   rtstore.Tombstone
		kind string
	)
	err := s.pool.QueryRow(ctx, q, args...).Scan(&kind, &ts.ID, &ts.SessionID, &ts.Principal, &ts.RequestID, &ts.DeletedAt, &ts.ExpiresAt)
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	ts.Kind = rtstore.TombstoneKind(kind)
	ts.DeletedAt, ts.ExpiresAt = ts.DeletedAt.UTC(), ts.ExpiresAt.UTC()
	return &ts, nil
}

// TombstonePurge deletes up to limit tombstones expired before now.
func (s *Store) TombstonePurge(ctx context.Context, now time.Time, limit int) (int, error) {
	const op = "purge tombstones"
	if err := s.checkOpen(op); err != nil {
		return 0, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	ct, err := s.pool.Exec(ctx, sqlTombstonePurge, now, limitArg(limit))
	if err != nil {
		return 0, s.mapErr(ctx, op, err)
	}
	return int(ct.RowsAffected()), nil
}

// TombstoneCount returns the number of tombstones.
func (s *Store) TombstoneCount(ctx context.Context) (int64, error) {
	const op = "count tombstones"
	if err := s.checkOpen(op); err != nil {
		return 0, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	var n int64
	if err := s.pool.QueryRow(ctx, sqlTombstoneCount).Scan(&n); err != nil {
		return 0, s.mapErr(ctx, op, err)
	}
	return n, nil
}
