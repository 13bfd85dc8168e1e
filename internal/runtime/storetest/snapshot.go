package storetest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

var snapshotCases = []testCase{
	{"ConsistentCut", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		c := commitFor(run, rtstore.StatusCompleted, "result")
		c.Records = []journal.Record{
			newRecord(s.ID, run.ID, journal.KindModelCompleted, `{"text":"done"}`),
			newRecord(s.ID, run.ID, journal.KindCheckpoint, `{"phase":"result","status":"completed"}`),
		}
		require.NoError(t, b.store.Commit(t.Context(), c))
		var got []journal.Record
		var row *rtstore.RunRow
		err := b.store.RunSnapshot(t.Context(), run.ID, func(r *rtstore.RunRow, records func(func(journal.Record) error) error) error {
			row = r
			return records(func(rec journal.Record) error {
				got = append(got, rec)
				return nil
			})
		})
		require.NoError(t, err)
		require.Equal(t, rtstore.StatusCompleted, row.Status)
		require.Equal(t, "result", row.Phase)
		requireContiguous(t, got)
		require.Equal(t, b.journalOf(t, run.ID), got)
	}},
	{"CallbackErrorStops", func(t *testing.T, b *bundle) {
		run := b.newRun(t, b.newSession(t, "alice").ID)
		stop := errors.New("enough")
		n := 0
		err := b.store.RunSnapshot(t.Context(), run.ID, func(_ *rtstore.RunRow, records func(func(journal.Record) error) error) error {
			return records(func(journal.Record) error {
				n++
				return stop
			})
		})
		require.ErrorIs(t, err, stop)
		require.Equal(t, 1, n)
	}},
	{"UnknownRun", func(t *testing.T, b *bundle) {
		err := b.store.RunSnapshot(t.Context(), "no-such-run", func(*rtstore.RunRow, func(func(journal.Record) error) error) error { return nil })
		require.ErrorIs(t, err, rtstore.ErrNotFound)
	}},
}
