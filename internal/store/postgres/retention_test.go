package postgres_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
)

// finishedSession creates a session with a completed run and an artifact
// of content.
func (b *testBundle) finishedSession(t *testing.T, content string) *rtstore.SessionRow {
	t.Helper()
	s, l, run := b.leasedRun(t)
	require.NoError(t, b.store.ArtifactPut(b.ctx(), s.ID, digest(content), []byte(content)))
	require.NoError(t, b.store.Commit(b.ctx(), &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Lease: l,
		Status: rtstore.StatusCompleted, Phase: "done", State: json.RawMessage(`{}`), Snapshot: true,
		Events: []rtstore.PendingEvent{event(s.ID, run.ID, "run.completed")}}))
	require.NoError(t, l.Release(b.ctx()))
	return s
}

// TestGCTwoProcesses: two stores on one schema (two processes) sweep at
// once; each session is deleted exactly once, neither sweep fails, and a
// session one process drives (its lease held) is left alone.
func TestGCTwoProcesses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := openStore(t, b.cfg)
	const n = 10
	var ids []string
	for i := range n {
		ids = append(ids, b.finishedSession(t, "artifact "+string(rune('a'+i))).ID)
	}
	// A finished session whose lease a process holds is busy, not deleted.
	held := b.finishedSession(t, "held")
	lease, err := b.store.SessionLock(b.ctx(), held.ID)
	require.NoError(t, err)
	defer func() { require.NoError(t, lease.Release(b.ctx())) }()

	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	var (
		wg   sync.WaitGroup
		reps [2]*hxruntime.GCReport
		errs [2]error
	)
	for i, st := range []hxruntime.Store{b.store, other} {
		wg.Go(func() {
			reps[i], errs[i] = hxruntime.GC(b.ctx(), hxruntime.GCOptions{Store: st, OlderThan: time.Hour, Now: later, BatchSize: 3})
		})
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, n, reps[0].Sessions+reps[1].Sessions, "each session deleted once")
	require.Equal(t, n, reps[0].Artifacts+reps[1].Artifacts)
	for _, id := range ids {
		_, err := b.store.SessionGet(b.ctx(), id)
		require.ErrorIs(t, err, rtstore.ErrNotFound)
	}
	_, err = b.store.SessionGet(b.ctx(), held.ID)
	require.NoError(t, err, "a session under a live lease is not deleted")
	n2, err := b.store.TombstoneCount(b.ctx())
	require.NoError(t, err)
	require.EqualValues(t, 2*n, n2)
}

// TestSweepRacesPut: an artifact linked to a session while another process
// sweeps it as unreferenced survives: the put never fails and the bytes
// stay readable.
func TestSweepRacesPut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := openStore(t, b.cfg)
	for i := range 20 {
		content := "raced " + string(rune('a'+i))
		gone := b.finishedSession(t, content)
		l, err := b.store.SessionLock(b.ctx(), gone.ID)
		require.NoError(t, err)
		_, err = b.store.SessionDelete(b.ctx(), &rtstore.SessionDeleteParams{SessionID: gone.ID, Lease: l,
			FinishedBefore: time.Now().Add(time.Hour), DeletedAt: time.Now(), TombstoneUntil: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		keeper := b.newSession(t)
		var (
			wg     sync.WaitGroup
			putErr error
		)
		wg.Go(func() { _, _ = other.ArtifactSweep(b.ctx(), 100) })
		wg.Go(func() { putErr = b.store.ArtifactPut(b.ctx(), keeper.ID, digest(content), []byte(content)) })
		wg.Wait()
		require.NoError(t, putErr, "iteration %d", i)
		got, err := b.store.ArtifactGet(b.ctx(), digest(content))
		require.NoError(t, err, "iteration %d: a referenced artifact survives", i)
		require.Equal(t, content, string(got))
		ok, err := b.store.ArtifactOwned(b.ctx(), digest(content), "alice")
		require.NoError(t, err)
		require.True(t, ok)
	}
}
