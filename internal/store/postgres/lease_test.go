package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/postgres"
)

// shortLease is the lease of the expiry tests: long enough for a few
// statements even on a loaded machine (a lease that lapses between the
// claim and the next fenced write makes a test flaky), short enough to
// wait out.
const shortLease = 750 * time.Millisecond

// twoProcesses is two stores on one schema, as two hxd processes would
// have, with short leases.
func twoProcesses(t *testing.T) (*testBundle, *postgres.Store) {
	t.Helper()
	cfg := testConfig(t)
	cfg.LeaseDuration = shortLease
	b := &testBundle{store: openStore(t, cfg), cfg: cfg, tb: t}
	cfg.AutoMigrate = false
	return b, openStore(t, cfg)
}

// waitExpiry waits until a lease taken now has expired.
func waitExpiry() { time.Sleep(shortLease + 150*time.Millisecond) }

func TestLeaseTakeover(t *testing.T) {
	t.Parallel()
	b, other := twoProcesses(t)
	require.Equal(t, shortLease, b.store.LeaseDuration())
	s, l1, run := b.leasedRun(t)

	// While the lease is valid nobody else gets the session.
	_, err := other.SessionLock(b.ctx(), s.ID)
	require.ErrorIs(t, err, rtstore.ErrSessionBusy)
	_, err = b.store.SessionLock(b.ctx(), s.ID)
	require.ErrorIs(t, err, rtstore.ErrSessionBusy)

	// Renewals keep it past its first expiry.
	for range 4 {
		time.Sleep(shortLease / 3)
		require.NoError(t, l1.Renew(b.ctx()))
	}
	_, err = other.SessionLock(b.ctx(), s.ID)
	require.ErrorIs(t, err, rtstore.ErrSessionBusy)

	// Expired: another process claims it with the next generation.
	waitExpiry()
	l2, err := other.SessionLock(b.ctx(), s.ID)
	require.NoError(t, err)
	require.Equal(t, l1.Generation()+1, l2.Generation())
	require.NotEqual(t, l1.Token(), l2.Token())

	// The superseded lease can neither renew nor commit.
	require.ErrorIs(t, l1.Renew(b.ctx()), rtstore.ErrLeaseLost)
	c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Lease: l1, Status: rtstore.StatusCompleted, Phase: "result",
		Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{}`)},
		Events:  []rtstore.PendingEvent{event(s.ID, run.ID, "run_result")}}
	require.ErrorIs(t, b.store.Commit(b.ctx(), c), rtstore.ErrLeaseLost)
	require.Empty(t, c.Events[0].Event.Cursor)
	p := &rtstore.RunInsertParams{Run: rtstore.RunRow{ID: "run-" + uuid.NewString(), SessionID: s.ID, RequestID: "r2", MessageDigest: "d"},
		Commit: &rtstore.Commit{Lease: l1, Status: rtstore.StatusRunning, Phase: "start"}}
	p.Commit.SessionID, p.Commit.RunID = s.ID, p.Run.ID
	_, _, err = b.store.RunInsert(b.ctx(), p)
	require.ErrorIs(t, err, rtstore.ErrLeaseLost)

	// Its Release is a no-op: the new owner keeps the session.
	require.NoError(t, l1.Release(b.ctx()))
	_, err = b.store.SessionLock(b.ctx(), s.ID)
	require.ErrorIs(t, err, rtstore.ErrSessionBusy)
	require.NoError(t, l2.Renew(b.ctx()))

	// The new owner commits on from the stored journal.
	c.Lease = l2
	require.NoError(t, other.Commit(b.ctx(), c))
	require.Equal(t, "1", c.Events[0].Event.Cursor)
	recs, err := other.JournalList(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	got, err := b.store.RunGet(b.ctx(), run.ID)
	require.NoError(t, err)
	require.Equal(t, rtstore.StatusCompleted, got.Status)
	require.NoError(t, l2.Release(b.ctx()))

	// Free again: the generation keeps counting.
	l3, err := b.store.SessionLock(b.ctx(), s.ID)
	require.NoError(t, err)
	require.Equal(t, l2.Generation()+1, l3.Generation())
	require.NoError(t, l3.Release(b.ctx()))
}

func TestExpiredLeaseIsNotRevived(t *testing.T) {
	t.Parallel()
	b, _ := twoProcesses(t)
	s, l, run := b.leasedRun(t)
	waitExpiry()
	// Nobody claimed the session, yet the lease is over: no renewal, no
	// commit.
	require.ErrorIs(t, l.Renew(b.ctx()), rtstore.ErrLeaseLost)
	c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Lease: l, Status: rtstore.StatusRunning, Phase: "model"}
	require.ErrorIs(t, b.store.Commit(b.ctx(), c), rtstore.ErrLeaseLost)
	l2, err := b.store.SessionLock(b.ctx(), s.ID)
	require.NoError(t, err)
	require.NoError(t, l2.Release(b.ctx()))
}

func TestLockUnknownSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.store.SessionLock(b.ctx(), "ses-missing")
	require.ErrorIs(t, err, rtstore.ErrNotFound)
}

func TestExpiredRuns(t *testing.T) {
	t.Parallel()
	b, other := twoProcesses(t)
	ids := func() []string {
		t.Helper()
		runs, err := other.ExpiredRuns(b.ctx())
		require.NoError(t, err)
		var out []string
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}

	// A run driven under a live lease is not listed; once the lease
	// expires it is.
	s1 := b.newSession(t)
	l1, err := b.store.SessionLock(b.ctx(), s1.ID)
	require.NoError(t, err)
	r1 := b.newRun(t, s1.ID, l1)
	require.Empty(t, ids())

	// A running run whose lease was released (a process that stopped
	// cleanly mid-run) is listed at once.
	s2 := b.newSession(t)
	l2, err := b.store.SessionLock(b.ctx(), s2.ID)
	require.NoError(t, err)
	r2 := b.newRun(t, s2.ID, l2)
	require.NoError(t, l2.Release(b.ctx()))
	require.Equal(t, []string{r2.ID}, ids())

	// Runs that are not running are never listed.
	s3 := b.newSession(t)
	r3 := b.newRun(t, s3.ID, nil)
	require.NoError(t, b.store.Commit(b.ctx(), &rtstore.Commit{SessionID: s3.ID, RunID: r3.ID,
		Status: rtstore.StatusAwaitingInput, Phase: "tools"}))

	waitExpiry()
	require.Equal(t, []string{r1.ID, r2.ID}, ids())

	// Taking one over removes it from the list.
	l, err := other.SessionLock(b.ctx(), s1.ID)
	require.NoError(t, err)
	require.Equal(t, []string{r2.ID}, ids())
	require.NoError(t, l.Release(b.ctx()))
}

func TestCloseReleasesLeases(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ctx := testCtx(t)
	st, err := postgres.Open(ctx, cfg)
	require.NoError(t, err)
	b := &testBundle{store: st, cfg: cfg, tb: t}
	s := b.newSession(t)
	l, err := st.SessionLock(ctx, s.ID)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "Close is idempotent")
	require.NoError(t, l.Release(ctx), "Close released it already")
	require.ErrorIs(t, l.Renew(ctx), rtstore.ErrLeaseLost)

	// Another process takes the session at once, without waiting for expiry.
	cfg.AutoMigrate = false
	other := openStore(t, cfg)
	l2, err := other.SessionLock(ctx, s.ID)
	require.NoError(t, err)
	require.NoError(t, l2.Release(ctx))

	// Everything else reports the closed store.
	_, err = st.SessionGet(ctx, s.ID)
	require.ErrorIs(t, err, rtstore.ErrUnavailable)
	require.ErrorIs(t, st.SessionInsert(ctx, &rtstore.SessionRow{ID: "x"}), rtstore.ErrUnavailable)
	require.ErrorIs(t, st.Commit(ctx, &rtstore.Commit{SessionID: "x", RunID: "y", Status: "running"}), rtstore.ErrUnavailable)
	_, err = st.SessionLock(ctx, s.ID)
	require.ErrorIs(t, err, rtstore.ErrUnavailable)
	require.ErrorIs(t, st.Ping(ctx), rtstore.ErrUnavailable)
	require.ErrorIs(t, st.ListenEvents(ctx, func(string) {}), rtstore.ErrUnavailable)
}

// TestLeaseRenewWithBusyPool: renewals and releases run on the reserved
// lease connections, so a pool whose every connection is busy (a burst of
// commits and reads) does not delay them at all.
func TestLeaseRenewWithBusyPool(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.PoolSize = 2
	cfg.LeaseDuration = 3 * time.Second
	b := &testBundle{store: openStore(t, cfg), cfg: cfg, tb: t}
	s := b.newSession(t)
	l, err := b.store.SessionLock(b.ctx(), s.ID)
	require.NoError(t, err)

	release, err := b.store.HoldPool(b.ctx())
	require.NoError(t, err)
	defer release()
	for range 3 {
		// Well inside the lease: a renewal queued behind the pool would
		// time out here.
		ctx, cancel := context.WithTimeout(b.ctx(), cfg.LeaseDuration/3)
		err := l.Renew(ctx)
		cancel()
		require.NoError(t, err, "renewal while the pool is busy")
	}
	ctx, cancel := context.WithTimeout(b.ctx(), cfg.LeaseDuration/3)
	defer cancel()
	require.NoError(t, l.Release(ctx), "release while the pool is busy")
	release()
	l2, err := b.store.SessionLock(b.ctx(), s.ID)
	require.NoError(t, err, "released: free at once")
	require.NoError(t, l2.Release(b.ctx()))
}

// TestFencingUnderContention has two processes fight over one session with
// short leases while each commits as fast as it can: every committed
// boundary came from the owner of the moment, so the journal stays
// contiguous and no record of a superseded writer appears after its
// successor's first one.
func TestFencingUnderContention(t *testing.T) {
	t.Parallel()
	b, other := twoProcesses(t)
	s := b.newSession(t)
	run := b.newRun(t, s.ID, nil)

	var wg sync.WaitGroup
	errs := make(chan error, 100)
	deadline := time.Now().Add(2 * time.Second)
	for w, st := range []*postgres.Store{b.store, other} {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				l, err := st.SessionLock(b.ctx(), s.ID)
				if err != nil {
					if !errors.Is(err, rtstore.ErrSessionBusy) {
						errs <- err
						return
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				// Commit without renewing until the lease is lost.
				for i := 0; ; i++ {
					payload := fmt.Sprintf(`{"worker":%d,"gen":%d,"i":%d}`, w, l.Generation(), i)
					c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Lease: l, Status: rtstore.StatusRunning, Phase: "model",
						Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, payload)}}
					if err := st.Commit(b.ctx(), c); err != nil {
						if !errors.Is(err, rtstore.ErrLeaseLost) {
							errs <- err
							return
						}
						break
					}
				}
				if err := l.Release(b.ctx()); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	recs, err := b.store.JournalList(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	require.Greater(t, len(recs), 2)
	var lastGen int64
	for i, r := range recs {
		require.Equal(t, int64(i+1), r.Seq)
		if r.Kind != journal.KindCheckpoint {
			continue
		}
		var p struct{ Gen int64 }
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		require.GreaterOrEqual(t, p.Gen, lastGen, "record %d of generation %d after generation %d", r.Seq, p.Gen, lastGen)
		lastGen = p.Gen
	}
	require.Greater(t, lastGen, int64(1), "the session changed hands")
}

// killLiveness makes st, to every other process, a process that died: its
// liveness lock's connection is terminated on the server (which releases
// the lock) and st does not re-acquire it until resume is called.
func killLiveness(t *testing.T, ctx context.Context, st *postgres.Store) (resume func()) {
	t.Helper()
	resume = st.PauseLiveness()
	pid := st.LivenessPID()
	require.NotZero(t, pid)
	conn := adminConn(t, ctx, "")
	defer func() { _ = conn.Close(context.Background()) }()
	var gone bool
	// With a timeout, pg_terminate_backend returns once the backend exited.
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_terminate_backend($1, 10000)`, int32(pid)).Scan(&gone))
	require.True(t, gone, "the liveness backend exited")
	return resume
}

