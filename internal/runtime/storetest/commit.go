package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

var commitCases = []testCase{
	{"UnfencedCommitBetweenLeasedOnes", func(t *testing.T, b *bundle) {
		// A commit without a lease between two of the lease holder's: the
		// holder's next commit still sets the status it names, and its
		// events and records follow the unfenced ones.
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		lease, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(t.Context()) })
		commit := func(l rtstore.Lease, status rtstore.RunStatus, phase string) {
			t.Helper()
			c := commitFor(run, status, phase)
			c.Lease = l
			c.Records = []journal.Record{newRecord(s.ID, run.ID, journal.KindCheckpoint, `{}`)}
			c.Events = []rtstore.PendingEvent{newEvent(s.ID, run.ID, "waiting", true)}
			require.NoError(t, b.store.Commit(t.Context(), c))
		}
		commit(lease, rtstore.StatusRunning, "model")
		commit(nil, rtstore.StatusPaused, "x")
		commit(lease, rtstore.StatusRunning, "y")
		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, rtstore.StatusRunning, got.Status)
		require.Equal(t, "y", got.Phase)
		requireContiguous(t, b.journalOf(t, run.ID))
		evs := b.eventsOf(t, run.ID)
		require.Len(t, evs, 3)
		for i, ev := range evs {
			require.Equal(t, fmt.Sprint(i+1), ev.Cursor)
		}
	}},
	{"Persists", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		key := run.ID + ":1:call-1"
		c := commitFor(run, rtstore.StatusAwaitingInput, "tools")
		c.StepID, c.Step = "1", json.RawMessage(`{"iteration":1}`)
		c.Tools = []rtstore.ToolRow{
			{ExecutionKey: key, Payload: json.RawMessage(`{"status":"approval"}`)},
			{ExecutionKey: run.ID + ":1:call-2", HasOutcome: true, Payload: json.RawMessage(`{"status":"completed"}`)},
		}
		started := newRecord(s.ID, run.ID, journal.KindToolStarted, `{"name":"lookup"}`)
		started.ExecutionKey = &key
		c.Records = []journal.Record{
			newRecord(s.ID, run.ID, journal.KindModelCompleted, `{"usage":{"input_tokens":3}}`),
			started,
			newRecord(s.ID, run.ID, journal.KindCheckpoint, `{"phase":"tools"}`),
		}
		c.Events = []rtstore.PendingEvent{
			newEvent(s.ID, run.ID, "approval_required", true),
			newEvent(s.ID, run.ID, "waiting", true),
		}
		require.NoError(t, b.store.Commit(t.Context(), c))

		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, rtstore.StatusAwaitingInput, got.Status)
		require.Equal(t, "tools", got.Phase)
		require.JSONEq(t, string(c.State), string(got.State))
		require.False(t, got.UpdatedAt.Before(got.CreatedAt))

		// Boundary records in order, then the checkpoint, then the event
		// records, numbered on from the run's first commit.
		recs := b.journalOf(t, run.ID)
		requireContiguous(t, recs)
		require.Equal(t, []journal.Kind{
			journal.KindRunStarted, journal.KindCheckpoint,
			journal.KindModelCompleted, journal.KindToolStarted, journal.KindCheckpoint,
			journal.KindEvent, journal.KindEvent,
		}, kinds(recs))
		want := c.Records[1]
		want.Seq = 4
		requireRecord(t, want, recs[3])
	}},
	{"NilStateKeepsState", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		c := commitFor(run, rtstore.StatusPaused, "model")
		c.State = nil
		require.NoError(t, b.store.Commit(t.Context(), c))
		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, rtstore.StatusPaused, got.Status)
		require.JSONEq(t, string(run.State), string(got.State))
	}},
	{"SeqPerRun", func(t *testing.T, b *bundle) {
		s1, s2 := b.newSession(t, "alice"), b.newSession(t, "alice")
		r1, r2 := b.newRun(t, s1.ID), b.newRun(t, s2.ID)
		for range 3 {
			for _, run := range []*rtstore.RunRow{r1, r2} {
				c := commitFor(run, rtstore.StatusRunning, "model")
				c.Records = []journal.Record{newRecord(run.SessionID, run.ID, journal.KindModelStarted, `{}`)}
				require.NoError(t, b.store.Commit(t.Context(), c))
			}
		}
		for _, run := range []*rtstore.RunRow{r1, r2} {
			recs := b.journalOf(t, run.ID)
			require.Len(t, recs, 5)
			requireContiguous(t, recs)
		}
	}},
	{"IdempotentResend", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		r1 := newRecord(s.ID, run.ID, journal.KindModelResponse, `{"a":1,"b":[1.5,"x"],"c":{"d":null}}`)
		r2 := newRecord(s.ID, run.ID, journal.KindModelProcessed, `{"text":"ok"}`)
		c := commitFor(run, rtstore.StatusRunning, "model")
		c.Records = []journal.Record{r1, r2}
		require.NoError(t, b.store.Commit(t.Context(), c))

		// The same records re-sent with the next boundary: equal as decoded
		// JSON (member order, spacing, 1 vs 1.0) is equal.
		r1again := r1
		r1again.Payload = json.RawMessage(`{ "c": {"d": null}, "b": [1.50, "x"], "a": 1.0 }`)
		r3 := newRecord(s.ID, run.ID, journal.KindCheckpoint, `{}`)
		c = commitFor(run, rtstore.StatusRunning, "prepare_tools")
		c.Records = []journal.Record{r1again, r2, r3}
		require.NoError(t, b.store.Commit(t.Context(), c))

		recs := b.journalOf(t, run.ID)
		requireContiguous(t, recs)
		require.Equal(t, []string{recs[0].ID, recs[1].ID, r1.ID, r2.ID, r3.ID}, recordIDs(recs))

		// A full re-send of an applied commit changes nothing.
		require.NoError(t, b.store.Commit(t.Context(), c))
		require.Len(t, b.journalOf(t, run.ID), 5)
	}},
	{"ConflictRollsBack", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		r1 := newRecord(s.ID, run.ID, journal.KindModelResponse, `{"text":"first"}`)
		c := commitFor(run, rtstore.StatusRunning, "model")
		c.Records = []journal.Record{r1}
		require.NoError(t, b.store.Commit(t.Context(), c))
		before, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)

		changedPayload := r1
		changedPayload.Payload = json.RawMessage(`{"text":"second"}`)
		changedStep := r1
		changedStep.StepID = "2"
		withKey, key := r1, "k"
		withKey.ExecutionKey = &key
		for name, bad := range map[string]journal.Record{
			"payload": changedPayload, "step": changedStep, "execution key": withKey,
		} {
			c := commitFor(run, rtstore.StatusFailed, "finish")
			c.StepID, c.Step = "9", json.RawMessage(`{}`)
			c.Records = []journal.Record{newRecord(s.ID, run.ID, journal.KindModelFailed, `{}`), bad}
			c.Events = []rtstore.PendingEvent{newEvent(s.ID, run.ID, "error", true)}
			err := b.store.Commit(t.Context(), c)
			require.ErrorIs(t, err, rtstore.ErrRecordConflict, name)
			require.Empty(t, c.Events[0].Event.Cursor, name)

			after, err := b.store.RunGet(t.Context(), run.ID)
			require.NoError(t, err)
			require.Equal(t, before.Status, after.Status, name)
			require.Equal(t, before.Phase, after.Phase, name)
			require.JSONEq(t, string(before.State), string(after.State), name)
			recs := b.journalOf(t, run.ID)
			require.Len(t, recs, 3, name)
			require.JSONEq(t, `{"text":"first"}`, string(recs[2].Payload), name)
			require.Empty(t, b.eventsOf(t, run.ID), name)
		}
	}},
	{"ForeignRecord", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		other := b.newRun(t, b.newSession(t, "alice").ID)

		c := commitFor(run, rtstore.StatusCompleted, "result")
		c.Records = []journal.Record{
			newRecord(s.ID, run.ID, journal.KindCheckpoint, `{}`),
			newRecord(s.ID, other.ID, journal.KindCheckpoint, `{}`),
		}
		require.ErrorIs(t, b.store.Commit(t.Context(), c), rtstore.ErrForeignRecord)

		c = commitFor(run, rtstore.StatusCompleted, "result")
		pe := newEvent(s.ID, run.ID, "run_result", true)
		pe.Record.RunID = other.ID
		c.Events = []rtstore.PendingEvent{pe}
		require.ErrorIs(t, b.store.Commit(t.Context(), c), rtstore.ErrForeignRecord)

		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, rtstore.StatusRunning, got.Status)
		require.Len(t, b.journalOf(t, run.ID), 2)
		require.Len(t, b.journalOf(t, other.ID), 2)
		require.Empty(t, b.eventsOf(t, run.ID))
	}},
	{"UnknownRun", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)

		c := commitFor(&rtstore.RunRow{ID: "run-missing", SessionID: s.ID}, rtstore.StatusRunning, "model")
		require.ErrorIs(t, b.store.Commit(t.Context(), c), rtstore.ErrNotFound)

		// A run of another session is not found either.
		c = commitFor(run, rtstore.StatusCompleted, "result")
		c.SessionID = b.newSession(t, "alice").ID
		require.ErrorIs(t, b.store.Commit(t.Context(), c), rtstore.ErrNotFound)
		got, err := b.store.RunGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Equal(t, rtstore.StatusRunning, got.Status)
	}},
	{"Concurrent", func(t *testing.T, b *bundle) {
		const sessions, commits = 6, 10
		runs := make([]*rtstore.RunRow, sessions)
		for i := range runs {
			runs[i] = b.newRun(t, b.newSession(t, "alice").ID)
		}
		errs := make(chan error, sessions*commits)
		var wg sync.WaitGroup
		for _, run := range runs {
			wg.Go(func() {
				for i := range commits {
					c := commitFor(run, rtstore.StatusRunning, fmt.Sprintf("step-%d", i))
					c.Records = []journal.Record{
						newRecord(run.SessionID, run.ID, journal.KindModelCompleted, `{}`),
						newRecord(run.SessionID, run.ID, journal.KindCheckpoint, `{}`),
					}
					c.Events = []rtstore.PendingEvent{newEvent(run.SessionID, run.ID, "text_complete", true)}
					if err := b.store.Commit(t.Context(), c); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for _, run := range runs {
			recs := b.journalOf(t, run.ID)
			require.Len(t, recs, 2+3*commits)
			requireContiguous(t, recs)
			evs := b.eventsOf(t, run.ID)
			require.Len(t, evs, commits)
			for i, ev := range evs {
				require.Equal(t, fmt.Sprint(i+1), ev.Cursor)
			}
		}
	}},
}

// requireRecord checks a stored record against the one committed.
func requireRecord(t *testing.T, want, got journal.Record) {
	t.Helper()
	require.JSONEq(t, string(want.Payload), string(got.Payload))
	want.Payload, got.Payload = nil, nil
	require.Equal(t, want, got)
}
