package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/postgres"
)

func TestListenEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Another deployment on the same database must not wake this one.
	otherCfg := testConfig(t)
	other := &testBundle{store: openStore(t, otherCfg), cfg: otherCfg, tb: t}
	require.NotEqual(t, postgres.EventChannel(b.cfg.Schema), postgres.EventChannel(otherCfg.Schema))

	got := make(chan string, 100)
	ctx, cancel := context.WithCancel(b.ctx())
	done := make(chan error, 1)
	go func() { done <- b.store.ListenEvents(ctx, func(runID string) { got <- runID }) }()
	next := func() string {
		t.Helper()
		select {
		case id := <-got:
			return id
		case <-time.After(10 * time.Second):
			t.Fatal("no notification")
			return ""
		}
	}
	require.Equal(t, "", next(), "connected: look again")

	s := b.newSession(t)
	os := other.newSession(t)
	orun := other.newRun(t, os.ID, nil)
	run := b.newRun(t, s.ID, nil) // no events: no notification

	// A commit without events notifies nobody; one with events names its run.
	require.NoError(t, other.store.Commit(b.ctx(), &rtstore.Commit{SessionID: os.ID, RunID: orun.ID, Status: rtstore.StatusRunning,
		Phase: "model", Events: []rtstore.PendingEvent{event(os.ID, orun.ID, "text_delta")}}))
	require.NoError(t, b.store.Commit(b.ctx(), &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning, Phase: "model"}))
	require.NoError(t, b.store.Commit(b.ctx(), &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning,
		Phase: "model", Events: []rtstore.PendingEvent{event(s.ID, run.ID, "text_delta"), event(s.ID, run.ID, "text_delta")}}))
	require.Equal(t, run.ID, next())

	// A failed commit notifies nobody.
	bad := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning, Phase: "model",
		Events: []rtstore.PendingEvent{event(s.ID, run.ID, "text_delta")}}
	bad.Events[0].Record.RunID = orun.ID
	require.ErrorIs(t, b.store.Commit(b.ctx(), bad), rtstore.ErrForeignRecord)

	// RunInsert with events notifies too.
	s2 := b.newSession(t)
	runID := "run-" + uuid.NewString()
	_, _, err := b.store.RunInsert(b.ctx(), &rtstore.RunInsertParams{
		Run: rtstore.RunRow{ID: runID, SessionID: s2.ID, RequestID: "r", MessageDigest: "d"},
		Commit: &rtstore.Commit{SessionID: s2.ID, RunID: runID, Status: rtstore.StatusRunning, Phase: "start",
			Events: []rtstore.PendingEvent{event(s2.ID, runID, "waiting")}},
	})
	require.NoError(t, err)
	require.Equal(t, runID, next())
	select {
	case id := <-got:
		t.Fatalf("unexpected notification %q", id)
	case <-time.After(200 * time.Millisecond):
	}

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

func TestListenEventsStopsAtClose(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	st, err := postgres.Open(testCtx(t), cfg)
	require.NoError(t, err)
	ready := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- st.ListenEvents(context.Background(), func(string) {
			select {
			case ready <- struct{}{}:
			default:
			}
		})
	}()
	<-ready
	require.NoError(t, st.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, rtstore.ErrUnavailable)
	case <-time.After(10 * time.Second):
		t.Fatal("ListenEvents did not stop")
	}
}

