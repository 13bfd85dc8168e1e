package storetest

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

var runCases = []testCase{
	{"InsertAppliesCommit", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		p := runParams(s.ID, "req-1", "digest-1")
		p.Commit.Events = []rtstore.PendingEvent{newEvent(s.ID, p.Run.ID, "waiting", true)}

		run, created, err := b.store.RunInsert(t.Context(), p)
		require.NoError(t, err)
		require.True(t, created)
		require.Positive(t, run.Seq)
		require.Equal(t, p.Run.ID, run.ID)
		require.Equal(t, s.ID, run.SessionID)
		require.Equal(t, "req-1", run.RequestID)
		require.Equal(t, "digest-1", run.MessageDigest)
		require.Equal(t, rtstore.StatusRunning, run.Status)
		require.Equal(t, "prepare_model", run.Phase)
		require.JSONEq(t, string(p.Commit.State), string(run.State))
		require.False(t, run.CreatedAt.IsZero())
		require.Equal(t, "1", p.Commit.Events[0].Event.Cursor)

		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, run, got)

		recs := b.journalOf(t, run.ID)
		requireContiguous(t, recs)
		require.Equal(t, []journal.Kind{journal.KindRunStarted, journal.KindCheckpoint, journal.KindEvent}, kinds(recs))
	}},
	{"InsertIdempotent", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		first, created, err := b.store.RunInsert(t.Context(), runParams(s.ID, "req-1", "digest-1"))
		require.NoError(t, err)
		require.True(t, created)

		// Same request, same message: the stored run, nothing applied again.
		again, created, err := b.store.RunInsert(t.Context(), runParams(s.ID, "req-1", "digest-1"))
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, first.Seq, again.Seq)
		require.Len(t, b.journalOf(t, first.ID), 2)

		// Same request, different message.
		_, _, err = b.store.RunInsert(t.Context(), runParams(s.ID, "req-1", "digest-2"))
		require.ErrorIs(t, err, rtstore.ErrRequestConflict)

		runs, err := b.store.RunList(t.Context(), s.ID, rtstore.ListParams{Limit: all})
		require.NoError(t, err)
		require.Len(t, runs, 1)
	}},
	{"InsertUnknownSession", func(t *testing.T, b *bundle) {
		_, _, err := b.store.RunInsert(t.Context(), runParams("ses-missing", "req-1", "d"))
		require.ErrorIs(t, err, rtstore.ErrNotFound)
	}},
	{"InsertBusy", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		for _, st := range []rtstore.RunStatus{
			rtstore.StatusRunning, rtstore.StatusPaused, rtstore.StatusAwaitingInput, rtstore.StatusFailed,
		} {
			require.NoError(t, b.store.Commit(t.Context(), commitFor(run, st, "x")))
			_, _, err := b.store.RunInsert(t.Context(), runParams(s.ID, "req-"+uuid.NewString(), "d"))
			require.ErrorIs(t, err, rtstore.ErrSessionBusy, "status %s", st)
		}
		for _, st := range []rtstore.RunStatus{rtstore.StatusCompleted, rtstore.StatusCancelled} {
			require.NoError(t, b.store.Commit(t.Context(), commitFor(run, st, "result")))
			require.NoError(t, b.store.SessionControlSet(t.Context(), s.ID, rtstore.ControlCancelled))

			run = b.newRun(t, s.ID)
			control, err := b.store.SessionControlGet(t.Context(), s.ID)
			require.NoError(t, err)
			require.Equal(t, rtstore.ControlNone, control, "a new run resets control")
		}
		runs, err := b.store.RunList(t.Context(), s.ID, rtstore.ListParams{Limit: all})
		require.NoError(t, err)
		require.Len(t, runs, 3)
	}},
	{"InsertFailedCommitWritesNothing", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		p := runParams(s.ID, "req-1", "d")
		p.Commit.Records[1].RunID = "run-other"
		_, _, err := b.store.RunInsert(t.Context(), p)
		require.ErrorIs(t, err, rtstore.ErrForeignRecord)

		_, err = b.store.RunGet(t.Context(), p.Run.ID)
		require.ErrorIs(t, err, rtstore.ErrNotFound)
		got, err := b.store.SessionGet(t.Context(), s.ID)
		require.NoError(t, err)
		require.Empty(t, got.LastRunID)
		b.newRun(t, s.ID) // the session is not busy
	}},
	{"GetNotFound", func(t *testing.T, b *bundle) {
		_, err := b.store.RunGet(t.Context(), "run-missing")
		require.ErrorIs(t, err, rtstore.ErrNotFound)
	}},
	{"ListPaging", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		other := b.newSession(t, "alice")
		var want []string
		for range 5 {
			run := b.newRun(t, s.ID)
			want = append(want, run.ID)
			require.NoError(t, b.store.Commit(t.Context(), commitFor(run, rtstore.StatusCompleted, "result")))
			interleaved := b.newRun(t, other.ID)
			require.NoError(t, b.store.Commit(t.Context(), commitFor(interleaved, rtstore.StatusCompleted, "result")))
		}
		var got []string
		after := int64(0)
		for {
			page, err := b.store.RunList(t.Context(), s.ID, rtstore.ListParams{After: after, Limit: 2})
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			require.LessOrEqual(t, len(page), 2)
			for _, r := range page {
				require.Equal(t, s.ID, r.SessionID)
				require.Greater(t, r.Seq, after)
				after = r.Seq
				got = append(got, r.ID)
			}
		}
		require.Equal(t, want, got)

		none, err := b.store.RunList(t.Context(), "ses-missing", rtstore.ListParams{Limit: all})
		require.NoError(t, err)
		require.Empty(t, none)
	}},
	{"ListByStatus", func(t *testing.T, b *bundle) {
		var running []string
		for range 3 {
			s := b.newSession(t, "alice")
			run := b.newRun(t, s.ID)
			running = append(running, run.ID)
			done := b.newSession(t, "bob")
			require.NoError(t, b.store.Commit(t.Context(), commitFor(b.newRun(t, done.ID), rtstore.StatusFailed, "result")))
		}
		got, err := b.store.RunListByStatus(t.Context(), rtstore.StatusRunning)
		require.NoError(t, err)
		var ids []string
		for i, r := range got {
			require.Equal(t, rtstore.StatusRunning, r.Status)
			if i > 0 {
				require.Greater(t, r.Seq, got[i-1].Seq)
			}
			ids = append(ids, r.ID)
		}
		require.Equal(t, running, ids)

		failed, err := b.store.RunListByStatus(t.Context(), rtstore.StatusFailed)
		require.NoError(t, err)
		require.Len(t, failed, 3)
		none, err := b.store.RunListByStatus(t.Context(), rtstore.StatusPaused)
		require.NoError(t, err)
		require.Empty(t, none)
	}},
}
