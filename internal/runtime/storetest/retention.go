package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// retentionCases check rtstore.RetentionStore (issue 23). The store under
// test must implement it.
var retentionCases = []testCase{
	{"DeletesFinishedSession", func(t *testing.T, b *bundle) {
		rs := b.retention(t)
		ses := b.newSession(t, "alice")
		first := b.finishedRun(t, ses.ID, rtstore.StatusCompleted)
		second := b.finishedRun(t, ses.ID, rtstore.StatusCancelled)
		data := []byte("report of " + ses.ID)
		require.NoError(t, b.store.ArtifactPut(t.Context(), ses.ID, digest(data), data))
		other := b.newSession(t, "alice")
		kept := b.finishedRun(t, other.ID, rtstore.StatusCompleted)

		cands, err := rs.GCCandidates(t.Context(), rtstore.GCCandidateParams{FinishedBefore: later(), ListParams: rtstore.ListParams{Limit: all}})
		require.NoError(t, err)
		require.Equal(t, []string{ses.ID, other.ID}, candidateIDs(cands))
		require.Equal(t, "alice", cands[0].Principal)
		require.Equal(t, "assistant", cands[0].AgentName)
		require.False(t, cands[0].FinishedAt.IsZero())

		got := b.deleteSession(t, rs, ses.ID, later())
		require.Equal(t, 2, got.Runs)
		require.Equal(t, 6, got.Records, "run.started, checkpoint and an event record per run")
		require.Equal(t, 2, got.Events)
		require.Positive(t, got.Bytes)

		_, err = b.store.SessionGet(t.Context(), ses.ID)
		require.ErrorIs(t, err, rtstore.ErrNotFound)
		for _, run := range []*rtstore.RunRow{first, second} {
			_, err = b.store.RunGet(t.Context(), run.ID)
			require.ErrorIs(t, err, rtstore.ErrNotFound)
			require.Empty(t, b.journalOf(t, run.ID))
			require.Empty(t, b.eventsOf(t, run.ID))
			rows, err := b.store.RunRowsGet(t.Context(), run.ID)
			require.NoError(t, err)
			require.Empty(t, rows.Steps)
			require.Empty(t, rows.Tools)
		}
		ok, err := b.store.ArtifactOwned(t.Context(), digest(data), "alice")
		require.NoError(t, err)
		require.False(t, ok, "the link of the deleted session is gone")

		// The other session is untouched.
		_, err = b.store.SessionGet(t.Context(), other.ID)
		require.NoError(t, err)
		require.Len(t, b.journalOf(t, kept.ID), 3)

		// Tombstones: the session and each run, with owner and request id.
		ts, err := rs.TombstoneGet(t.Context(), rtstore.TombstoneSession, ses.ID)
		require.NoError(t, err)
		require.Equal(t, "alice", ts.Principal)
		require.Equal(t, ses.ID, ts.SessionID)
		require.True(t, ts.ExpiresAt.After(ts.DeletedAt))
		ts, err = rs.TombstoneGet(t.Context(), rtstore.TombstoneRun, first.ID)
		require.NoError(t, err)
		require.Equal(t, first.RequestID, ts.RequestID)
		ts, err = rs.TombstoneRequest(t.Context(), ses.ID, second.RequestID)
		require.NoError(t, err)
		require.Equal(t, second.ID, ts.ID)
		_, err = rs.TombstoneGet(t.Context(), rtstore.TombstoneSession, other.ID)
		require.ErrorIs(t, err, rtstore.ErrNotFound)
		n, err := rs.TombstoneCount(t.Context())
		require.NoError(t, err)
		require.EqualValues(t, 3, n)

		// The ids of the deleted records stay unusable by nobody: a new
		// session can be created and run normally afterwards.
		b.finishedRun(t, b.newSession(t, "alice").ID, rtstore.StatusCompleted)
	}},
	{"NeverUnfinished", func(t *testing.T, b *bundle) {
		rs := b.retention(t)
		var ids []string
		for _, st := range []rtstore.RunStatus{rtstore.StatusRunning, rtstore.StatusPaused, rtstore.StatusAwaitingInput, rtstore.StatusFailed} {
			ses := b.newSession(t, "alice")
			run := b.newRun(t, ses.ID)
			if st != rtstore.StatusRunning {
				require.NoError(t, b.store.Commit(t.Context(), commitFor(run, st, "stopped")))
			}
			ids = append(ids, ses.ID)
		}
		// A finished run followed by an unfinished one: the latest counts.
		ses := b.newSession(t, "alice")
		b.finishedRun(t, ses.ID, rtstore.StatusCompleted)
		b.newRun(t, ses.ID)
		ids = append(ids, ses.ID)
		ids = append(ids, b.newSession(t, "alice").ID) // no run at all

		cands, err := rs.GCCandidates(t.Context(), rtstore.GCCandidateParams{FinishedBefore: later(), ListParams: rtstore.ListParams{Limit: all}})
		require.NoError(t, err)
		require.Empty(t, cands)
		for _, id := range ids {
			lease, err := b.store.SessionLock(t.Context(), id)
			require.NoError(t, err)
			_, err = rs.SessionDelete(t.Context(), deleteParams(id, lease, later()))
			require.ErrorIs(t, err, rtstore.ErrNotEligible, id)
			require.NoError(t, lease.Release(t.Context()))
			_, err = b.store.SessionGet(t.Context(), id)
			require.NoError(t, err)
			_, err = rs.TombstoneGet(t.Context(), rtstore.TombstoneSession, id)
			require.ErrorIs(t, err, rtstore.ErrNotFound)
		}
	}},
	{"NotBeforeCutoff", func(t *testing.T, b *bundle) {
		rs := b.retention(t)
		ses := b.newSession(t, "alice")
		b.finishedRun(t, ses.ID, rtstore.StatusCompleted)
		past := time.Now().Add(-time.Hour)
		cands, err := rs.GCCandidates(t.Context(), rtstore.GCCandidateParams{FinishedBefore: past, ListParams: rtstore.ListParams{Limit: all}})
		require.NoError(t, err)
		require.Empty(t, cands)
		lease, err := b.store.SessionLock(t.Context(), ses.ID)
		require.NoError(t, err)
		defer func() { require.NoError(t, lease.Release(t.Context())) }()
		_, err = rs.SessionDelete(t.Context(), deleteParams(ses.ID, lease, past))
		require.ErrorIs(t, err, rtstore.ErrNotEligible)
	}},
	{"CandidatesPage", func(t *testing.T, b *bundle) {
		rs := b.retention(t)
		var want []string
		for range 3 {
			ses := b.newSession(t, "alice")
			b.finishedRun(t, ses.ID, rtstore.StatusCompleted)
			want = append(want, ses.ID)
		}
		var got []string
		p := rtstore.GCCandidateParams{FinishedBefore: later(), ListParams: rtstore.ListParams{Limit: 2}}
		for {
			page, err := rs.GCCandidates(t.Context(), p)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), 2)
			if len(page) == 0 {
				break
			}
			got = append(got, candidateIDs(page)...)
			p.After = page[len(page)-1].Seq
		}
		require.Equal(t, want, got)
	}},
	{"LeaseRequired", func(t *testing.T, b *bundle) {
		rs := b.retention(t)
		ses := b.newSession(t, "alice")
		b.finishedRun(t, ses.ID, rtstore.StatusCompleted)
		_, err := rs.SessionDelete(t.Context(), deleteParams(ses.ID, nil, later()))
		require.ErrorIs(t, err, rtstore.ErrLeaseLost)
		other := b.newSession(t, "alice")
		lease, err := b.store.SessionLock(t.Context(), other.ID)
		require.NoError(t, err)
		_, err = rs.SessionDelete(t.Context(), deleteParams(ses.ID, lease, later()))
		require.ErrorIs(t, err, rtstore.ErrLeaseLost, "a lease of another session")
		require.NoError(t, lease.Release(t.Context()))
		lease, err = b.store.SessionLock(t.Context(), ses.ID)
		require.NoError(t, err)
		require.NoError(t, lease.Release(t.Context()))
		_, err = rs.SessionDelete(t.Context(), deleteParams(ses.ID, lease, later()))
		require.ErrorIs(t, err, rtstore.ErrLeaseLost, "a released lease")
		_, err = b.store.SessionGet(t.Context(), ses.ID)
		require.NoError(t, err)
	}},
	{"NotFound", func(t *testing.T, b *bundle) {
		rs := b.retention(t)
		ses := b.newSession(t, "alice")
		b.finishedRun(t, ses.ID, rtstore.StatusCompleted)
		b.deleteSession(t, rs, ses.ID, later())
		lease, err := b.store.SessionLock(t.Context(), ses.ID)
		if err == nil {
			defer func() { require.NoError(t, lease.Release(t.Context())) }()
			_, err = rs.SessionDelete(t.Context(), deleteParams(ses.ID, lease, later()))
		}
		require.ErrorIs(t, err, rtstore.ErrNotFound)
	}},
	{"SharedArtifactSurvives", func(t *testing.T, b *bundle) {
		rs := b.retention(t)
		shared, own := []byte("shared bytes"), []byte("only mine")
		a, c := b.newSession(t, "alice"), b.newSession(t, "bob")
		require.NoError(t, b.store.ArtifactPut(t.Context(), a.ID, digest(shared), shared))
		require.NoError(t, b.store.ArtifactPut(t.Context(), a.ID, digest(own), own))
		require.NoError(t, b.store.ArtifactPut(t.Context(), c.ID, digest(shared), shared))
		b.finishedRun(t, a.ID, rtstore.StatusCompleted)
		b.finishedRun(t, c.ID, rtstore.StatusCompleted)

		b.deleteSession(t, rs, a.ID, later())
		swept, err := rs.ArtifactSweep(t.Context(), all)
		require.NoError(t, err)
		require.Equal(t, rtstore.ArtifactSwept{Artifacts: 1, Bytes: int64(len(own))}, swept)
		_, err = b.store.ArtifactGet(t.Context(), digest(own))
		require.ErrorIs(t, err, rtstore.ErrNotFound)
		got, err := b.store.ArtifactGet(t.Context(), digest(shared))
		require.NoError(t, err)
		require.Equal(t, shared, got)

		b.deleteSession(t, rs, c.ID, later())
		swept, err = rs.ArtifactSweep(t.Context(), all)
		require.NoError(t, err)
		require.Equal(t, rtstore.ArtifactSwept{Artifacts: 1, Bytes: int64(len(shared))}, swept)
		swept, err = rs.ArtifactSweep(t.Context(), all)
		require.NoError(t, err)
		require.Zero(t, swept.Artifacts)

		// The same bytes can be stored again afterwards.
		d := b.newSession(t, "alice")
		require.NoError(t, b.store.ArtifactPut(t.Context(), d.ID, digest(shared), shared))
		got, err = b.store.ArtifactGet(t.Context(), digest(shared))
		require.NoError(t, err)
		require.Equal(t, shared, got)
	}},
	{"SweepBounded", func(t *testing.T, b *bundle) {
		rs := b.retention(t)
		ses := b.newSession(t, "alice")
		for _, s := range []string{"a", "b", "c"} {
			require.NoError(t, b.store.ArtifactPut(t.Context(), ses.ID, digest([]byte(s)), []byte(s)))
		}
		b.finishedRun(t, ses.ID, rtstore.StatusCompleted)
		b.deleteSession(t, rs, ses.ID, later())
		swept, err := rs.ArtifactSweep(t.Context(), 2)
		require.NoError(t, err)
		require.Equal(t, 2, swept.Artifacts)
		swept, err = rs.ArtifactSweep(t.Context(), 2)
		require.NoError(t, err)
		require.Equal(t, 1, swept.Artifacts)
	}},
	{"MeasureEqualsDelete", func(t *testing.T, b *bundle) {
		rs := b.retention(t)
		shared, own, kept := []byte("shared by two"), []byte("only the deleted"), []byte("only the kept")
		a, c := b.newSession(t, "alice"), b.newSession(t, "bob")
		require.NoError(t, b.store.ArtifactPut(t.Context(), a.ID, digest(shared), shared))
		require.NoError(t, b.store.ArtifactPut(t.Context(), a.ID, digest(own), own))
		require.NoError(t, b.store.ArtifactPut(t.Context(), c.ID, digest(shared), shared))
		require.NoError(t, b.store.ArtifactPut(t.Context(), c.ID, digest(kept), kept))
		b.finishedRun(t, a.ID, rtstore.StatusCompleted)
		b.finishedRun(t, a.ID, rtstore.StatusCancelled)
		b.finishedRun(t, c.ID, rtstore.StatusCompleted)

		// Not eligible: unfinished, or finished after the cutoff.
		busy := b.newSession(t, "alice")
		b.newRun(t, busy.ID)
		_, err := rs.SessionMeasure(t.Context(), busy.ID, later())
		require.ErrorIs(t, err, rtstore.ErrNotEligible)
		_, err = rs.SessionMeasure(t.Context(), a.ID, time.Now().Add(-time.Hour))
		require.ErrorIs(t, err, rtstore.ErrNotEligible)
		_, err = rs.SessionMeasure(t.Context(), "no-such-session", later())
		require.ErrorIs(t, err, rtstore.ErrNotFound)

		measured, err := rs.SessionMeasure(t.Context(), a.ID, later())
		require.NoError(t, err)
		arts, err := rs.ArtifactMeasure(t.Context(), []string{a.ID})
		require.NoError(t, err)
		require.Equal(t, rtstore.ArtifactSwept{Artifacts: 1, Bytes: int64(len(own))}, arts)
		none, err := rs.ArtifactMeasure(t.Context(), nil)
		require.NoError(t, err)
		require.Zero(t, none.Artifacts, "every artifact is referenced")
		both, err := rs.ArtifactMeasure(t.Context(), []string{a.ID, c.ID})
		require.NoError(t, err)
		require.Equal(t, 3, both.Artifacts)

		// Measuring deleted nothing.
		_, err = b.store.SessionGet(t.Context(), a.ID)
		require.NoError(t, err)
		_, err = b.store.ArtifactGet(t.Context(), digest(own))
		require.NoError(t, err)

		deleted := b.deleteSession(t, rs, a.ID, later())
		require.Equal(t, deleted, measured)
		swept, err := rs.ArtifactSweep(t.Context(), all)
		require.NoError(t, err)
		require.Equal(t, arts, swept)
	}},
	{"TombstonePurge", func(t *testing.T, b *bundle) {
		rs := b.retention(t)
		ses := b.newSession(t, "alice")
		b.finishedRun(t, ses.ID, rtstore.StatusCompleted)
		b.deleteSession(t, rs, ses.ID, later())
		n, err := rs.TombstonePurge(t.Context(), time.Now(), all)
		require.NoError(t, err)
		require.Zero(t, n, "not expired yet")
		n, err = rs.TombstonePurge(t.Context(), time.Now().Add(48*time.Hour), 1)
		require.NoError(t, err)
		require.Equal(t, 1, n, "bounded")
		n, err = rs.TombstonePurge(t.Context(), time.Now().Add(48*time.Hour), all)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		count, err := rs.TombstoneCount(t.Context())
		require.NoError(t, err)
		require.Zero(t, count)
		_, err = rs.TombstoneGet(t.Context(), rtstore.TombstoneSession, ses.ID)
		require.ErrorIs(t, err, rtstore.ErrNotFound)
	}},
}