// TestPayloadBytesKept checks that journal and event payloads come back
// with the bytes hxd wrote (compacted as SQLite stores them): number
// literals, key order, duplicate-free escapes, \u0000.
func TestPayloadBytesKept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.newSession(t)
	run := b.newRun(t, s.ID, nil)
	const payload = `{"z": 300.0, "a": 1e2, "m": -0.0, "big": 12345678901234567890.5, "s": "\u0000 <&> \u00e9 é", "n": [1.50, null]}`
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, []byte(payload)))

	rec := record(s.ID, run.ID, journal.KindToolReturned, payload)
	pe := event(s.ID, run.ID, "tool_result")
	pe.Event.Data = json.RawMessage(payload)
	c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning, Phase: "tools",
		State: json.RawMessage(payload), Step: json.RawMessage(payload), StepID: "1", Snapshot: true,
		Records: []journal.Record{rec}, Events: []rtstore.PendingEvent{pe}}
	require.NoError(t, b.store.Commit(b.ctx(), c))

	recs, err := b.store.JournalList(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	require.Equal(t, compact.String(), string(recs[1].Payload))
	var ev rtstore.RunEvent
	require.NoError(t, json.Unmarshal(recs[2].Payload, &ev))
	require.Equal(t, compact.String(), string(ev.Data))
	evs, err := b.store.EventListAfter(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	require.Equal(t, compact.String(), string(evs[0].Data))
	got, err := b.store.RunGet(b.ctx(), run.ID)
	require.NoError(t, err)
	require.Equal(t, payload, string(got.State), "run state is kept verbatim")

	// The same record re-sent with other spelling is the same record.
	again := rec
	again.Payload = json.RawMessage(`{"n":[1.5,null],"s":"\u0000 <&> é é","big":12345678901234567890.50,"m":0,"a":100,"z":300}`)
	c2 := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning, Phase: "tools",
		Records: []journal.Record{again}}
	require.NoError(t, b.store.Commit(b.ctx(), c2))
	recs, err = b.store.JournalList(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	// A different number is a conflict.
	again.Payload = json.RawMessage(`{"z":300.1}`)
	c2.Records = []journal.Record{again}
	require.ErrorIs(t, b.store.Commit(b.ctx(), c2), rtstore.ErrRecordConflict)
}

func TestDuplicatesWithinOneCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.newSession(t)
	run := b.newRun(t, s.ID, nil) // seq 1
	r := record(s.ID, run.ID, journal.KindModelStarted, `{"a":1}`)
	e := event(s.ID, run.ID, "text_delta")
	dupEvent := event(s.ID, run.ID, "text_delta")
	dupEvent.Event.EventID = e.Event.EventID
	c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning, Phase: "model",
		Records: []journal.Record{r, r}, Events: []rtstore.PendingEvent{e, dupEvent}}
	require.NoError(t, b.store.Commit(b.ctx(), c))
	require.Equal(t, "1", c.Events[0].Event.Cursor)
	require.Equal(t, "1", c.Events[1].Event.Cursor)
	recs, err := b.store.JournalList(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 3) // run.started, r, e's record

	// The same id twice with different content is a conflict.
	c = &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning, Phase: "model",
		Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{}`)}}
	c.Records = append(c.Records, c.Records[0])
	c.Records[1].Payload = json.RawMessage(`{"x":1}`)
	require.ErrorIs(t, b.store.Commit(b.ctx(), c), rtstore.ErrRecordConflict)
}

func TestEventOfAnotherRunKeepsItsCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s1, s2 := b.newSession(t), b.newSession(t)
	r1, r2 := b.newRun(t, s1.ID, nil), b.newRun(t, s2.ID, nil)
	e := event(s1.ID, r1.ID, "text_delta")
	require.NoError(t, b.store.Commit(b.ctx(), &rtstore.Commit{SessionID: s1.ID, RunID: r1.ID, Status: rtstore.StatusRunning,
		Phase: "model", Events: []rtstore.PendingEvent{e}}))

	// The same event id in another run is skipped with its record.
	dup := event(s2.ID, r2.ID, "text_delta")
	dup.Event.EventID = e.Event.EventID
	dup.Event.Cursor = "7"
	c := &rtstore.Commit{SessionID: s2.ID, RunID: r2.ID, Status: rtstore.StatusRunning, Phase: "model",
		Events: []rtstore.PendingEvent{dup, event(s2.ID, r2.ID, "text_delta")}}
	require.NoError(t, b.store.Commit(b.ctx(), c))
	require.Equal(t, "7", c.Events[0].Event.Cursor)
	require.Equal(t, "1", c.Events[1].Event.Cursor)
}

func TestConcurrentRunInsert(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.newSession(t)
	const n = 8
	type result struct {
		run     *rtstore.RunRow
		created bool
		err     error
	}
	insert := func(requestID func(int) string) []result {
		out := make([]result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				runID := "run-" + uuid.NewString()
				run, created, err := b.store.RunInsert(b.ctx(), &rtstore.RunInsertParams{
					Run: rtstore.RunRow{ID: runID, SessionID: s.ID, RequestID: requestID(i), MessageDigest: "d"},
					Commit: &rtstore.Commit{SessionID: s.ID, RunID: runID, Status: rtstore.StatusRunning, Phase: "start",
						Records: []journal.Record{record(s.ID, runID, journal.KindRunStarted, `{}`)}},
				})
				out[i] = result{run, created, err}
			})
		}
		wg.Wait()
		return out
	}

	// Different requests: one wins, the others find the session busy.
	res := insert(func(i int) string { return "req-" + uuid.NewString() })
	var winner *rtstore.RunRow
	for _, r := range res {
		if r.err == nil {
			require.True(t, r.created)
			require.Nil(t, winner, "two runs created")
			winner = r.run
			continue
		}
		require.ErrorIs(t, r.err, rtstore.ErrSessionBusy)
	}
	require.NotNil(t, winner)
	require.NoError(t, b.store.Commit(b.ctx(), &rtstore.Commit{SessionID: s.ID, RunID: winner.ID,
		Status: rtstore.StatusCompleted, Phase: "result"}))

	// The same request: one creates it, every other gets that run back.
	res = insert(func(int) string { return "req-same" })
	var created int
	var id string
	for _, r := range res {
		require.NoError(t, r.err)
		if r.created {
			created++
		}
		if id == "" {
			id = r.run.ID
		}
		require.Equal(t, id, r.run.ID)
	}
	require.Equal(t, 1, created)
	recs, err := b.store.JournalList(b.ctx(), id, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.newSession(t)
	run := b.newRun(t, s.ID, nil)
	ctx, cancel := context.WithCancel(b.ctx())
	cancel()
	err := b.store.Commit(ctx, &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusFailed, Phase: "x"})
	require.ErrorIs(t, err, context.Canceled)
	_, err = b.store.RunGet(ctx, run.ID)
	require.ErrorIs(t, err, context.Canceled)
	got, err := b.store.RunGet(b.ctx(), run.ID)
	require.NoError(t, err)
	require.Equal(t, rtstore.StatusRunning, got.Status)
}

func TestArtifactUnknownSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.store.ArtifactPut(b.ctx(), "ses-missing", digest("a"), []byte("a"))
	require.ErrorIs(t, err, rtstore.ErrNotFound)
	_, err = b.store.ArtifactGet(b.ctx(), digest("a"))
	require.ErrorIs(t, err, rtstore.ErrNotFound, "nothing stored")
	require.Error(t, b.store.ArtifactPut(b.ctx(), b.newSession(t).ID, digest("a"), []byte("b")), "digest checked")
}

// TestWriterBypassingLease commits records with no lease between two
// commits of a lease: the lease's cached seqs are then stale, and the commit
// recovers by reading them again instead of failing or leaving a gap.
func TestWriterBypassingLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, l, run := b.leasedRun(t)
	commit := func(le rtstore.Lease) *rtstore.Commit {
		c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Lease: le, Status: rtstore.StatusRunning, Phase: "model",
			Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{}`)},
			Events:  []rtstore.PendingEvent{event(s.ID, run.ID, "text_delta")}}
		require.NoError(t, b.store.Commit(b.ctx(), c))
		return c
	}
	commit(l)
	// A second store (another process) writes without the lease.
	cfg := b.cfg
	cfg.AutoMigrate = false
	other := openStore(t, cfg)
	c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning, Phase: "model",
		Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{}`)},
		Events:  []rtstore.PendingEvent{event(s.ID, run.ID, "text_delta")}}
	require.NoError(t, other.Commit(b.ctx(), c))
	last := commit(l)
	require.Equal(t, "3", last.Events[0].Event.Cursor)
	recs, err := b.store.JournalList(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 1+3*2)
	for i, r := range recs {
		require.Equal(t, int64(i+1), r.Seq)
	}
	require.NoError(t, l.Release(b.ctx()))
}

func TestListsWithoutLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.newSession(t)
	run := b.newRun(t, s.ID, nil)
	runs, err := b.store.RunList(b.ctx(), s.ID, rtstore.ListParams{})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	sessions, err := b.store.SessionList(b.ctx(), &rtstore.SessionListParams{Principal: "alice"})
	require.NoError(t, err)
	require.Len(t, sessions, 1)
	recs, err := b.store.JournalList(b.ctx(), run.ID, 0, -1)
	require.NoError(t, err)
	require.Len(t, recs, 1)
}

func TestSnapshotSeesOneInstant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.newSession(t)
	run := b.newRun(t, s.ID, nil)
	err := b.store.RunSnapshot(b.ctx(), run.ID, func(r *rtstore.RunRow, records func(func(journal.Record) error) error) error {
		// A commit lands while the export reads: the export does not see it.
		require.NoError(t, b.store.Commit(b.ctx(), &rtstore.Commit{SessionID: s.ID, RunID: run.ID,
			Status: rtstore.StatusCompleted, Phase: "result",
			Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{}`)}}))
		var n int
		if err := records(func(journal.Record) error { n++; return nil }); err != nil {
			return err
		}
		require.Equal(t, 1, n)
		require.Equal(t, rtstore.StatusRunning, r.Status)
		return errors.New("done")
	})
	require.EqualError(t, err, "done")
	recs, err := b.store.JournalList(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 2)
}

func TestRetriesSerializationFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, code := range []string{"40001", "40P01"} {
		n, err := b.store.FailingTx(b.ctx(), 2, code)
		require.NoError(t, err, code)
		require.Equal(t, 3, n, code)

		n, err = b.store.FailingTx(b.ctx(), 3, code)
		require.ErrorIs(t, err, rtstore.ErrUnavailable, code)
		require.Equal(t, 3, n, code)
		require.Contains(t, err.Error(), "SQLSTATE "+code)
	}
	// Other failures are not retried.
	n, err := b.store.FailingTx(b.ctx(), 1, "23505")
	require.Error(t, err)
	require.Equal(t, 1, n)
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := postgres.Config{URL: testURL(t), Schema: newSchemaName(t, "hxd_defaults_"), AutoMigrate: true}
	st := openStore(t, cfg)
	require.Equal(t, postgres.DefaultLeaseDuration, st.LeaseDuration())
	// PoolSize 0 is the default pool, plus the reserved lease connections.
	require.Equal(t, postgres.DefaultPoolSize, st.PoolSize())
	pool, lease := st.PoolMaxConns()
	require.Equal(t, int32(postgres.DefaultPoolSize), pool)
	require.Equal(t, int32(postgres.LeaseConns), lease)
	require.NoError(t, st.Ping(ctx))
	// Twice the default pool's worth of concurrent work completes.
	var wg sync.WaitGroup
	errs := make(chan error, 2*postgres.DefaultPoolSize)
	for range 2 * postgres.DefaultPoolSize {
		wg.Go(func() {
			s := &rtstore.SessionRow{ID: "ses-" + uuid.NewString(), Principal: "p"}
			if err := st.SessionInsert(ctx, s); err != nil {
				errs <- err
				return
			}
			_, err := st.SessionLock(ctx, s.ID)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
