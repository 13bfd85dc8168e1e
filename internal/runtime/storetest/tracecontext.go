package storetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// Two W3C traceparents, as the runtime saves them (issue 24).
const (
	traceContextA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traceContextB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

var traceContextCases = []testCase{
	{"InsertStoresIt", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		p := runParams(s.ID, "req-1", "digest-1")
		p.Run.TraceContext = traceContextA
		run, created, err := b.store.RunInsert(t.Context(), p)
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, traceContextA, run.TraceContext)

		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, traceContextA, got.TraceContext)
		listed, err := b.store.RunList(t.Context(), s.ID, rtstore.ListParams{Limit: all})
		require.NoError(t, err)
		require.Len(t, listed, 1)
		require.Equal(t, traceContextA, listed[0].TraceContext)
		byStatus, err := b.store.RunListByStatus(t.Context(), rtstore.StatusRunning)
		require.NoError(t, err)
		found := false
		for _, r := range byStatus {
			if r.ID == run.ID {
				found = true
				require.Equal(t, traceContextA, r.TraceContext)
			}
		}
		require.True(t, found)
	}},
	{"NoneIsEmpty", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		require.Empty(t, run.TraceContext)
		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Empty(t, got.TraceContext)
	}},
	{"CommitReplacesIt", func(t *testing.T, b *bundle) {
		// A resume commits its attempt's trace context with its boundary;
		// a commit without one keeps the stored one. Under a lease, with
		// the run's seqs known to the store (the commit's fast path where
		// a store has one).
		s := b.newSession(t, "alice")
		p := runParams(s.ID, "req-1", "digest-1")
		p.Run.TraceContext = traceContextA
		run, _, err := b.store.RunInsert(t.Context(), p)
		require.NoError(t, err)
		lease, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(t.Context()) })

		c := commitFor(run, rtstore.StatusRunning, "model")
		c.Lease = lease
		c.Records = []journal.Record{newRecord(s.ID, run.ID, journal.KindModelStarted, `{}`)}
		require.NoError(t, b.store.Commit(t.Context(), c))
		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, traceContextA, got.TraceContext, "a commit without one keeps it")

		c = commitFor(run, rtstore.StatusRunning, "tools")
		c.Lease = lease
		c.Records = []journal.Record{newRecord(s.ID, run.ID, journal.KindRunResumed, `{}`)}
		c.TraceContext = traceContextB
		require.NoError(t, b.store.Commit(t.Context(), c))
		got, err = b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, traceContextB, got.TraceContext)
		require.Equal(t, "tools", got.Phase)

		// An unleased commit (the careful path) sets it too.
		c = commitFor(run, rtstore.StatusRunning, "finish")
		c.TraceContext = traceContextA
		require.NoError(t, b.store.Commit(t.Context(), c))
		got, err = b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, traceContextA, got.TraceContext)
	}},
	{"Bounded", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		p := runParams(s.ID, "req-1", "digest-1")
		p.Run.TraceContext = strings.Repeat("x", rtstore.MaxTraceContext+1)
		_, _, err := b.store.RunInsert(t.Context(), p)
		require.Error(t, err)

		run := b.newRun(t, s.ID)
		c := commitFor(run, rtstore.StatusRunning, "model")
		c.TraceContext = strings.Repeat("x", rtstore.MaxTraceContext+1)
		require.Error(t, b.store.Commit(t.Context(), c))
		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Empty(t, got.TraceContext)
		require.NotEqual(t, "model", got.Phase, "nothing written")
	}},
	{"DeltaOnlyRefusesIt", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		lease, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(t.Context()) })
		c := deltaCommit(run, lease, 1)
		c.TraceContext = traceContextB
		require.ErrorIs(t, b.store.Commit(t.Context(), c), rtstore.ErrInvalidCommit)
		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Empty(t, got.TraceContext)
	}},
}
