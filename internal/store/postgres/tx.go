package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"hxd/internal/runtime/rtstore"
)

// Transactions that fail with a serialization failure (40001) or a deadlock
// (40P01) are retried: maxAttempts in all, sleeping retryDelays in between
// (REFERENCE §4.6).
const maxAttempts = 3

var retryDelays = [maxAttempts - 1]time.Duration{50 * time.Millisecond, 100 * time.Millisecond}

// errRetry makes withTx try again: a concurrent writer inserted a row the
// transaction planned around (a journal seq or id, an event id). Only
// possible when writers bypass the lease.
var errRetry = errors.New("concurrent write changed the plan")

// Transaction control. Writers run READ COMMITTED and serialise on the
// session row (SELECT … FOR NO KEY UPDATE); the export snapshot reads one
// REPEATABLE READ snapshot.
const (
	sqlBegin         = "begin isolation level read committed"
	sqlCommit        = "commit"
	sqlRollback      = "rollback"
	sqlBeginSnapshot = "begin isolation level repeatable read read only"
)

// tx is one write transaction on a pooled connection, delimited by hand so
// that it costs no round trip of its own: the first batch sent starts with
// BEGIN, the last one ends with COMMIT.
type tx struct {
	conn  *pgx.Conn
	begun bool
}

// send sends b inside the transaction in one round trip, prefixed with
// BEGIN when it is the first batch and, with commit, followed by COMMIT.
// The queued callbacks run in order; the first error (a callback's or the
// server's) is returned and the transaction is then rolled back by withTx.
func (t *tx) send(ctx context.Context, b *pgx.Batch, commit bool) error {
	if !t.begun {
		b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: sqlBegin}}, b.QueuedQueries...)
		t.begun = true
	}
	if commit {
		b.Queue(sqlCommit).Exec(func(ct pgconn.CommandTag) error {
			if ct.String() != "COMMIT" {
				return fmt.Errorf("commit ended in %s", ct.String())
			}
			return nil
		})
	}
	return t.conn.SendBatch(ctx, b).Close()
}

// withTx runs fn in a write transaction on a pooled connection (fn must
// send its batches with tx.send and commit in the last one), retrying
// serialization failures, deadlocks and errRetry up to maxAttempts in all.
// fn must be safe to run again: it may keep nothing from a failed attempt.
// Errors come back mapped and prefixed with op. A context without deadline
// gets opTimeout.
func (s *Store) withTx(ctx context.Context, op string, fn func(ctx context.Context, t *tx) error) error {
	if err := s.checkOpen(op); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := s.runTx(ctx, fn)
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return s.mapErr(ctx, op, err)
		}
		if attempt == maxAttempts {
			return fmt.Errorf("%s: %w: gave up after %d attempts: %w", op, rtstore.ErrUnavailable, attempt, s.plain(err))
		}
		s.logger.DebugContext(ctx, "retrying transaction", "op", op, "attempt", attempt, "error", s.plain(err))
		select {
		case <-ctx.Done():
			return s.mapErr(ctx, op, err)
		case <-time.After(retryDelays[attempt-1]):
		}
	}
}

// retryable reports the failures a fresh attempt can cure.
func retryable(err error) bool {
	if errors.Is(err, errRetry) {
		return true
	}
	code := sqlState(err)
	return code == codeSerializationFailure || code == codeDeadlockDetected
}

// runTx runs one attempt of withTx. A transaction fn leaves open (an error
// before or inside its last batch) is rolled back; a connection that cannot
// roll back is closed, and the pool drops it.
func (s *Store) runTx(ctx context.Context, fn func(ctx context.Context, t *tx) error) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	t := &tx{conn: pc.Conn()}
	defer func() {
		if t.conn.PgConn().TxStatus() != 'I' && !t.conn.IsClosed() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if _, err := t.conn.Exec(rctx, sqlRollback); err != nil {
				_ = t.conn.Close(rctx)
			}
			cancel()
		}
		pc.Release()
	}()
	return fn(ctx, t)
}
