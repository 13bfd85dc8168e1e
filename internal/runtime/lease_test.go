package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/journal"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/tool"
)

// leaseFaultStore hands out leases whose Renew fails on demand (renewErr);
// the wrapped store sees its own leases.
type leaseFaultStore struct {
	rtstore.Store
	renewErr atomic.Pointer[error]
	renews   atomic.Int64
	// hang makes Renew block until its context ends (a renewal stuck
	// behind a busy database).
	hang atomic.Bool
}

type faultLease struct {
	rtstore.Lease
	s *leaseFaultStore
}

func (l *faultLease) Renew(ctx context.Context) error {
	l.s.renews.Add(1)
	if l.s.hang.Load() {
		<-ctx.Done()
		return fmt.Errorf("renew: %w: %w", rtstore.ErrUnavailable, ctx.Err())
	}
	if p := l.s.renewErr.Load(); p != nil && *p != nil {
		return *p
	}
	return l.Lease.Renew(ctx)
}

func (s *leaseFaultStore) fail(err error) { s.renewErr.Store(&err) }

func unwrapLease(l rtstore.Lease) rtstore.Lease {
	if fl, ok := l.(*faultLease); ok {
		return fl.Lease
	}
	return l
}

func (s *leaseFaultStore) SessionLock(ctx context.Context, id string) (rtstore.Lease, error) {
	l, err := s.Store.SessionLock(ctx, id)
	if err != nil {
		return nil, err
	}
	return &faultLease{Lease: l, s: s}, nil
}

func (s *leaseFaultStore) Commit(ctx context.Context, c *rtstore.Commit) error {
	cc := *c
	cc.Lease = unwrapLease(c.Lease)
	return s.Store.Commit(ctx, &cc)
}

func (s *leaseFaultStore) RunInsert(ctx context.Context, p *rtstore.RunInsertParams) (*rtstore.RunRow, bool, error) {
	pp := *p
	if p.Commit != nil {
		cc := *p.Commit
		cc.Lease = unwrapLease(cc.Lease)
		pp.Commit = &cc
	}
	return s.Store.RunInsert(ctx, &pp)
}

func gateAgent() *agent.Definition {
	return &agent.Definition{
		Name: "gated", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "g", Name: "gate", Input: []byte(`{}`)}}}, {Text: "done"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "gate", Kind: "builtin", Builtin: "gate", ReplayPolicy: "safe"}}},
	}
}

// leaseSetup starts a runtime renewing every 20ms whose reaper treats every
// running run as expired (SQLite leases never expire).
func leaseSetup(t *testing.T) (*testBundle, *leaseFaultStore) {
	var fs *leaseFaultStore
	tb := setupCfg(t, func(cfg *hxruntime.Config) {
		fs = &leaseFaultStore{Store: cfg.Store}
		cfg.Store = fs
		cfg.LeaseRenewEvery = 20 * time.Millisecond
		cfg.ExpiredRunsFunc = func(ctx context.Context) ([]*rtstore.RunRow, error) {
			return fs.RunListByStatus(ctx, hxruntime.StatusRunning)
		}
	}, gateAgent())
	return tb, fs
}

// driverGone waits until the session's lock is free again (the driver
// released it).
func driverGone(t *testing.T, tb *testBundle, sessionID string) {
	t.Helper()
	require.Eventually(t, func() bool {
		l, err := tb.store.SessionLock(context.Background(), hxruntime.SessionKey(hxruntime.LocalPrincipal, sessionID))
		if err != nil {
			return false
		}
		require.NoError(t, l.Release(context.Background()))
		return true
	}, 5*time.Second, 10*time.Millisecond)
}

// TestLeaseLostStopsDriverWithoutCommit: a renewal reporting the lease lost
// stops the driver mid-tool without a further commit; the run stays
// running, and the reaper resumes it to completion.
func TestLeaseLostStopsDriverWithoutCommit(t *testing.T) {
	t.Parallel()
	tb, fs := leaseSetup(t)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "gated", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tb.toolCalls("gate") == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return fs.renews.Load() >= 2 }, 5*time.Second, 5*time.Millisecond, "the heartbeat renews the lease")

	// While this process drives it, the reaper leaves it alone.
	n, err := tb.rt.Reap(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	commits := tb.store.commits.Load()
	fs.fail(fmt.Errorf("renew: %w", rtstore.ErrLeaseLost))
	driverGone(t, tb, sess.ID)
	require.Equal(t, commits, tb.store.commits.Load(), "a driver that lost its lease commits nothing")
	row, err := tb.store.RunGet(ctx, run.RunID)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusRunning, row.Status)
	for _, r := range journalOf(t, tb, run.RunID) {
		require.NotEqual(t, journal.KindToolInterrupted, r.Kind)
	}

	// The reaper (here: every running run counts as expired) takes it over.
	fs.fail(nil)
	tb.rt.StartReaper(ctx, 20*time.Millisecond)
	res := waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, int64(2), tb.toolCalls("gate"), "a safe tool that never returned runs again")
	var resumed int
	for _, r := range journalOf(t, tb, run.RunID) {
		if r.Kind == journal.KindRunResumed {
			resumed++
		}
	}
	require.Equal(t, 1, resumed)
}

