package postgres_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// TestControlReadByCommit: a leased commit reads the session's control
// flag in its transaction, and SessionControlGet answers with that read
// for a short while (controlFresh, 250ms) instead of querying again; a
// write of the flag through the Store is seen at once, one made behind
// its back (another process) once the read is stale.
func TestControlReadByCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, l, run := b.leasedRun(t)
	commit := func() {
		t.Helper()
		c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Lease: l, Status: rtstore.StatusRunning, Phase: "model",
			Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{}`)}}
		require.NoError(t, b.store.Commit(b.ctx(), c))
	}
	get := func() string {
		t.Helper()
		v, err := b.store.SessionControlGet(b.ctx(), s.ID)
		require.NoError(t, err)
		return v
	}
	setBehind := func(v string) {
		t.Helper()
		require.NoError(t, b.exec(t, `UPDATE sessions SET control = $1 WHERE id = $2`, v, s.ID))
	}

	for _, path := range []string{"careful", "fast"} {
		// The first commit of a fresh lease cache goes the careful way
		// (two round trips), the next ones the fast way (one).
		if path == "careful" {
			b.store.ForgetSeqs(run.ID)
		}
		setBehind(rtstore.ControlPaused)
		start := time.Now()
		commit()
		setBehind(rtstore.ControlNone)
		if time.Since(start) < 200*time.Millisecond { // else too slow a machine to tell
			require.Equal(t, rtstore.ControlPaused, get(), "%s: the commit's read answers", path)
		}
		require.Eventually(t, func() bool { return get() == rtstore.ControlNone }, 5*time.Second, 20*time.Millisecond,
			"%s: a stale read gives way to the database", path)
	}

	// A write through the Store is seen at once, even right after a commit.
	commit()
	require.NoError(t, b.store.SessionControlSet(b.ctx(), s.ID, rtstore.ControlCancelled))
	require.Equal(t, rtstore.ControlCancelled, get())
	require.NoError(t, b.store.SessionControlSet(b.ctx(), s.ID, rtstore.ControlNone))
	require.Equal(t, rtstore.ControlNone, get())
}
