package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
)

// testCheckpointConfig checkpoints often, restarts the WAL beyond 128 KiB
// and truncates a WAL file larger than 512 KiB.
func testCheckpointConfig() checkpointConfig {
	return checkpointConfig{commits: 8, interval: 20 * time.Millisecond, restart: 128 << 10, maxWAL: 512 << 10, busy: 50 * time.Millisecond}
}

func openCheckpointed(t *testing.T, path string, cfg checkpointConfig) *Store {
	t.Helper()
	s, err := open(context.Background(), Config{Path: path, AutoMigrate: true}, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// walSize is the size of the WAL file (0 when there is none).
func walSize(path string) int64 {
	return (&checkpointer{path: path}).walFileSize()
}

// insertSessions commits n sessions (one commit each, ~1 KB of metadata).
func insertSessions(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	meta := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	for i := range n {
		require.NoError(t, s.SessionInsert(context.Background(), &rtstore.SessionRow{
			ID: prefix + strconv.Itoa(i), Principal: "p", Metadata: meta,
		}))
	}
}

// TestCheckpointerBoundsWAL: commits never checkpoint themselves, the
// background checkpointer keeps the WAL small, and a reader holding an old
// snapshot lets it grow only until the reader moves on (then TRUNCATE).
func TestCheckpointerBoundsWAL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hxd.db")
	cfg := testCheckpointConfig()
	s := openCheckpointed(t, path, cfg)

	var maxSeen int64
	for i := range 40 {
		insertSessions(t, s, fmt.Sprintf("a%d-", i), 25)
		maxSeen = max(maxSeen, walSize(path))
	}
	require.Positive(t, s.ckpt.runs.Load(), "the checkpointer ran")
	// Without checkpoints these 1000 commits make a ~15 MB WAL; restarts
	// keep it near cfg.restart (more when the machine starves the
	// checkpointer, which then truncates it).
	require.Positive(t, s.ckpt.restarts.Load(), "the WAL was restarted")
	require.Less(t, maxSeen, int64(4<<20), "WAL bounded without readers")
	require.Eventually(t, func() bool { return walSize(path) <= cfg.maxWAL }, 20*time.Second, 10*time.Millisecond)

	// A read transaction pins a snapshot: checkpoints cannot finish and
	// the WAL grows past the bound.
	tx, err := s.r.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	var n int64
	require.NoError(t, tx.QueryRow(`SELECT count(*) FROM sessions`).Scan(&n))
	insertSessions(t, s, "b-", 400)
	require.Greater(t, walSize(path), cfg.maxWAL, "a pinned snapshot keeps the WAL")
	require.NoError(t, tx.Rollback())

	// Once the reader is gone, a TRUNCATE checkpoint empties the WAL.
	require.Eventually(t, func() bool {
		return walSize(path) <= cfg.maxWAL
	}, 20*time.Second, 10*time.Millisecond)
	got, err := s.SessionGet(context.Background(), "b-399")
	require.NoError(t, err)
	require.Equal(t, "p", got.Principal)
}

// TestCloseStopsCheckpointer: Close stops the goroutine (goleak checks the
// rest at exit) and the closed WAL is checkpointed away.
func TestCloseStopsCheckpointer(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hxd.db")
	s, err := open(context.Background(), Config{Path: path, AutoMigrate: true}, testCheckpointConfig())
	require.NoError(t, err)
	insertSessions(t, s, "s", 50)
	c := s.ckpt
	require.NoError(t, s.Close())
	select {
	case <-c.done:
	default:
		t.Fatal("checkpointer still running after Close")
	}
	require.NoError(t, s.Close(), "idempotent")
	require.Zero(t, walSize(path), "the last connection checkpointed and removed the WAL")

	s2 := openCheckpointed(t, path, testCheckpointConfig())
	_, err = s2.SessionGet(context.Background(), "s49")
	require.NoError(t, err)
}

// crashHelperEnv makes the test binary a child that commits and is killed.
const crashHelperEnv = "HXD_SQLITE_CRASH_HELPER"

// TestCheckpointCrashHelperProcess is the child of TestCrashKeepsCommits:
// it commits sessions one by one, printing each id once its commit
// returned, with the checkpointer running often, until it is killed.
func TestCheckpointCrashHelperProcess(t *testing.T) {
	path := os.Getenv(crashHelperEnv)
	if path == "" {
		t.Skip("child process of TestCrashKeepsCommits")
	}
	s, err := open(context.Background(), Config{Path: path, AutoMigrate: true}, testCheckpointConfig())
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	meta := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	for i := 0; ; i++ {
		id := "c" + strconv.Itoa(i)
		if err := s.SessionInsert(context.Background(), &rtstore.SessionRow{ID: id, Principal: "p", Metadata: meta}); err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		fmt.Println(id)
	}
}

// TestCrashKeepsCommits kills a process mid-stream (no Close, checkpoints
// in flight): every commit it reported survives.
func TestCrashKeepsCommits(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hxd.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointCrashHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var last string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		require.False(t, strings.HasPrefix(line, "error:"), line)
		last = line
		if line == "c600" {
			break
		}
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Equal(t, "c600", last)

	s := openCheckpointed(t, path, testCheckpointConfig())
	for i := 0; i <= 600; i++ {
		_, err := s.SessionGet(context.Background(), "c"+strconv.Itoa(i))
		require.NoError(t, err, "c%d", i)
	}
}

// TestControlCache: the lease holder's cached control flag follows every
// write of it, by this Store, by another Store on the file (as another
// process would) and by a new run, which clears it.
func TestControlCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hxd.db")
	a := openCheckpointed(t, path, defaultCheckpointConfig())
	b := openCheckpointed(t, path, defaultCheckpointConfig())
	require.NoError(t, a.SessionInsert(ctx, &rtstore.SessionRow{ID: "s1", Principal: "p"}))
	l, err := a.SessionLock(ctx, "s1")
	require.NoError(t, err)

	get := func(s *Store) string {
		t.Helper()
		v, err := s.SessionControlGet(ctx, "s1")
		require.NoError(t, err)
		return v
	}
	require.Empty(t, get(a))
	_, cached, _, _ := a.cachedControl("s1")
	require.True(t, cached, "the holder caches what it read")

	require.NoError(t, b.SessionControlSet(ctx, "s1", rtstore.ControlPaused))
	require.Equal(t, rtstore.ControlPaused, get(a), "another store's write is seen")
	require.Equal(t, rtstore.ControlPaused, get(a))
	require.NoError(t, a.SessionControlSet(ctx, "s1", rtstore.ControlCancelled))
	require.Equal(t, rtstore.ControlCancelled, get(a), "own write is seen")
	require.Equal(t, rtstore.ControlCancelled, get(b))

	// A writer that died between its commit and its signal: the cache
	// keeps the old value only until it expires.
	_, err = b.ws.sessionControlSet.ExecContext(ctx, rtstore.ControlPaused, "s1")
	require.NoError(t, err)
	require.Equal(t, rtstore.ControlCancelled, get(a), "an unsignalled write is not seen at once")
	a.mu.Lock()
	la := a.locks["s1"]
	a.mu.Unlock()
	la.ctl.mu.Lock()
	la.ctl.at = la.ctl.at.Add(-controlCacheTTL)
	la.ctl.mu.Unlock()
	require.Equal(t, rtstore.ControlPaused, get(a), "an expired entry is read again")

	// A new run clears the flag, and says so.
	_, _, err = a.RunInsert(ctx, &rtstore.RunInsertParams{Run: rtstore.RunRow{
		ID: "r1", SessionID: "s1", RequestID: "q", MessageDigest: "d", Phase: "start",
	}, Commit: &rtstore.Commit{SessionID: "s1", RunID: "r1", Lease: l, Status: rtstore.StatusRunning, Phase: "start"}})
	require.NoError(t, err)
	require.Empty(t, get(a), "a new run clears the flag")

	// Released: no cache, every read goes to the database.
	require.NoError(t, l.Release(ctx))
	_, cached, _, _ = a.cachedControl("s1")
	require.False(t, cached)
	require.NoError(t, b.SessionControlSet(ctx, "s1", rtstore.ControlPaused))
	require.Equal(t, rtstore.ControlPaused, get(a))
}