// TestTransientRenewFailures: one failed renewal is retried; two in a row
// stop the driver.
func TestTransientRenewFailures(t *testing.T) {
	t.Parallel()
	tb, fs := leaseSetup(t)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "gated", Version: "v1"}})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tb.toolCalls("gate") == 1 }, 5*time.Second, 5*time.Millisecond)
	fs.fail(fmt.Errorf("renew: %w", rtstore.ErrUnavailable))
	driverGone(t, tb, sess.ID)
	row, err := tb.store.RunGet(ctx, run.RunID)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusRunning, row.Status)
	require.GreaterOrEqual(t, fs.renews.Load(), int64(2))
}

// TestLeaseLostFunc: a driver stopped by a lost lease reports it through
// Config.LeaseLostFunc with its session and run.
func TestLeaseLostFunc(t *testing.T) {
	t.Parallel()
	type lost struct {
		sessionID, runID string
		err              error
	}
	got := make(chan lost, 4)
	var fs *leaseFaultStore
	tb := setupCfg(t, func(cfg *hxruntime.Config) {
		fs = &leaseFaultStore{Store: cfg.Store}
		cfg.Store = fs
		cfg.LeaseRenewEvery = 20 * time.Millisecond
		cfg.LeaseLostFunc = func(sessionID, runID string, err error) { got <- lost{sessionID, runID, err} }
	}, gateAgent())
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "gated", Version: "v1"}})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tb.toolCalls("gate") == 1 }, 5*time.Second, 5*time.Millisecond)
	fs.fail(fmt.Errorf("renew: %w", rtstore.ErrLeaseLost))
	select {
	case l := <-got:
		require.Equal(t, sess.ID, l.sessionID)
		require.Equal(t, run.RunID, l.runID)
		require.ErrorIs(t, l.err, rtstore.ErrLeaseLost)
	case <-time.After(5 * time.Second):
		t.Fatal("LeaseLostFunc was not called")
	}
	driverGone(t, tb, sess.ID)
	select {
	case l := <-got:
		t.Fatalf("LeaseLostFunc called twice: %+v", l)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestLeaseRenewalBounded: a renewal that hangs (the database does not
// answer) counts as failed after LeaseRenewEvery; two in a row stop the
// driver, instead of the heartbeat waiting on it forever while the lease
// runs out.
func TestLeaseRenewalBounded(t *testing.T) {
	t.Parallel()
	tb, fs := leaseSetup(t)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "gated", Version: "v1"}})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tb.toolCalls("gate") == 1 }, 5*time.Second, 5*time.Millisecond)
	before := fs.renews.Load()
	fs.hang.Store(true)
	driverGone(t, tb, sess.ID)
	require.GreaterOrEqual(t, fs.renews.Load()-before, int64(2), "two bounded renewals failed")
	row, err := tb.store.RunGet(ctx, run.RunID)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusRunning, row.Status)
}

