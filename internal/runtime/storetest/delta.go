package storetest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// deltaCommit is a DeltaOnly commit of run under lease with n text_delta
// events (each with its record).
func deltaCommit(run *rtstore.RunRow, lease rtstore.Lease, n int) *rtstore.Commit {
	c := &rtstore.Commit{SessionID: run.SessionID, RunID: run.ID, Lease: lease, DeltaOnly: true}
	for range n {
		pe := newEvent(run.SessionID, run.ID, "text_delta", true)
		pe.Event.Data = json.RawMessage(`"piece "`)
		c.Events = append(c.Events, pe)
	}
	return c
}

var deltaCases = []testCase{
	{"AppendsOnlyEvents", func(t *testing.T, b *bundle) {
		// A delta-only commit between two boundaries appends its events
		// and their records, numbered on, and no checkpoint; the run row
		// and its state stay as the boundary before left them.
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		lease, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(t.Context()) })
		c := commitFor(run, rtstore.StatusRunning, "model")
		c.Lease = lease
		c.Records = []journal.Record{
			newRecord(s.ID, run.ID, journal.KindModelStarted, `{}`),
			newRecord(s.ID, run.ID, journal.KindCheckpoint, `{"phase":"model"}`),
		}
		require.NoError(t, b.store.Commit(t.Context(), c))
		before, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)

		d := deltaCommit(run, lease, 3)
		require.NoError(t, b.store.Commit(t.Context(), d))
		for i, pe := range d.Events {
			require.Equal(t, []string{"1", "2", "3"}[i], pe.Event.Cursor)
		}
		d2 := deltaCommit(run, lease, 1)
		require.NoError(t, b.store.Commit(t.Context(), d2))
		require.Equal(t, "4", d2.Events[0].Event.Cursor)

		after, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, before.Status, after.Status)
		require.Equal(t, before.Phase, after.Phase)
		require.JSONEq(t, string(before.State), string(after.State))
		require.True(t, after.UpdatedAt.Equal(before.UpdatedAt), "a delta-only commit does not touch the run row")

		// The next boundary follows the deltas.
		c = commitFor(run, rtstore.StatusCompleted, "result")
		c.Lease = lease
		c.Records = []journal.Record{
			newRecord(s.ID, run.ID, journal.KindModelCompleted, `{}`),
			newRecord(s.ID, run.ID, journal.KindCheckpoint, `{"phase":"result"}`),
		}
		c.Events = []rtstore.PendingEvent{newEvent(s.ID, run.ID, "run_result", true)}
		require.NoError(t, b.store.Commit(t.Context(), c))

		recs := b.journalOf(t, run.ID)
		requireContiguous(t, recs)
		require.Equal(t, []journal.Kind{
			journal.KindRunStarted, journal.KindCheckpoint,
			journal.KindModelStarted, journal.KindCheckpoint,
			journal.KindEvent, journal.KindEvent, journal.KindEvent, journal.KindEvent,
			journal.KindModelCompleted, journal.KindCheckpoint, journal.KindEvent,
		}, kinds(recs))
		// Each delta record holds its event, cursor included.
		var ev rtstore.RunEvent
		require.NoError(t, json.Unmarshal(recs[4].Payload, &ev))
		require.Equal(t, "text_delta", ev.Type)
		require.Equal(t, "1", ev.Cursor)
		require.JSONEq(t, `"piece "`, string(ev.Data))

		evs := b.eventsOf(t, run.ID)
		require.Len(t, evs, 5)
		require.Equal(t, "run_result", evs[4].Type)
		require.Equal(t, "5", evs[4].Cursor)
	}},
	{"FencedByLease", func(t *testing.T, b *bundle) {
		// A lost lease refuses a delta-only commit: nothing is written.
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		l1, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		c := commitFor(run, rtstore.StatusRunning, "model")
		c.Lease = l1
		require.NoError(t, b.store.Commit(t.Context(), c))
		require.NoError(t, b.store.Commit(t.Context(), deltaCommit(run, l1, 1)))
		require.NoError(t, l1.Release(t.Context()))
		l2, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l2.Release(t.Context()) })

		require.ErrorIs(t, b.store.Commit(t.Context(), deltaCommit(run, l1, 2)), rtstore.ErrLeaseLost)
		require.Len(t, b.eventsOf(t, run.ID), 1)
		require.Len(t, b.journalOf(t, run.ID), 3)
		// The new owner's deltas go on.
		require.NoError(t, b.store.Commit(t.Context(), deltaCommit(run, l2, 1)))
		require.Len(t, b.eventsOf(t, run.ID), 2)
		requireContiguous(t, b.journalOf(t, run.ID))
	}},
	{"IdempotentResend", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		lease, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(t.Context()) })
		d := deltaCommit(run, lease, 2)
		require.NoError(t, b.store.Commit(t.Context(), d))
		again := *d
		again.Events = append([]rtstore.PendingEvent(nil), d.Events...)
		again.Events = append(again.Events, deltaCommit(run, lease, 1).Events...)
		require.NoError(t, b.store.Commit(t.Context(), &again))
		require.Equal(t, "3", again.Events[2].Event.Cursor)
		require.Len(t, b.eventsOf(t, run.ID), 3)
		recs := b.journalOf(t, run.ID)
		require.Len(t, recs, 5)
		requireContiguous(t, recs)
	}},
	{"Refusals", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		lease, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(t.Context()) })
		// An unknown run, a run of another session.
		missing := deltaCommit(&rtstore.RunRow{ID: "run-missing", SessionID: s.ID}, lease, 1)
		require.ErrorIs(t, b.store.Commit(t.Context(), missing), rtstore.ErrNotFound)
		other := b.newSession(t, "alice")
		ol, err := b.store.SessionLock(t.Context(), other.ID)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ol.Release(t.Context()) })
		foreign := deltaCommit(run, ol, 1)
		foreign.SessionID = other.ID
		require.ErrorIs(t, b.store.Commit(t.Context(), foreign), rtstore.ErrNotFound)
		// A delta-only commit that names more than events.
		for name, edit := range map[string]func(c *rtstore.Commit){
			"status": func(c *rtstore.Commit) { c.Status = rtstore.StatusCompleted },
			"state":  func(c *rtstore.Commit) { c.State = json.RawMessage(`{}`) },
			"step":   func(c *rtstore.Commit) { c.StepID, c.Step = "1", json.RawMessage(`{}`) },
			"tools": func(c *rtstore.Commit) {
				c.Tools = []rtstore.ToolRow{{ExecutionKey: "k", Payload: json.RawMessage(`{}`)}}
			},
			"checkpoint": func(c *rtstore.Commit) {
				c.Records = []journal.Record{newRecord(s.ID, run.ID, journal.KindCheckpoint, `{}`)}
			},
		} {
			c := deltaCommit(run, lease, 1)
			edit(c)
			require.ErrorIs(t, b.store.Commit(t.Context(), c), rtstore.ErrInvalidCommit, name)
		}
		require.Empty(t, b.eventsOf(t, run.ID))
		require.Len(t, b.journalOf(t, run.ID), 2)
		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, rtstore.StatusRunning, got.Status)
	}},
}
