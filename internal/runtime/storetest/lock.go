package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

var lockCases = []testCase{
	{"Busy", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		l1, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		require.Equal(t, s.ID, l1.SessionID())
		require.NotEmpty(t, l1.Token())

		_, err = b.store.SessionLock(t.Context(), s.ID)
		require.ErrorIs(t, err, rtstore.ErrSessionBusy)

		// Another session is independent.
		other := b.newSession(t, "alice")
		l3, err := b.store.SessionLock(t.Context(), other.ID)
		require.NoError(t, err)
		require.NoError(t, l3.Release(t.Context()))

		require.NoError(t, l1.Release(t.Context()))
	}},
	{"Retake", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		l1, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		require.NoError(t, l1.Release(t.Context()))

		l2, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		require.NotEqual(t, l1.Token(), l2.Token())
		require.GreaterOrEqual(t, l2.Generation(), l1.Generation())

		// A stale lease's Release is a no-op: l2 still owns the session.
		require.NoError(t, l1.Release(t.Context()))
		_, err = b.store.SessionLock(t.Context(), s.ID)
		require.ErrorIs(t, err, rtstore.ErrSessionBusy)

		require.NoError(t, l2.Release(t.Context()))
		require.NoError(t, l2.Release(t.Context()))
	}},
	{"Renew", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		l, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		require.NoError(t, l.Renew(t.Context()))
		require.NoError(t, l.Renew(t.Context()))

		// A renewed lease still fences commits.
		p := runParams(s.ID, "req-1", "d")
		p.Commit.Lease = l
		_, _, err = b.store.RunInsert(t.Context(), p)
		require.NoError(t, err)

		require.NoError(t, l.Release(t.Context()))
		require.ErrorIs(t, l.Renew(t.Context()), rtstore.ErrLeaseLost)
		// Renewing a released lease does not take the session back.
		l2, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		require.ErrorIs(t, l.Renew(t.Context()), rtstore.ErrLeaseLost)
		require.NoError(t, l2.Renew(t.Context()))
		require.NoError(t, l2.Release(t.Context()))
	}},
	{"CommitFenced", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		l1, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		p := runParams(s.ID, "req-1", "d")
		p.Commit.Lease = l1
		run, _, err := b.store.RunInsert(t.Context(), p)
		require.NoError(t, err)

		c := commitFor(run, rtstore.StatusRunning, "model")
		c.Lease = l1
		require.NoError(t, b.store.Commit(t.Context(), c))

		require.NoError(t, l1.Release(t.Context()))
		c = commitFor(run, rtstore.StatusCompleted, "result")
		c.Lease = l1
		c.Records = []journal.Record{newRecord(s.ID, run.ID, journal.KindCheckpoint, `{}`)}
		require.ErrorIs(t, b.store.Commit(t.Context(), c), rtstore.ErrLeaseLost)

		// Still lost after someone else took the session.
		l2, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		require.ErrorIs(t, b.store.Commit(t.Context(), c), rtstore.ErrLeaseLost)

		// A lease of another session does not fence this one.
		other := b.newSession(t, "alice")
		l3, err := b.store.SessionLock(t.Context(), other.ID)
		require.NoError(t, err)
		c.Lease = l3
		require.ErrorIs(t, b.store.Commit(t.Context(), c), rtstore.ErrLeaseLost)

		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, rtstore.StatusRunning, got.Status)
		require.Len(t, b.journalOf(t, run.ID), 2)

		c.Lease = l2
		require.NoError(t, b.store.Commit(t.Context(), c))
		require.NoError(t, l2.Release(t.Context()))
		require.NoError(t, l3.Release(t.Context()))
	}},
	{"RunInsertFenced", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		l, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		require.NoError(t, l.Release(t.Context()))
		p := runParams(s.ID, "req-1", "d")
		p.Commit.Lease = l
		_, _, err = b.store.RunInsert(t.Context(), p)
		require.ErrorIs(t, err, rtstore.ErrLeaseLost)
		_, err = b.store.RunGet(t.Context(), p.Run.ID)
		require.ErrorIs(t, err, rtstore.ErrNotFound)
	}},
}
