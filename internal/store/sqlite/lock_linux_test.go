package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/sqlite"
)

// manyLocksEnv makes the test binary a child that holds many session
// locks under a low open-file limit (runManyLocks).
const manyLocksEnv = "HXD_SQLITE_MANY_LOCKS"

// manyLocks is the argument of the manyLocksEnv child.
type manyLocks struct {
	Path     string `json:"path"`
	NoFile   uint64 `json:"nofile"`   // RLIMIT_NOFILE of the child
	Sessions int    `json:"sessions"` // session locks to hold at once
}

// manyLocksReport is the child's one line of JSON.
type manyLocksReport struct {
	Error     string `json:"error,omitempty"`
	FDsBefore int    `json:"fds_before"` // open descriptors holding no lock
	FDsAfter  int    `json:"fds_after"`  // holding Sessions locks
}

func init() { childMains[manyLocksEnv] = runManyLocks }

// runManyLocks lowers its open-file limit to spec.NoFile, opens the
// database, takes spec.Sessions session locks at once, reports its open
// descriptors before and after, and holds the locks until killed or until
// its stdin closes.
func runManyLocks(arg string) {
	var spec manyLocks
	report := func(r manyLocksReport) {
		raw, _ := json.Marshal(r)
		fmt.Println(string(raw))
	}
	fail := func(err error) {
		report(manyLocksReport{Error: err.Error()})
		os.Exit(2)
	}
	if err := json.Unmarshal([]byte(arg), &spec); err != nil {
		fail(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: spec.NoFile, Max: spec.NoFile}); err != nil {
		fail(err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: spec.Path})
	if err != nil {
		fail(err)
	}
	before, err := openFDs()
	if err != nil {
		fail(err)
	}
	for i := range spec.Sessions {
		if _, err := st.SessionLock(ctx, "s"+strconv.Itoa(i)); err != nil {
			fail(fmt.Errorf("after %d locks: %w", i, err))
		}
	}
	after, err := openFDs()
	if err != nil {
		fail(err)
	}
	report(manyLocksReport{FDsBefore: before, FDsAfter: after})
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// openFDs counts the open descriptors of the process.
func openFDs() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	return len(ents), err
}

// TestSessionLocksCostNoDescriptors: a process holding 300 session locks
// at once, with an open-file limit of 64, has exactly as many open
// descriptors as holding none. Another process is refused every one of
// them and gets them all at once when the holder is SIGKILLed.
func TestSessionLocksCostNoDescriptors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const sessions = 300
	spec, err := json.Marshal(manyLocks{Path: b.path, NoFile: 64, Sessions: sessions})
	require.NoError(t, err)

	child := startChild(t, b.ctx(), manyLocksEnv+"="+string(spec), "-test.run=^$")
	line := child.firstLine(t)
	var got manyLocksReport
	require.NoError(t, json.Unmarshal(line, &got), "%s", line)
	require.Empty(t, got.Error)
	require.Positive(t, got.FDsBefore)
	require.Equal(t, got.FDsBefore, got.FDsAfter, "open descriptors without locks and with %d", sessions)

	for i := range sessions {
		_, err := b.store.SessionLock(b.ctx(), "s"+strconv.Itoa(i))
		require.ErrorIs(t, err, rtstore.ErrSessionBusy, "s%d", i)
	}

	child.kill(t)
	// The OS dropped the dead process's locks: taking them (without
	// waiting) succeeds at once.
	for i := range sessions {
		l, err := b.store.SessionLock(b.ctx(), "s"+strconv.Itoa(i))
		require.NoError(t, err, "s%d", i)
		require.NoError(t, l.Release(b.ctx()))
	}
}