// retention returns the store under test as a RetentionStore.
func (b *bundle) retention(t *testing.T) rtstore.RetentionStore {
	t.Helper()
	rs, ok := b.store.(rtstore.RetentionStore)
	require.True(t, ok, "the store implements rtstore.RetentionStore")
	return rs
}

// finishedRun starts a run of the session, commits a step, a tool row, a
// public event with its record and the snapshot, and ends it in status.
func (b *bundle) finishedRun(t *testing.T, sessionID string, status rtstore.RunStatus) *rtstore.RunRow {
	t.Helper()
	run := b.newRun(t, sessionID)
	c := commitFor(run, status, "done")
	c.StepID, c.Step = "1", json.RawMessage(`{"step":1}`)
	c.Tools = []rtstore.ToolRow{{ExecutionKey: "1/call-1", HasOutcome: true, Payload: json.RawMessage(`{"ok":true}`)}}
	c.Snapshot = true
	c.Events = []rtstore.PendingEvent{newEvent(sessionID, run.ID, "run.completed", true)}
	require.NoError(t, b.store.Commit(t.Context(), c))
	require.Len(t, b.journalOf(t, run.ID), 3)
	require.Equal(t, journal.KindEvent, b.journalOf(t, run.ID)[2].Kind)
	return run
}

// deleteSession deletes a session under its lease and returns the counts.
func (b *bundle) deleteSession(t *testing.T, rs rtstore.RetentionStore, id string, before time.Time) *rtstore.SessionDeleted {
	t.Helper()
	lease, err := b.store.SessionLock(t.Context(), id)
	require.NoError(t, err)
	defer func() { require.NoError(t, lease.Release(t.Context())) }()
	got, err := rs.SessionDelete(t.Context(), deleteParams(id, lease, before))
	require.NoError(t, err)
	return got
}

func deleteParams(id string, lease rtstore.Lease, before time.Time) *rtstore.SessionDeleteParams {
	now := time.Now().UTC()
	return &rtstore.SessionDeleteParams{
		SessionID: id, Lease: lease, FinishedBefore: before,
		DeletedAt: now, TombstoneUntil: now.Add(24 * time.Hour),
	}
}

// later is a cutoff every run of the case finished before.
func later() time.Time { return time.Now().Add(time.Hour) }

func candidateIDs(cs []rtstore.GCCandidate) []string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.SessionID
	}
	return ids
}
