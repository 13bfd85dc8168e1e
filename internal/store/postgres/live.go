package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"hxd/internal/runtime/rtstore"
)

// Liveness. Every open Store holds a session-level advisory lock, the
// two-key form (class, key): class is derived from the schema, key is
// random per Store. It is held on a connection of its own, outside both
// pools, which PostgreSQL closes, releasing the lock, the moment the
// process dies (its socket closes). Every owner token the Store writes
// into sessions.owner is "p<key>.<uuid>", so any process can tell from
// pg_locks whether the owner of a lease is still alive: a session whose
// owner's lock is free is taken over at once (SessionLock, ExpiredRuns)
// instead of after its lease expires. The lease stays the fallback when
// the owner's connection does not close (a network partition, a frozen
// host), and fencing is unchanged: a claim still bumps the generation that
// every write transaction checks, so a process judged dead too early (its
// lock connection broke while it lived) can no longer commit.
//
// A lost lock connection is noticed within liveEvery and re-acquired with
// the same key (so the sessions nobody took over meanwhile count as alive
// again); while it is lost, SessionLock fails with ErrUnavailable rather
// than claim sessions that every other process would see as orphaned.
const (
	// liveEvery is how often the lock connection checks itself and lists
	// the liveness locks held in the database. It bounds how long a
	// process takes to notice that another one died (ProcessGone).
	liveEvery = 250 * time.Millisecond
	// liveRetryMax caps the wait between attempts to re-acquire a lost
	// lock: after a database restart every process re-takes its lock
	// within about this long, before the others' reapers (every third of
	// the lease) would count it as gone.
	liveRetryMax = time.Second
	// liveTimeout bounds one connect, lock or check.
	liveTimeout = 5 * time.Second
	// liveKeyTries is how many random keys Open tries before giving up
	// (another process holding the same key is the only reason to fail).
	liveKeyTries = 8
)