// TestReapSkipsBusyAndErrors: ExpiredRunsFunc errors are reported; a
// nil func reaps nothing.
func TestReapWithoutSource(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	n, err := tb.rt.Reap(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	boom := errors.New("boom")
	tb2 := setupCfg(t, func(cfg *hxruntime.Config) {
		cfg.ExpiredRunsFunc = func(context.Context) ([]*rtstore.RunRow, error) { return nil, boom }
	})
	_, err = tb2.rt.Reap(context.Background())
	require.ErrorIs(t, err, boom)
}

// TestReaperWakes (issue 18): the reaper reaps whenever ExpiredRunsWake
// receives, not only at its rounds (here an hour apart).
func TestReaperWakes(t *testing.T) {
	t.Parallel()
	var reaps atomic.Int64
	wake := make(chan struct{}, 1)
	tb := setupCfg(t, func(cfg *hxruntime.Config) {
		cfg.ExpiredRunsFunc = func(context.Context) ([]*rtstore.RunRow, error) {
			reaps.Add(1)
			return nil, nil
		}
		cfg.ExpiredRunsWake = wake
	})
	tb.rt.StartReaper(t.Context(), time.Hour)
	for i := range int64(3) {
		wake <- struct{}{}
		require.Eventually(t, func() bool { return reaps.Load() == i+1 }, 10*time.Second, time.Millisecond, "wake %d", i+1)
	}
}

// barrierStore, once armed, holds every SessionControlSet (one per resume)
// until want of them are in flight together; after 10 s alone it fails.
type barrierStore struct {
	rtstore.Store
	want  int
	armed atomic.Bool
	all   chan struct{}

	mu sync.Mutex
	n  int
}

func (b *barrierStore) SessionControlSet(ctx context.Context, id, control string) error {
	if b.armed.Load() {
		b.mu.Lock()
		if b.n++; b.n == b.want {
			close(b.all)
		}
		b.mu.Unlock()
		select {
		case <-b.all:
		case <-time.After(10 * time.Second):
			return errors.New("barrier: the runs were resumed one at a time")
		}
	}
	return b.Store.SessionControlSet(ctx, id, control)
}

// TestReapResumesConcurrently (issue 18): the runs of a dead process are
// resumed together, not one after another, so that taking many of them
// over costs about as long as one.
func TestReapResumesConcurrently(t *testing.T) {
	t.Parallel()
	const runs = 3
	var fs *leaseFaultStore
	bs := &barrierStore{want: runs, all: make(chan struct{})}
	tb := setupCfg(t, func(cfg *hxruntime.Config) {
		fs = &leaseFaultStore{Store: cfg.Store}
		bs.Store = fs
		cfg.Store = bs
		cfg.LeaseRenewEvery = 20 * time.Millisecond
		cfg.ExpiredRunsFunc = func(ctx context.Context) ([]*rtstore.RunRow, error) {
			return fs.RunListByStatus(ctx, hxruntime.StatusRunning)
		}
	}, blockerAgent())
	ctx := context.Background()
	var sessions []string
	for range runs {
		sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "blocker", Version: "v1"}})
		require.NoError(t, err)
		_, _, err = tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
		require.NoError(t, err)
		sessions = append(sessions, sess.ID)
	}
	t.Cleanup(func() { // before Stop (cleanups run last first): end the blocked runs
		for _, id := range sessions {
			_, _ = tb.rt.Cancel(context.Background(), id)
		}
	})
	require.Eventually(t, func() bool { return tb.toolCalls("block") == runs }, 5*time.Second, 5*time.Millisecond)
	// The drivers lose their leases and stop, as if their process died.
	fs.fail(fmt.Errorf("renew: %w", rtstore.ErrLeaseLost))
	for _, id := range sessions {
		driverGone(t, tb, id)
	}
	fs.fail(nil)
	bs.armed.Store(true)
	n, err := tb.rt.Reap(ctx)
	require.NoError(t, err)
	require.Equal(t, runs, n)
	require.Eventually(t, func() bool { return tb.toolCalls("block") == 2*runs }, 5*time.Second, 5*time.Millisecond)
	for _, id := range sessions {
		res, err := tb.rt.Cancel(ctx, id)
		require.NoError(t, err)
		require.Equal(t, hxruntime.StatusCancelled, res.Status)
	}
}

// TestNotifyRunWakesWatchers: NotifyRun(id) wakes that run's watchers and
// NotifyRun("") every watcher, long before the poll interval.
func TestNotifyRunWakesWatchers(t *testing.T) {
	t.Parallel()
	tb := setupCfg(t, func(cfg *hxruntime.Config) { cfg.WatchPoll = time.Hour })
	a, stopA := tb.rt.WatchRun("a")
	defer stopA()
	b, stopB := tb.rt.WatchRun("b")
	defer stopB()
	tb.rt.NotifyRun("a")
	select {
	case <-a:
	case <-time.After(5 * time.Second):
		t.Fatal("NotifyRun did not wake the watcher")
	}
	select {
	case <-b:
		t.Fatal("another run's watcher woke")
	case <-time.After(20 * time.Millisecond):
	}
	tb.rt.NotifyRun("")
	select {
	case <-b:
	case <-time.After(5 * time.Second):
		t.Fatal(`NotifyRun("") did not wake every watcher`)
	}
}
