package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// TestGroupCommitIsolation fires many boundaries at once (so that they
// share transactions) where some fail on their own: every boundary gets
// the outcome it would get alone, and the failures write nothing.
func TestGroupCommitIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t) // PoolSize 4: at most 2 groups in flight, the rest queue
	const n = 24
	type runOf struct {
		s   *rtstore.SessionRow
		l   rtstore.Lease
		run *rtstore.RunRow
	}
	runs := make([]runOf, n)
	for i := range runs {
		s, l, run := b.leasedRun(t)
		runs[i] = runOf{s: s, l: l, run: run}
	}
	stale := runs[3].l
	require.NoError(t, stale.Release(b.ctx())) // released: ErrLeaseLost without a database trip
	l3, err := b.store.SessionLock(b.ctx(), runs[3].s.ID)
	require.NoError(t, err)
	runs[3].l = l3
	known := record(runs[5].s.ID, runs[5].run.ID, journal.KindModelResponse, `{"v":1}`)
	require.NoError(t, b.store.Commit(b.ctx(), &rtstore.Commit{SessionID: runs[5].s.ID, RunID: runs[5].run.ID, Lease: runs[5].l,
		Status: rtstore.StatusRunning, Phase: "model", Records: []journal.Record{known}}))

	want := make([]error, n)
	commits := make([]*rtstore.Commit, n)
	for i, r := range runs {
		c := &rtstore.Commit{SessionID: r.s.ID, RunID: r.run.ID, Lease: r.l, Status: rtstore.StatusRunning, Phase: fmt.Sprint("p", i),
			State: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), StepID: "1", Step: json.RawMessage(`{}`),
			Tools:   []rtstore.ToolRow{{ExecutionKey: r.run.ID + ":1:c", Payload: json.RawMessage(`{}`)}},
			Records: []journal.Record{record(r.s.ID, r.run.ID, journal.KindCheckpoint, fmt.Sprintf(`{"i":%d}`, i))},
			Events:  []rtstore.PendingEvent{event(r.s.ID, r.run.ID, "text_delta")}}
		switch i {
		case 1: // a record of another run
			c.Records = append(c.Records, record(r.s.ID, runs[0].run.ID, journal.KindCheckpoint, `{}`))
			want[i] = rtstore.ErrForeignRecord
		case 3: // a released lease
			c.Lease = stale
			want[i] = rtstore.ErrLeaseLost
		case 5: // a known record id with other content
			bad := known
			bad.Payload = json.RawMessage(`{"v":2}`)
			c.Records = append(c.Records, bad)
			want[i] = rtstore.ErrRecordConflict
		case 7: // a run of another session
			c.Lease, c.SessionID = nil, runs[8].s.ID
			want[i] = rtstore.ErrNotFound
		}
		commits[i] = c
	}
	before := make([]*rtstore.RunRow, n)
	for i, r := range runs {
		before[i], err = b.store.RunGet(b.ctx(), r.run.ID)
		require.NoError(t, err)
	}
	groups0, boundaries0 := b.store.GroupCommitStats()
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = b.store.Commit(b.ctx(), commits[i])
		})
	}
	close(start)
	wg.Wait()
	groups, boundaries := b.store.GroupCommitStats()
	groups, boundaries = groups-groups0, boundaries-boundaries0
	t.Logf("%d boundaries in %d transactions", boundaries, groups)
	require.Less(t, groups, boundaries, "some boundaries shared a transaction")

	for i, r := range runs {
		got, err := b.store.RunGet(b.ctx(), r.run.ID)
		require.NoError(t, err)
		recs, err := b.store.JournalList(b.ctx(), r.run.ID, 0, 0)
		require.NoError(t, err)
		if want[i] != nil {
			require.ErrorIs(t, errs[i], want[i], "boundary %d", i)
			require.Empty(t, commits[i].Events[0].Event.Cursor, "boundary %d", i)
			require.Equal(t, before[i], got, "boundary %d wrote nothing", i)
			continue
		}
		require.NoError(t, errs[i], "boundary %d", i)
		require.Equal(t, fmt.Sprint("p", i), got.Phase)
		require.JSONEq(t, fmt.Sprintf(`{"i":%d}`, i), string(got.State))
		require.Equal(t, "1", commits[i].Events[0].Event.Cursor)
		for j, rec := range recs {
			require.Equal(t, int64(j+1), rec.Seq)
		}
		require.Len(t, recs, 3, "run.started, checkpoint, event record")
	}
	for _, r := range runs {
		require.NoError(t, r.l.Release(b.ctx()))
	}
}

