package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// createdCases check each event's created_at: assigned by the store as it
// appends the event (a caller's value is ignored), read back the same on
// every read, by boundary and delta-only commits alike, and kept out of
// the stored JSON form that the journal's event record mirrors.
var createdCases = []testCase{
	{"BoundaryCommit", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		c := commitFor(run, rtstore.StatusRunning, "model")
		c.Events = []rtstore.PendingEvent{
			newEvent(s.ID, run.ID, "text_complete", true),
			newEvent(s.ID, run.ID, "turn_complete", true),
		}
		requireStoreStamps(t, b, run.ID, c)
	}},
	{"DeltaOnlyCommit", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)
		lease, err := b.store.SessionLock(t.Context(), s.ID)
		require.NoError(t, err)
		t.Cleanup(func() { _ = lease.Release(t.Context()) })
		requireStoreStamps(t, b, run.ID, deltaCommit(run, lease, 3))
	}},
}

// requireStoreStamps commits c, whose events carry a created_at the store
// must ignore, and checks the stored events' created_at.
func requireStoreStamps(t *testing.T, b *bundle, runID string, c *rtstore.Commit) {
	t.Helper()
	bogus := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for i := range c.Events {
		c.Events[i].Event.CreatedAt = bogus
	}
	before := time.Now().UTC().Truncate(time.Microsecond)
	require.NoError(t, b.store.Commit(t.Context(), c))
	after := time.Now().UTC()

	evs := b.eventsOf(t, runID)
	require.Len(t, evs, len(c.Events))
	for _, ev := range evs {
		require.False(t, ev.CreatedAt.Equal(bogus), "the store assigns created_at")
		require.Equal(t, time.UTC, ev.CreatedAt.Location())
		require.False(t, ev.CreatedAt.Before(before), "created_at %s before the commit began (%s)", ev.CreatedAt, before)
		require.False(t, ev.CreatedAt.After(after), "created_at %s after the commit ended (%s)", ev.CreatedAt, after)
	}
	// Stable: a second read, and a read after a cursor, give the same.
	again := b.eventsOf(t, runID)
	for i := range evs {
		require.True(t, again[i].CreatedAt.Equal(evs[i].CreatedAt))
	}
	tail, err := b.store.EventListAfter(t.Context(), runID, 1, all)
	require.NoError(t, err)
	for i := range tail {
		require.True(t, tail[i].CreatedAt.Equal(evs[i+1].CreatedAt))
	}
	// The journal's event records hold the event without created_at.
	for _, r := range b.journalOf(t, runID) {
		if r.Kind != journal.KindEvent {
			continue
		}
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r.Payload, &m))
		require.NotContains(t, m, "created_at")
		require.Contains(t, m, "cursor")
	}
}
