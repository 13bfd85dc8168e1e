package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"hxd/internal/runtime/rtstore"
)

// Lease SQL (REFERENCE §4.6). "now" is always the database's
// clock_timestamp(): no host clock takes part, so hosts with skewed clocks
// agree on who owns a session. Durations travel in microseconds.
const (
	// sqlSessionClaim takes a free, expired or orphaned session (its
	// owner's liveness lock of class $4 is free: the owner died): a new
	// owner token, the next generation and a fresh expiry, in one
	// statement.
	sqlSessionClaim = `UPDATE sessions AS s
SET owner = $2, generation = generation + 1,
    lease_until = clock_timestamp() + $3::bigint * interval '1 microsecond'
WHERE s.id = $1 AND (s.owner IS NULL OR s.lease_until <= clock_timestamp() OR ` + sqlOwnerGone + `4` + sqlOwnerGoneEnd + `)
RETURNING generation`
	sqlSessionExists = `SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)`
	// sqlLeaseRenew is the fence plus a new expiry.
	sqlLeaseRenew = `UPDATE sessions
SET lease_until = clock_timestamp() + $4::bigint * interval '1 microsecond'
WHERE id = $1 AND owner = $2 AND generation = $3 AND lease_until > clock_timestamp()`
	// sqlLeaseRelease frees the session only for the lease that holds it.
	sqlLeaseRelease = `UPDATE sessions SET owner = NULL, lease_until = NULL
WHERE id = $1 AND owner = $2 AND generation = $3`
	// sqlExpiredRuns lists running runs nobody owns: the lease expired or
	// was released, or its owner died (liveness lock of class $1 free).
	sqlExpiredRuns = `SELECT ` + sqlRunColumnsR + `
FROM runs r JOIN sessions s ON s.id = r.session_id
WHERE r.status = 'running' AND (s.owner IS NULL OR s.lease_until <= clock_timestamp() OR ` + sqlOwnerGone + `1` + sqlOwnerGoneEnd + `)
ORDER BY r.seq`
)

// SessionLock claims a session for LeaseDuration (REFERENCE §4.6): one
// UPDATE sets a new owner token, bumps the generation (the fencing number)
// and sets the expiry on the database clock, provided the session is free,
// its lease expired, or the process that holds it is gone (its liveness
// lock is free, see live.go). Returns ErrSessionBusy if a live lease of a
// live process holds it (this Store's or another process's), ErrNotFound
// for an unknown session, ErrUnavailable while this Store's own liveness
// lock is lost.
// The lease must be renewed (Lease.Renew) more often than LeaseDuration;
// every Commit and RunInsert fenced by it checks it inside the transaction.
func (s *Store) SessionLock(ctx context.Context, id string) (rtstore.Lease, error) {
	op := "lock session " + id
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	prefix, err := s.live.ownerPrefix(op)
	if err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	token := prefix + "." + uuid.NewString()
	var gen int64
	err = s.pool.QueryRow(ctx, sqlSessionClaim, id, token, s.leaseDur.Microseconds(), int64(s.live.class)).Scan(&gen)
	if isNoRows(err) {
		var exists bool
		if err := s.pool.QueryRow(ctx, sqlSessionExists, id).Scan(&exists); err != nil {
			return nil, s.mapErr(ctx, op, err)
		}
		if !exists {
			return nil, fmt.Errorf("%s: %w", op, rtstore.ErrNotFound)
		}
		return nil, fmt.Errorf("%s: %w: session is owned by another worker", op, rtstore.ErrSessionBusy)
	}
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	l := &lease{store: s, sessionID: id, token: token, gen: gen}
	s.mu.Lock()
	s.leases[l] = struct{}{}
	s.mu.Unlock()
	s.logger.DebugContext(ctx, "claimed session", "session_id", id, "generation", gen)
	return l, nil
}

// ExpiredRuns returns the runs in status running whose session lease
// expired or was released, or whose owner process is gone (its liveness
// lock is free: it died, or lost its lock connection), in Seq order: the
// reaper's work list. A run a live process drives is never listed (its
// lease is renewed and its lock held). Taking one
// over is SessionLock (which fails with ErrSessionBusy if another reaper
// was faster) followed by a resume.
func (s *Store) ExpiredRuns(ctx context.Context) ([]*rtstore.RunRow, error) {
	const op = "list expired runs"
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, sqlExpiredRuns, int64(s.live.class))
	return s.collectRuns(ctx, op, rows, err)
}

// lease is a claimed session. Safe for concurrent use.
type lease struct {
	store     *Store
	sessionID string
	token     string
	gen       int64

	mu       sync.Mutex
	released bool
}

// SessionID returns the claimed session.
func (l *lease) SessionID() string { return l.sessionID }

// Token returns the owner token stored in sessions.owner:
// "p<liveness key>.<uuid>".
func (l *lease) Token() string { return l.token }

// Generation returns the fencing number of this claim.
func (l *lease) Generation() int64 { return l.gen }

// Renew checks the fence and extends the lease to LeaseDuration from now
// (database clock). Returns ErrLeaseLost if the lease was released, expired
// or superseded; an expired lease is never revived, even if nobody else
// claimed the session meanwhile. It runs on a connection reserved for
// leases (LeaseConns), never waiting behind the commits and reads of the
// pool.
func (l *lease) Renew(ctx context.Context) error {
	s := l.store
	op := "renew session " + l.sessionID
	if l.isReleased() {
		return fmt.Errorf("%s: %w: released", op, rtstore.ErrLeaseLost)
	}
	if err := s.checkOpen(op); err != nil {
		return err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	ct, err := s.leasePool.Exec(ctx, sqlLeaseRenew, l.sessionID, l.token, l.gen, s.leaseDur.Microseconds())
	if err != nil {
		return s.mapErr(ctx, op, err)
	}
	if ct.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w: lease expired or was superseded", op, rtstore.ErrLeaseLost)
	}
	return nil
}

// Release frees the session if this lease still holds it (owner and
// generation match); a no-op for a stale or released lease. On an error
// the lease stays registered (Close tries again) and expires in any case.
func (l *lease) Release(ctx context.Context) error { return l.release(ctx) }

func (l *lease) release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	s := l.store
	op := "release session " + l.sessionID
	if s.leasePool == nil {
		return fmt.Errorf("%s: %w: store closed", op, rtstore.ErrUnavailable)
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	if _, err := s.leasePool.Exec(ctx, sqlLeaseRelease, l.sessionID, l.token, l.gen); err != nil {
		return s.mapErr(ctx, op, err)
	}
	l.released = true
	s.ctl.forget(l.sessionID)
	s.mu.Lock()
	delete(s.leases, l)
	s.mu.Unlock()
	s.seqs.ForgetToken(l.token)
	return nil
}

func (l *lease) isReleased() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// leaseOf returns le as a live lease of this Store for sessionID (nil for
// nil). Returns ErrLeaseLost for a lease of another Store or session, or
// one already released; whether it still holds the session is checked in
// the transaction.
func (s *Store) leaseOf(le rtstore.Lease, sessionID string) (*lease, error) {
	if le == nil {
		return nil, nil
	}
	l, ok := le.(*lease)
	if !ok || l.store != s || l.sessionID != sessionID {
		return nil, fmt.Errorf("session %s: %w: lease is not this store's lease of the session", sessionID, rtstore.ErrLeaseLost)
	}
	if l.isReleased() {
		return nil, fmt.Errorf("session %s: %w: released", sessionID, rtstore.ErrLeaseLost)
	}
	return l, nil
}