// TestGroupCommitOneSessionInOrder commits many boundaries of one session
// at once: they serialise (never two in one group) and the journal stays
// contiguous.
func TestGroupCommitOneSessionInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, l, run := b.leasedRun(t)
	const n = 16
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			errs <- b.store.Commit(b.ctx(), &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Lease: l, Status: rtstore.StatusRunning,
				Phase: "model", Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{}`)},
				Events: []rtstore.PendingEvent{event(s.ID, run.ID, "text_delta")}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	recs, err := b.store.JournalList(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 1+2*n)
	for i, r := range recs {
		require.Equal(t, int64(i+1), r.Seq)
	}
	evs, err := b.store.EventListAfter(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	for i, ev := range evs {
		require.Equal(t, fmt.Sprint(i+1), ev.Cursor)
	}
	require.NoError(t, l.Release(b.ctx()))
}

// TestGroupCommitCollision has two sessions append the same new record id
// at once: grouped, their appends collide and the group is split; alone or
// split, one commits and the other gets ErrRecordConflict.
func TestGroupCommitCollision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 5 {
		s1, s2 := b.newSession(t), b.newSession(t)
		r1, r2 := b.newRun(t, s1.ID, nil), b.newRun(t, s2.ID, nil)
		shared := record(s1.ID, r1.ID, journal.KindCheckpoint, `{}`)
		other := shared
		other.SessionID, other.RunID = s2.ID, r2.ID
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for i, c := range []*rtstore.Commit{
			{SessionID: s1.ID, RunID: r1.ID, Status: rtstore.StatusRunning, Phase: "m", Records: []journal.Record{shared}},
			{SessionID: s2.ID, RunID: r2.ID, Status: rtstore.StatusRunning, Phase: "m", Records: []journal.Record{other}},
		} {
			wg.Go(func() {
				<-start
				errs[i] = b.store.Commit(b.ctx(), c)
			})
		}
		close(start)
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
				continue
			}
			require.True(t, errors.Is(err, rtstore.ErrRecordConflict), "%v", err)
		}
		require.Equal(t, 1, ok, "%v", errs)
	}
}

// TestFastPathMisses: a boundary whose run's seqs are cached commits in
// one round trip with every check on the server; when a check fails there
// (a re-sent record or event, a seq taken by a writer bypassing the
// lease, a lost lease) the attempt writes nothing and the boundary is
// committed the careful way, with the outcome it would have had anyway.
func TestFastPathMisses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, l, run := b.leasedRun(t)
	commit := func(phase string, recs []journal.Record, evs ...rtstore.PendingEvent) (*rtstore.Commit, error) {
		c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Lease: l, Status: rtstore.StatusRunning, Phase: phase,
			Records: recs, Events: evs}
		return c, b.store.Commit(b.ctx(), c)
	}
	journalOK := func(n int) []*journal.Record {
		t.Helper()
		recs, err := b.store.JournalList(b.ctx(), run.ID, 0, 0)
		require.NoError(t, err)
		require.Len(t, recs, n)
		for i, r := range recs {
			require.Equal(t, int64(i+1), r.Seq)
		}
		out := make([]*journal.Record, len(recs))
		for i := range recs {
			out[i] = &recs[i]
		}
		return out
	}
	phase := func() string {
		var p string
		b.queryRow(t, `SELECT phase FROM runs WHERE id = '`+run.ID+`'`, &p)
		return p
	}

	// Warm: one round trip, no miss.
	rec1 := record(s.ID, run.ID, journal.KindCheckpoint, `{"n":1}`)
	ev1 := event(s.ID, run.ID, "text_delta")
	_, err := commit("p1", []journal.Record{rec1}, ev1)
	require.NoError(t, err)
	require.Zero(t, b.store.FastMisses())
	journalOK(1 + 2)

	// A re-sent record and event (same content) with a new record: the
	// fast attempt collides, the careful one skips the known ones.
	rec2 := record(s.ID, run.ID, journal.KindCheckpoint, `{"n":2}`)
	c, err := commit("p2", []journal.Record{rec1, rec2}, ev1)
	require.NoError(t, err)
	require.Equal(t, int64(1), b.store.FastMisses())
	require.Equal(t, "1", c.Events[0].Event.Cursor, "the re-sent event keeps its cursor")
	journalOK(1 + 2 + 1)
	require.Equal(t, "p2", phase())

	// Warm again, then a writer of another process bypassing the lease
	// takes the next seqs: the cached seqs are stale, the careful path
	// reads them. (A bypass through this Store drops its cache instead.)
	_, err = commit("p3", []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{"n":3}`)})
	require.NoError(t, err)
	misses := b.store.FastMisses()
	other := openStore(t, b.cfg)
	require.NoError(t, other.Commit(b.ctx(), &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning, Phase: "bypass",
		Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{"n":"bypass"}`)}}))
	_, err = commit("p4", []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{"n":4}`)})
	require.NoError(t, err)
	require.Equal(t, misses+1, b.store.FastMisses())
	recs := journalOK(1 + 2 + 1 + 1 + 1 + 1)
	require.JSONEq(t, `{"n":4}`, string(recs[len(recs)-1].Payload))
	require.Equal(t, "p4", phase())

	// The lease lapses behind the cache's back: the fast fence fails, the
	// careful one reports the lost lease, and nothing of the boundary is
	// written (the run update of the fast attempt rolled back).
	_, err = commit("p5", nil)
	require.NoError(t, err)
	misses = b.store.FastMisses()
	require.NoError(t, b.exec(t, `UPDATE sessions SET lease_until = clock_timestamp() - interval '1 second' WHERE id = $1`, s.ID))
	_, err = commit("p6", []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{"n":6}`)}, event(s.ID, run.ID, "text_delta"))
	require.ErrorIs(t, err, rtstore.ErrLeaseLost)
	require.Equal(t, misses+1, b.store.FastMisses())
	require.Equal(t, "p5", phase())
	journalOK(1 + 2 + 1 + 1 + 1 + 1)
}

// TestCommitContextEndsInQueueOrInFlight: a boundary whose ctx ends while
// it waits in the queue (its session has a boundary in flight) is
// withdrawn, fails with the ctx's error and is never written; one whose
// ctx ends while its group is being written waits for the outcome and is
// written. The group in flight is held on the session row by another
// connection.
func TestCommitContextEndsInQueueOrInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, l, run := b.leasedRun(t)
	admin := adminConn(t, b.ctx(), b.cfg.Schema)
	defer func() { _ = admin.Close(b.ctx()) }()
	hold, err := admin.Begin(b.ctx())
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(b.ctx()) }()
	_, err = hold.Exec(b.ctx(), `SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE`, s.ID)
	require.NoError(t, err)

	boundary := func() *rtstore.Commit {
		return &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Lease: l, Status: rtstore.StatusRunning, Phase: "model",
			Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{}`)}}
	}
	first, second := boundary(), boundary()
	ctx1, cancel1 := context.WithCancel(b.ctx())
	defer cancel1()
	done1 := make(chan error, 1)
	go func() { done1 <- b.store.Commit(ctx1, first) }()
	// The first boundary's transaction waits for the held row.
	watch := adminConn(t, b.ctx(), "")
	defer func() { _ = watch.Close(b.ctx()) }()
	require.Eventually(t, func() bool {
		var n int
		err := watch.QueryRow(b.ctx(), `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
			admin.PgConn().PID()).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, 10*time.Millisecond, "the first boundary is being written")

	ctx2, cancel2 := context.WithCancel(b.ctx())
	done2 := make(chan error, 1)
	go func() { done2 <- b.store.Commit(ctx2, second) }()
	require.Eventually(t, func() bool { return b.store.QueuedBoundaries() == 1 }, 10*time.Second, 5*time.Millisecond,
		"the second boundary queues behind the first (same session)")
	cancel2()
	select {
	case err := <-done2:
		require.ErrorIs(t, err, context.Canceled, "withdrawn from the queue")
	case <-time.After(5 * time.Second):
		t.Fatal("a queued boundary whose ctx ended is still waiting")
	}

	cancel1()
	select {
	case err := <-done1:
		t.Fatalf("a boundary being written returned before its outcome: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, hold.Rollback(b.ctx()))
	require.NoError(t, <-done1, "the boundary in flight is written and its caller told so")

	recs, err := b.store.JournalList(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	ids := make(map[string]bool, len(recs))
	for _, r := range recs {
		ids[r.ID] = true
	}
	require.True(t, ids[first.Records[0].ID], "the boundary in flight is written")
	require.False(t, ids[second.Records[0].ID], "the withdrawn boundary is not")
	require.NoError(t, l.Release(b.ctx()))
}