// expiredIDs lists the ids of st's ExpiredRuns.
func expiredIDs(t *testing.T, ctx context.Context, st *postgres.Store) []string {
	t.Helper()
	runs, err := st.ExpiredRuns(ctx)
	require.NoError(t, err)
	var out []string
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

// TestLeaseOfDeadProcessIsFreeAtOnce (issue 18): with the default 30 s
// lease, the runs of a process whose liveness lock is gone are listed by
// ExpiredRuns and their sessions claimed at once, while those of a live
// process are not; the dead owner's writes are fenced as before.
func TestLeaseOfDeadProcessIsFreeAtOnce(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	require.Zero(t, cfg.LeaseDuration, "the default lease")
	dead := &testBundle{store: openStore(t, cfg), cfg: cfg, tb: t}
	cfg.AutoMigrate = false
	alive := &testBundle{store: openStore(t, cfg), cfg: cfg, tb: t}
	reaper := openStore(t, cfg)
	ctx := dead.ctx()
	require.Equal(t, postgres.DefaultLeaseDuration, dead.store.LeaseDuration())

	s1, l1, r1 := dead.leasedRun(t)
	s2, l2, r2 := alive.leasedRun(t)
	require.Empty(t, expiredIDs(t, ctx, reaper), "both owners live")
	_, err := reaper.SessionLock(ctx, s1.ID)
	require.ErrorIs(t, err, rtstore.ErrSessionBusy)

	killLiveness(t, ctx, dead.store)

	// Well inside the lease: only the dead owner's run is listed, and its
	// session is claimed with the next generation.
	require.Equal(t, []string{r1.ID}, expiredIDs(t, ctx, reaper))
	taken, err := reaper.SessionLock(ctx, s1.ID)
	require.NoError(t, err)
	require.Equal(t, l1.Generation()+1, taken.Generation())
	require.Empty(t, expiredIDs(t, ctx, reaper), "taken over")
	_, err = reaper.SessionLock(ctx, s2.ID)
	require.ErrorIs(t, err, rtstore.ErrSessionBusy, "a live owner keeps its session")

	// Fencing as before: the superseded lease neither renews nor commits.
	require.ErrorIs(t, l1.Renew(ctx), rtstore.ErrLeaseLost)
	c := &rtstore.Commit{SessionID: s1.ID, RunID: r1.ID, Lease: l1, Status: rtstore.StatusRunning, Phase: "model",
		Records: []journal.Record{record(s1.ID, r1.ID, journal.KindCheckpoint, `{}`)}}
	require.ErrorIs(t, dead.store.Commit(ctx, c), rtstore.ErrLeaseLost)
	c.Lease = taken
	require.NoError(t, reaper.Commit(ctx, c))
	require.NoError(t, l2.Renew(ctx))
	require.NotContains(t, expiredIDs(t, ctx, reaper), r2.ID)
	require.NoError(t, taken.Release(ctx))
}

// TestLivenessLockLostWhileAlive (issue 18): a process whose liveness
// connection breaks stops acting as live: it claims nothing until it has
// the lock again, its sessions can be taken over meanwhile (and its leases
// are then fenced), and once it re-acquires the lock (same key) its new
// claims are live again.
func TestLivenessLockLostWhileAlive(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a := &testBundle{store: openStore(t, cfg), cfg: cfg, tb: t}
	cfg.AutoMigrate = false
	other := openStore(t, cfg)
	ctx := a.ctx()
	s1, l1, r1 := a.leasedRun(t)
	s2 := a.newSession(t)

	resume := killLiveness(t, ctx, a.store)
	require.Eventually(t, func() bool {
		l, err := a.store.SessionLock(ctx, s2.ID)
		if err == nil { // before the loss was noticed
			require.NoError(t, l.Release(ctx))
		}
		return errors.Is(err, rtstore.ErrUnavailable)
	}, 10*time.Second, 10*time.Millisecond, "no claims while the liveness lock is lost")

	require.Equal(t, []string{r1.ID}, expiredIDs(t, ctx, other))
	taken, err := other.SessionLock(ctx, s1.ID)
	require.NoError(t, err)
	require.ErrorIs(t, l1.Renew(ctx), rtstore.ErrLeaseLost)
	c := &rtstore.Commit{SessionID: s1.ID, RunID: r1.ID, Lease: l1, Status: rtstore.StatusRunning, Phase: "model"}
	require.ErrorIs(t, a.store.Commit(ctx, c), rtstore.ErrLeaseLost)
	require.NoError(t, taken.Release(ctx))

	resume()
	var l2 rtstore.Lease
	require.Eventually(t, func() bool {
		l2, err = a.store.SessionLock(ctx, s2.ID)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the lock is re-acquired")
	prefix := func(token string) string { p, _, _ := strings.Cut(token, "."); return p }
	require.Equal(t, prefix(l1.Token()), prefix(l2.Token()), "re-acquired with the same key")
	r2 := a.newRun(t, s2.ID, l2)
	require.NotContains(t, expiredIDs(t, ctx, other), r2.ID)
	_, err = other.SessionLock(ctx, s2.ID)
	require.ErrorIs(t, err, rtstore.ErrSessionBusy)
	require.NoError(t, l2.Release(ctx))
}

// TestProcessGone (issue 18): ProcessGone fires after the first check,
// then when another process of the schema lets its liveness lock go.
func TestProcessGone(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	dying := openStore(t, cfg)
	cfg.AutoMigrate = false
	watcher := openStore(t, cfg)
	ctx := testCtx(t)
	wait := func(what string) {
		t.Helper()
		select {
		case <-watcher.ProcessGone():
		case <-time.After(20 * time.Second):
			t.Fatal(what)
		}
	}
	wait("no signal after the first check")
	killLiveness(t, ctx, dying)
	wait("no signal when another process's lock went")
}