// Liveness SQL. pg_locks shows a two-key advisory lock with the first key
// in classid, the second in objid and objsubid 2; keys are kept
// non-negative, so the oid columns read as the same numbers.
const (
	sqlLiveLock = `SELECT pg_try_advisory_lock($1::int4, $2::int4)`
	// sqlLiveKeys lists the liveness keys held in this database for the
	// schema's class $1, whether this connection holds each, and when the
	// server started.
	sqlLiveKeys = `SELECT objid::int8, pid = pg_backend_pid(), pg_postmaster_start_time() FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 2 AND granted AND classid::int8 = $1
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
)

// sqlOwnerGone + "<n>" + sqlOwnerGoneEnd is a condition on the sessions
// row s: its owner token names a process (p<key>.…) that holds no liveness
// lock of class $<n> any more. Owner tokens of another form (none are
// written any more) rely on the lease alone.
const (
	sqlOwnerGone = `(s.owner LIKE 'p%.%' AND split_part(s.owner, '.', 1) NOT IN (
    SELECT 'p' || objid FROM pg_locks
    WHERE locktype = 'advisory' AND objsubid = 2 AND granted AND classid::int8 = $`
	sqlOwnerGoneEnd = `
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())))`
)

// liveClass is the schema's liveness lock class: the first 4 bytes of
// SHA-256("harness_x:liveness:" + schema), big-endian, without the sign
// bit. Deployments on one database with different schemas do not see each
// other's processes.
func liveClass(schema string) int32 {
	sum := sha256.Sum256([]byte("harness_x:liveness:" + schema))
	return int32(binary.BigEndian.Uint32(sum[:4]) & math.MaxInt32)
}

// newLiveKey returns a random key in [1, MaxInt32].
func newLiveKey() int32 { return rand.Int32N(math.MaxInt32) + 1 }

// liveness holds the Store's liveness lock and watches the others'.
type liveness struct {
	s     *Store
	class int32
	gone  chan struct{} // capacity 1: a liveness lock was released
	stop  context.CancelFunc
	done  chan struct{} // closed when the loop ends

	// paused (tests only) keeps a lost lock from being re-acquired.
	paused atomic.Bool

	mu   sync.Mutex
	key  int32     // the key owner tokens carry, kept across reconnects
	conn *pgx.Conn // holds the lock; nil while lost
}

// startLiveness takes the Store's liveness lock on a new connection and
// starts watching it; an error if the database cannot be reached or no key
// is free.
func (s *Store) startLiveness(ctx context.Context) (*liveness, error) {
	lv := &liveness{s: s, class: liveClass(s.schema), gone: make(chan struct{}, 1), done: make(chan struct{})}
	if err := lv.acquire(ctx); err != nil {
		return nil, err
	}
	loopCtx, stop := context.WithCancel(context.Background())
	lv.stop = stop
	go lv.loop(loopCtx)
	return lv, nil
}

// acquire connects and takes the lock, with the current key first.
func (lv *liveness) acquire(ctx context.Context) error {
	const op = "take liveness lock"
	s := lv.s
	conn, err := pgx.ConnectConfig(ctx, s.connCfg.Copy())
	if err != nil {
		return s.mapErr(ctx, op, err)
	}
	lv.mu.Lock()
	key := lv.key
	lv.mu.Unlock()
	for try := 0; ; try++ {
		if key == 0 {
			key = newLiveKey()
		}
		var ok bool
		if err := conn.QueryRow(ctx, sqlLiveLock, lv.class, key).Scan(&ok); err != nil {
			closeLiveConn(conn)
			return s.mapErr(ctx, op, err)
		}
		if ok {
			break
		}
		// Held by another connection: another process with the same
		// random key, or this Store's previous connection that the server
		// has not yet seen close. The sessions claimed under the old key
		// then count as orphaned once it goes; fencing keeps that safe.
		if try+1 >= liveKeyTries {
			closeLiveConn(conn)
			return fmt.Errorf("%s: %w: no free key after %d tries", op, rtstore.ErrUnavailable, liveKeyTries)
		}
		key = 0
	}
	lv.mu.Lock()
	lv.key, lv.conn = key, conn
	lv.mu.Unlock()
	return nil
}

// ownerPrefix returns "p<key>", the prefix of the owner tokens of this
// Store's claims, or ErrUnavailable while the lock is lost.
func (lv *liveness) ownerPrefix(op string) (string, error) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.conn == nil {
		return "", fmt.Errorf("%s: %w: liveness lock lost, reconnecting", op, rtstore.ErrUnavailable)
	}
	return "p" + strconv.FormatInt(int64(lv.key), 10), nil
}

// loop checks the lock every liveEvery, re-acquires it when lost, and
// signals gone when a liveness lock of the schema that was held at the
// previous check is not any more (and once at the first check). After a
// restart of the server every lock was released at once, and every live
// process is re-taking its own: that is no sign of death and signals
// nothing (a process that died meanwhile is found by the reaper's rounds).
func (lv *liveness) loop(ctx context.Context) {
	defer close(lv.done)
	log := lv.s.logger
	t := time.NewTicker(liveEvery)
	defer t.Stop()
	var (
		seen    map[int64]bool // keys held at the last check
		first   = true
		boot    time.Time   // the server's start time at the last check
		wait    = liveEvery // between re-acquire attempts, doubling
		retryAt time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lv.mu.Lock()
		conn := lv.conn
		lv.mu.Unlock()
		if conn == nil {
			if lv.paused.Load() || time.Now().Before(retryAt) {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, liveTimeout)
			err := lv.acquire(actx)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					log.WarnContext(ctx, "liveness lock still lost", "error", err, "retry_in", wait)
				}
				retryAt = time.Now().Add(wait)
				wait = min(2*wait, liveRetryMax)
				continue
			}
			wait = liveEvery
			lv.mu.Lock()
			conn = lv.conn
			key := lv.key
			lv.mu.Unlock()
			log.InfoContext(ctx, "liveness lock re-acquired", "key", key)
		}
		keys, started, err := lv.check(ctx, conn)
		if err != nil {
			lv.lose(conn)
			if ctx.Err() == nil {
				log.WarnContext(ctx, "liveness lock lost: other processes may take this process's sessions over", "error", err)
			}
			continue
		}
		if !started.Equal(boot) {
			boot, seen = started, nil
		}
		released := first
		first = false
		for k := range seen {
			if !keys[k] {
				released = true
				break
			}
		}
		seen = keys
		if released {
			select {
			case lv.gone <- struct{}{}:
			default:
			}
		}
	}
}

// errLiveLockMissing: the lock connection answers but does not hold the lock.
var errLiveLockMissing = errors.New("the liveness connection no longer holds its lock")

// check lists the schema's liveness keys held in the database and returns
// the server's start time; an error if conn is broken or does not hold
// this Store's lock.
func (lv *liveness) check(ctx context.Context, conn *pgx.Conn) (map[int64]bool, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	rows, err := conn.Query(ctx, sqlLiveKeys, int64(lv.class))
	if err != nil {
		return nil, time.Time{}, lv.s.mapErr(ctx, "check liveness lock", err)
	}
	keys := map[int64]bool{}
	mine := false
	var (
		key     int64
		own     bool
		started time.Time
	)
	lv.mu.Lock()
	want := int64(lv.key)
	lv.mu.Unlock()
	_, err = pgx.ForEachRow(rows, []any{&key, &own, &started}, func() error {
		keys[key] = true
		mine = mine || (own && key == want)
		return nil
	})
	if err != nil {
		return nil, time.Time{}, lv.s.mapErr(ctx, "check liveness lock", err)
	}
	if !mine {
		return nil, time.Time{}, errLiveLockMissing
	}
	return keys, started, nil
}

// lose drops conn (if it is still the lock's connection); the loop
// re-acquires the lock.
func (lv *liveness) lose(conn *pgx.Conn) {
	lv.mu.Lock()
	if lv.conn == conn {
		lv.conn = nil
	}
	lv.mu.Unlock()
	closeLiveConn(conn)
}

// close stops the loop and closes the lock's connection, which releases
// the lock.
func (lv *liveness) close() {
	lv.stop()
	<-lv.done
	lv.mu.Lock()
	conn := lv.conn
	lv.conn = nil
	lv.mu.Unlock()
	if conn != nil {
		closeLiveConn(conn)
	}
}

// closeLiveConn closes a liveness connection, waiting at most a second for
// a server that does not answer (the socket closes in any case).
func closeLiveConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// ProcessGone receives a value (coalesced: at most one waits) when a
// process on this schema let its liveness lock go since the previous
// check, every 250ms: it died or lost its connection, and the runs it
// drove are listed by ExpiredRuns at once. It also fires after the
// first check, for the processes that died before this one started. The
// runtime's reaper wakes on it (hxruntime.Config.ExpiredRunsWake) instead
// of waiting for its next round.
func (s *Store) ProcessGone() <-chan struct{} { return s.live.gone }
