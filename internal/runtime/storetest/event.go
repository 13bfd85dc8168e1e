package storetest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

var eventCases = []testCase{
	{"Cursors", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		c := commitFor(run, rtstore.StatusRunning, "model")
		c.Records = []journal.Record{newRecord(s.ID, run.ID, journal.KindCheckpoint, `{}`)}
		c.Events = []rtstore.PendingEvent{
			newEvent(s.ID, run.ID, "text_delta", true),
			newEvent(s.ID, run.ID, "text_delta", false), // not recorded
			newEvent(s.ID, run.ID, "text_complete", true),
		}
		require.NoError(t, b.store.Commit(t.Context(), c))
		for i, pe := range c.Events {
			require.Equal(t, fmt.Sprint(i+1), pe.Event.Cursor)
		}

		evs := b.eventsOf(t, run.ID)
		require.Len(t, evs, 3)
		for i, ev := range evs {
			want := c.Events[i].Event
			require.JSONEq(t, string(want.Data), string(ev.Data))
			require.False(t, ev.CreatedAt.IsZero(), "the store assigns created_at")
			want.Data, ev.Data = nil, nil
			want.CreatedAt = ev.CreatedAt // checked by createdCases
			require.Equal(t, want, ev)
		}

		// Event records follow the commit's records; their payload is the
		// event with its cursor.
		recs := b.journalOf(t, run.ID)
		requireContiguous(t, recs)
		require.Equal(t, []journal.Kind{
			journal.KindRunStarted, journal.KindCheckpoint, journal.KindCheckpoint,
			journal.KindEvent, journal.KindEvent,
		}, kinds(recs))
		for i, pe := range []rtstore.PendingEvent{c.Events[0], c.Events[2]} {
			rec := recs[3+i]
			require.Equal(t, pe.Record.ID, rec.ID)
			var ev rtstore.RunEvent
			require.NoError(t, json.Unmarshal(rec.Payload, &ev))
			require.Equal(t, pe.Event.Cursor, ev.Cursor)
			require.Equal(t, pe.Event.EventID, ev.EventID)
			require.JSONEq(t, string(pe.Event.Data), string(ev.Data))
		}

		// Cursors continue across commits and are per run.
		c = commitFor(run, rtstore.StatusRunning, "model")
		c.Events = []rtstore.PendingEvent{newEvent(s.ID, run.ID, "turn_complete", true)}
		require.NoError(t, b.store.Commit(t.Context(), c))
		require.Equal(t, "4", c.Events[0].Event.Cursor)

		other := b.newRun(t, b.newSession(t, "alice").ID)
		c = commitFor(other, rtstore.StatusRunning, "model")
		c.Events = []rtstore.PendingEvent{newEvent(other.SessionID, other.ID, "text_delta", false)}
		require.NoError(t, b.store.Commit(t.Context(), c))
		require.Equal(t, "1", c.Events[0].Event.Cursor)
	}},
	{"DuplicateSkipped", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		e1, e2 := newEvent(s.ID, run.ID, "text_delta", true), newEvent(s.ID, run.ID, "text_delta", true)
		c := commitFor(run, rtstore.StatusRunning, "model")
		c.Events = []rtstore.PendingEvent{e1, e2}
		require.NoError(t, b.store.Commit(t.Context(), c))

		// e2 again, with a new record id: skipped together with its record.
		dup := newEvent(s.ID, run.ID, "text_delta", true)
		dup.Event.EventID = e2.Event.EventID
		e3 := newEvent(s.ID, run.ID, "text_complete", true)
		c = commitFor(run, rtstore.StatusRunning, "model")
		c.Events = []rtstore.PendingEvent{dup, e3}
		require.NoError(t, b.store.Commit(t.Context(), c))
		require.Equal(t, "3", c.Events[1].Event.Cursor)

		evs := b.eventsOf(t, run.ID)
		require.Len(t, evs, 3)
		for i, want := range []string{e1.Event.EventID, e2.Event.EventID, e3.Event.EventID} {
			require.Equal(t, want, evs[i].EventID)
			require.Equal(t, fmt.Sprint(i+1), evs[i].Cursor)
		}
		recs := b.journalOf(t, run.ID)
		requireContiguous(t, recs)
		require.Equal(t, []string{recs[0].ID, recs[1].ID, e1.Record.ID, e2.Record.ID, e3.Record.ID}, recordIDs(recs))
		require.NotContains(t, recordIDs(recs), dup.Record.ID)
	}},
	{"ListPaging", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		c := commitFor(run, rtstore.StatusRunning, "model")
		for range 5 {
			c.Events = append(c.Events, newEvent(s.ID, run.ID, "text_delta", true))
		}
		require.NoError(t, b.store.Commit(t.Context(), c))

		page, err := b.store.EventListAfter(t.Context(), run.ID, 2, 2)
		require.NoError(t, err)
		require.Len(t, page, 2)
		require.Equal(t, "3", page[0].Cursor)
		require.Equal(t, "4", page[1].Cursor)
		page, err = b.store.EventListAfter(t.Context(), run.ID, 4, 10)
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.Equal(t, c.Events[4].Event.EventID, page[0].EventID)
		page, err = b.store.EventListAfter(t.Context(), run.ID, 5, 10)
		require.NoError(t, err)
		require.Empty(t, page)
		page, err = b.store.EventListAfter(t.Context(), "run-missing", 0, 10)
		require.NoError(t, err)
		require.Empty(t, page)
	}},
	{"JournalPaging", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID) // seq 1, 2
		c := commitFor(run, rtstore.StatusRunning, "model")
		for range 4 {
			c.Records = append(c.Records, newRecord(s.ID, run.ID, journal.KindModelStarted, `{"n":1}`))
		}
		require.NoError(t, b.store.Commit(t.Context(), c)) // seq 3..6

		page, err := b.store.JournalList(t.Context(), run.ID, 2, 3)
		require.NoError(t, err)
		require.Len(t, page, 3)
		for i, r := range page {
			want := c.Records[i]
			want.Seq = int64(3 + i)
			requireRecord(t, want, r)
		}
		page, err = b.store.JournalList(t.Context(), run.ID, 5, 10)
		require.NoError(t, err)
		require.Len(t, page, 1)
		require.Equal(t, int64(6), page[0].Seq)
		page, err = b.store.JournalList(t.Context(), run.ID, 6, 10)
		require.NoError(t, err)
		require.Empty(t, page)
		page, err = b.store.JournalList(t.Context(), "run-missing", 0, 10)
		require.NoError(t, err)
		require.Empty(t, page)
	}},
}
