package sqlite_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/runtime/storetest"
	"hxd/internal/store/sqlite"
	"hxd/migrations"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) rtstore.Store {
		return openTemp(t)
	})
}

// testBundle is a store on a temp file.
type testBundle struct {
	store *sqlite.Store
	path  string
	tb    testing.TB // the test the bundle belongs to
}

// ctx is the context of the bundle's test, which ends with it.
func (b *testBundle) ctx() context.Context { return b.tb.Context() }

func setup(t *testing.T) *testBundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hxd.db")
	return &testBundle{store: openAt(t, path), path: path, tb: t}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openTemp opens a migrated store on a fresh temp file.
func openTemp(t *testing.T) *sqlite.Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "hxd.db"))
}

// openAt opens (and migrates) the store at path and closes it at cleanup.
func openAt(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(testCtx(t), sqlite.Config{Path: path, Logger: hxtest.Logger(t), AutoMigrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// rawDB opens the file behind the store's back.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// seed stores a session with a run, a few records and an event.
func (b *testBundle) seed(t *testing.T) (*rtstore.SessionRow, *rtstore.RunRow) {
	t.Helper()
	s := &rtstore.SessionRow{ID: "ses-" + uuid.NewString(), Principal: "alice"}
	require.NoError(t, b.store.SessionInsert(b.ctx(), s))
	runID := "run-" + uuid.NewString()
	rec := func(kind journal.Kind) journal.Record {
		return journal.Record{
			Version: 1, ID: uuid.NewString(), Kind: kind, RecordedAt: journal.Timestamp(time.Now()),
			SessionID: s.ID, RunID: runID, StepID: "0", AttemptID: "0", Payload: json.RawMessage(`{}`),
		}
	}
	evRec := rec(journal.KindEvent)
	run, _, err := b.store.RunInsert(b.ctx(), &rtstore.RunInsertParams{
		Run: rtstore.RunRow{ID: runID, SessionID: s.ID, RequestID: "req-1", MessageDigest: "d", Phase: "start",
			State: json.RawMessage(`{}`)},
		Commit: &rtstore.Commit{
			SessionID: s.ID, RunID: runID, Status: rtstore.StatusRunning, Phase: "prepare_model",
			State:   json.RawMessage(`{"iterations":0}`),
			Records: []journal.Record{rec(journal.KindRunStarted), rec(journal.KindCheckpoint)},
			Events: []rtstore.PendingEvent{{
				Event:  rtstore.RunEvent{Type: "waiting", Data: json.RawMessage(`{}`), SessionID: s.ID, RunID: runID, EventID: uuid.NewString()},
				Record: &evRec,
			}},
		},
	})
	require.NoError(t, err)
	require.NoError(t, b.store.ArtifactPut(b.ctx(), s.ID, digest("blob"), []byte("blob")))
	return s, run
}

// TestOpenDirectory: a path that is a folder is refused, naming it, with
// or without AutoMigrate.
func TestOpenDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, auto := range []bool{false, true} {
		_, err := sqlite.Open(context.Background(), sqlite.Config{Path: dir, AutoMigrate: auto})
		require.ErrorContains(t, err, " is a directory, not a SQLite database file")
	}
}

func TestFileModes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.seed(t)
	l, err := b.store.SessionLock(b.ctx(), s.ID)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Release(b.ctx())) }()

	for _, name := range []string{b.path, b.path + "-wal", b.path + "-shm", filepath.Join(b.path+".hxd", "lock")} {
		fi, err := os.Stat(name)
		require.NoError(t, err, name)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}
	fi, err := os.Stat(b.path + ".hxd")
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

// TestLockPlaceIsOneFolder: after 500 sessions were locked, signalled and
// released by two Stores of the file (while another lock was held), the
// database's folder holds the database, its -wal and -shm and one folder
// of hxd's, which holds one file.
func TestLockPlaceIsOneFolder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := openAt(t, b.path)
	held, err := other.SessionLock(b.ctx(), "held")
	require.NoError(t, err)
	for i := range 500 {
		st := b.store
		if i%2 == 1 {
			st = other
		}
		id := "s" + strconv.Itoa(i)
		require.NoError(t, st.SessionInsert(b.ctx(), &rtstore.SessionRow{ID: id, Principal: "p"}))
		l, err := st.SessionLock(b.ctx(), id)
		require.NoError(t, err)
		require.NoError(t, st.SessionControlSet(b.ctx(), id, rtstore.ControlPaused))
		require.NoError(t, l.Release(b.ctx()))
	}
	require.NoError(t, held.Release(b.ctx()))
	names := func(dir string) []string {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	require.ElementsMatch(t, []string{"hxd.db", "hxd.db-wal", "hxd.db-shm", "hxd.db.hxd"}, names(filepath.Dir(b.path)))
	require.Equal(t, []string{"lock"}, names(b.path+".hxd"))
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hxd.db")
	ctx := testCtx(t)
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, AutoMigrate: true})
	require.NoError(t, err)
	b := &testBundle{store: st, path: path, tb: t}
	s, run := b.seed(t)
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "Close is idempotent")

	for _, auto := range []bool{true, false} {
		st, err = sqlite.Open(ctx, sqlite.Config{Path: path, AutoMigrate: auto})
		require.NoError(t, err)
		got, err := st.SessionGet(ctx, s.ID)
		require.NoError(t, err)
		require.Equal(t, run.ID, got.LastRunID)
		recs, err := st.JournalList(ctx, run.ID, 0, 0)
		require.NoError(t, err)
		require.Len(t, recs, 3)
		evs, err := st.EventListAfter(ctx, run.ID, 0, 0)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		data, err := st.ArtifactGet(ctx, digest("blob"))
		require.NoError(t, err)
		require.Equal(t, []byte("blob"), data)
		require.NoError(t, st.Ping(ctx))
		require.NoError(t, st.Close())
	}
}

func TestSchemaRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tamper  string
		message string
	}{
		{"ChecksumChanged", `UPDATE schema_checksums SET sha256 = 'deadbeef' WHERE version = 1`, "changed after it was applied"},
		{"ChecksumUnknown", `INSERT INTO schema_checksums (version, sha256) VALUES (9999, 'x')`, "does not have"},
		{"Dirty", `UPDATE schema_migrations SET dirty = 1`, "dirty"},
		{"NewerVersion", `UPDATE schema_migrations SET version = 9999`, "knows versions up to"},
		{"ChecksumMissing", `DELETE FROM schema_checksums`, "no checksum recorded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			_, err := rawDB(t, b.path).ExecContext(b.ctx(), tt.tamper)
			require.NoError(t, err)

			// A running store notices at Ping.
			err = b.store.Ping(b.ctx())
			require.ErrorIs(t, err, rtstore.ErrSchema)
			require.Contains(t, err.Error(), tt.message)

			_, err = sqlite.Open(b.ctx(), sqlite.Config{Path: b.path})
			require.ErrorIs(t, err, rtstore.ErrSchema)
			require.Contains(t, err.Error(), tt.message)
			if tt.name == "ChecksumMissing" {
				return // auto-migrate records missing checksums
			}
			_, err = sqlite.Open(b.ctx(), sqlite.Config{Path: b.path, AutoMigrate: true})
			require.ErrorIs(t, err, rtstore.ErrSchema)
			require.Contains(t, err.Error(), tt.message)
		})
	}
}

func TestValidateOnly(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "hxd.db")

	_, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	require.ErrorIs(t, err, rtstore.ErrSchema)
	require.Contains(t, err.Error(), "hxd migrate")
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist, "validate-only creates no database")

	// An existing file without schema is refused and left alone.
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	_, err = sqlite.Open(ctx, sqlite.Config{Path: path})
	require.ErrorIs(t, err, rtstore.ErrSchema)
	require.Contains(t, err.Error(), "no schema")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Zero(t, fi.Size())

	openAt(t, path)
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	require.NoError(t, err)
	require.NoError(t, st.Close())
}

func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hxd.db")
	ctx := testCtx(t)
	const n = 6
	stores := make([]*sqlite.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = sqlite.Open(ctx, sqlite.Config{Path: path, AutoMigrate: true})
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.NoError(t, stores[i].Ping(ctx))
	}
	// Two stores on one file exclude each other like two processes.
	l, err := stores[0].SessionLock(ctx, "ses-1")
	require.NoError(t, err)
	_, err = stores[1].SessionLock(ctx, "ses-1")
	require.ErrorIs(t, err, rtstore.ErrSessionBusy)
	require.NoError(t, l.Release(ctx))
	for i := range n {
		require.NoError(t, stores[i].Close())
	}
}

func TestAppendOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seed(t)
	db := rawDB(t, b.path)
	for _, q := range []string{
		`UPDATE journal SET payload = '{}'`,
		`DELETE FROM journal`,
		`UPDATE events SET payload = '{}'`,
		`DELETE FROM events`,
		`UPDATE artifacts SET content = x'00'`,
		`DELETE FROM artifacts`,
		`DELETE FROM ids`,
	} {
		_, err := db.ExecContext(b.ctx(), q)
		require.Error(t, err, q)
		require.Contains(t, err.Error(), "append-only", q)
	}
	// Even gc (the artifact sweep's mark, migration 0005) never deletes a
	// referenced artifact.
	s := &rtstore.SessionRow{ID: "ses-art", Principal: "alice"}
	require.NoError(t, b.store.SessionInsert(b.ctx(), s))
	require.NoError(t, b.store.ArtifactPut(b.ctx(), s.ID, digest("blob"), []byte("blob")))
	tx, err := db.BeginTx(b.ctx(), nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(b.ctx(), `INSERT INTO gc_deleting (run_seq, run_id) VALUES (0, '')`)
	require.NoError(t, err)
	_, err = tx.ExecContext(b.ctx(), `DELETE FROM artifacts`)
	require.ErrorContains(t, err, "append-only while referenced")
}

func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.db")
	db := rawDB(t, path)
	src, err := iofs.New(migrations.SQLite, "sqlite")
	require.NoError(t, err)
	drv, err := migratesqlite.WithInstance(db, &migratesqlite.Config{})
	require.NoError(t, err)
	m, err := migrate.NewWithInstance("iofs", src, "sqlite", drv)
	require.NoError(t, err)
	require.NoError(t, m.Up())
	require.NoError(t, m.Down())
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE tbl_name <> 'schema_migrations' AND name NOT LIKE 'sqlite_%'`).Scan(&n))
	require.Zero(t, n, "down leaves no object behind")
	require.NoError(t, m.Up())
	srcErr, dbErr := m.Close()
	require.NoError(t, srcErr)
	require.NoError(t, dbErr)

	// The migrated file opens (checksums are recorded on first open).
	openAt(t, path)
}

func TestSkippedEventKeepsStoredCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, run := b.seed(t)
	evs, err := b.store.EventListAfter(b.ctx(), run.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)

	dup := evs[0]
	dup.Cursor = ""
	c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning, Phase: "model",
		Events: []rtstore.PendingEvent{{Event: dup}, {Event: rtstore.RunEvent{Type: "text_delta", EventID: uuid.NewString()}}}}
	require.NoError(t, b.store.Commit(b.ctx(), c))
	require.Equal(t, "1", c.Events[0].Event.Cursor)
	require.Equal(t, "2", c.Events[1].Event.Cursor)
}

func TestArtifactDigestChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Error(t, b.store.ArtifactPut(b.ctx(), "", digest("a"), []byte("b")))
	_, err := b.store.ArtifactGet(b.ctx(), digest("a"))
	require.ErrorIs(t, err, rtstore.ErrNotFound)
}

func TestClosed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "hxd.db"), AutoMigrate: true})
	require.NoError(t, err)
	l, err := st.SessionLock(ctx, "ses-1")
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, l.Release(ctx), "Close released it already")

	_, err = st.SessionGet(ctx, "ses-1")
	require.ErrorIs(t, err, rtstore.ErrUnavailable)
	require.ErrorIs(t, st.SessionInsert(ctx, &rtstore.SessionRow{ID: "x"}), rtstore.ErrUnavailable)
	require.ErrorIs(t, st.Commit(ctx, &rtstore.Commit{SessionID: "x", RunID: "y", Status: "running"}), rtstore.ErrUnavailable)
	_, err = st.SessionLock(ctx, "ses-1")
	require.ErrorIs(t, err, rtstore.ErrUnavailable)
	require.ErrorIs(t, st.Ping(ctx), rtstore.ErrUnavailable)
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, err := sqlite.Open(ctx, sqlite.Config{})
	require.Error(t, err)
	_, err = sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "a?b.db"), AutoMigrate: true})
	require.Error(t, err)
}

// lockHelperEnv makes the test binary a lock-holding child process.
const lockHelperEnv = "HXD_SQLITE_LOCK_HELPER"

// TestLockHelperProcess is the child of TestCrossProcessLock: it opens the
// database named in the environment, locks the session, says "locked" and
// holds the lock until killed (or until its stdin closes).
func TestLockHelperProcess(t *testing.T) {
	spec := os.Getenv(lockHelperEnv)
	if spec == "" {
		t.Skip("child process of TestCrossProcessLock")
	}
	path, sessionID, _ := strings.Cut(spec, "|")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, AutoMigrate: true})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	if _, err := st.SessionLock(ctx, sessionID); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func TestCrossProcessLock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _ := b.seed(t)

	child := startChild(t, b.ctx(), lockHelperEnv+"="+b.path+"|"+s.ID, "-test.run=^TestLockHelperProcess$", "-test.count=1")
	require.Equal(t, "locked\n", string(child.firstLine(t)))

	_, err := b.store.SessionLock(b.ctx(), s.ID)
	require.ErrorIs(t, err, rtstore.ErrSessionBusy)
	require.Contains(t, err.Error(), "another process")

	child.kill(t)

	// The OS dropped the dead process's lock: taking it succeeds at once.
	start := time.Now()
	l, err := b.store.SessionLock(b.ctx(), s.ID)
	require.NoError(t, err)
	require.Less(t, time.Since(start), time.Second)
	require.NoError(t, l.Release(b.ctx()))
}

// child is the test binary started again in a role of its own (TestMain's
// childMains or a helper test), holding locks until it is killed; its
// stdin stays open while it runs.
type child struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	done   bool
}

// startChild starts the test binary with env added and args; the child
// is killed when the test ends unless child.kill ran first.
func startChild(t *testing.T, ctx context.Context, env string, args ...string) *child {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), env)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, stdout: bufio.NewReader(stdout)}
	t.Cleanup(func() {
		_ = stdin.Close()
		if !c.done {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return c
}

// firstLine is the child's next line of output, newline included.
func (c *child) firstLine(t *testing.T) []byte {
	t.Helper()
	line, err := c.stdout.ReadBytes('\n')
	require.NoError(t, err)
	return line
}

// kill ends the child with SIGKILL and waits for it.
func (c *child) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Kill())
	_ = c.cmd.Wait()
	c.done = true
}

// digest is the artifact id of s.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, run := b.seed(t)
	ctx, cancel := context.WithCancel(b.ctx())
	cancel()
	err := b.store.Commit(ctx, &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusFailed, Phase: "x"})
	require.ErrorIs(t, err, context.Canceled)
	got, err := b.store.RunGet(b.ctx(), run.ID)
	require.NoError(t, err)
	require.Equal(t, rtstore.StatusRunning, got.Status)
}

// TestBatchedAppend covers the multi-row path: more rows than one INSERT
// takes, a re-send mixing known and new ids (done again row by row), and
// runs whose journal and events sit side by side.
func TestBatchedAppend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s1, run1 := b.seed(t) // 3 records, 1 event
	_, run2 := b.seed(t)
	rec := func(i int) journal.Record {
		return journal.Record{
			Version: 1, ID: uuid.NewString(), Kind: journal.KindCheckpoint, RecordedAt: journal.Timestamp(time.Now()),
			SessionID: s1.ID, RunID: run1.ID, StepID: "1", AttemptID: "1", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
		}
	}
	ev := func() rtstore.PendingEvent {
		r := rec(-1)
		r.Kind = journal.KindEvent
		return rtstore.PendingEvent{Event: rtstore.RunEvent{Type: "text_delta", SessionID: s1.ID, RunID: run1.ID, EventID: uuid.NewString()}, Record: &r}
	}
	var records []journal.Record
	for i := range 40 {
		records = append(records, rec(i))
	}
	var events []rtstore.PendingEvent
	for range 20 {
		events = append(events, ev())
	}
	c := &rtstore.Commit{SessionID: s1.ID, RunID: run1.ID, Status: rtstore.StatusRunning, Phase: "model",
		Records: records[:30], Events: events[:10]}
	require.NoError(t, b.store.Commit(b.ctx(), c))
	require.Equal(t, "2", c.Events[0].Event.Cursor)
	require.Equal(t, "11", c.Events[9].Event.Cursor)

	// Re-send the second half of the first commit with new rows.
	c = &rtstore.Commit{SessionID: s1.ID, RunID: run1.ID, Status: rtstore.StatusRunning, Phase: "tools",
		Records: records[20:], Events: events[5:]}
	require.NoError(t, b.store.Commit(b.ctx(), c))
	require.Equal(t, "7", c.Events[0].Event.Cursor, "a known event keeps its cursor")
	require.Equal(t, "12", c.Events[5].Event.Cursor, "the first new event follows")
	require.Equal(t, "21", c.Events[14].Event.Cursor)

	recs, err := b.store.JournalList(b.ctx(), run1.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 3+40+20) // seed, records, one record per event
	for i, r := range recs {
		require.Equal(t, int64(i+1), r.Seq)
		require.Equal(t, run1.ID, r.RunID)
	}
	require.Equal(t, records[39].ID, recs[3+30+10+9].ID, "new records come before the new events' records")
	recs, err = b.store.JournalList(b.ctx(), run1.ID, 60, 2)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, int64(61), recs[0].Seq)
	evs, err := b.store.EventListAfter(b.ctx(), run1.ID, 19, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, "20", evs[0].Cursor)

	// The other run's rows are untouched.
	recs, err = b.store.JournalList(b.ctx(), run2.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	evs, err = b.store.EventListAfter(b.ctx(), run2.ID, -5, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	recs, err = b.store.JournalList(b.ctx(), "run-unknown", 0, 0)
	require.NoError(t, err)
	require.Empty(t, recs)

	// A changed record in a batch rolls the whole commit back.
	bad := records[39]
	bad.Payload = json.RawMessage(`{"changed":true}`)
	c = &rtstore.Commit{SessionID: s1.ID, RunID: run1.ID, Status: rtstore.StatusRunning, Phase: "model",
		Records: []journal.Record{rec(100), bad}, Events: []rtstore.PendingEvent{ev()}}
	require.ErrorIs(t, b.store.Commit(b.ctx(), c), rtstore.ErrRecordConflict)
	recs, err = b.store.JournalList(b.ctx(), run1.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 63)
	evs, err = b.store.EventListAfter(b.ctx(), run1.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 21)
}

// TestSymlinkSharesSessionLocks: Stores of one file opened by different
// paths (a symbolic link to the file, one to its folder) share the session
// locks.
func TestSymlinkSharesSessionLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	real := filepath.Join(dir, "data", "hxd.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(real), 0o700))
	a, err := sqlite.Open(ctx, sqlite.Config{Path: real, AutoMigrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	fileLink := filepath.Join(dir, "link.db")
	require.NoError(t, os.Symlink(real, fileLink))
	dirLink := filepath.Join(dir, "elsewhere")
	require.NoError(t, os.Symlink(filepath.Dir(real), dirLink))

	lease, err := a.SessionLock(ctx, "s1")
	require.NoError(t, err)
	for _, p := range []string{fileLink, filepath.Join(dirLink, "hxd.db")} {
		b, err := sqlite.Open(ctx, sqlite.Config{Path: p})
		require.NoError(t, err)
		_, err = b.SessionLock(ctx, "s1")
		require.ErrorIs(t, err, rtstore.ErrSessionBusy, p)
		require.NoError(t, b.Close())
	}
	require.NoError(t, lease.Release(ctx))
}

// TestCommitContextEndsWhileLocked: a boundary whose ctx ends while it
// waits for the write lock (another connection holds it) fails with the
// ctx's error once the lock comes, writes nothing, and leaves the writer
// usable for the next commit.
func TestCommitContextEndsWhileLocked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, run := b.seed(t)
	other, err := sql.Open("sqlite", b.path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	holder, err := other.Conn(b.ctx())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })
	_, err = holder.ExecContext(b.ctx(), "BEGIN IMMEDIATE")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(b.ctx(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- b.store.Commit(ctx, &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusFailed, Phase: "x"})
	}()
	<-ctx.Done()
	time.Sleep(300 * time.Millisecond)
	_, err = holder.ExecContext(b.ctx(), "ROLLBACK")
	require.NoError(t, err)
	require.ErrorIs(t, <-done, context.DeadlineExceeded)

	got, err := b.store.RunGet(b.ctx(), run.ID)
	require.NoError(t, err)
	require.Equal(t, rtstore.StatusRunning, got.Status, "nothing written")
	require.NoError(t, b.store.Commit(b.ctx(), &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusFailed, Phase: "x"}))
	got, err = b.store.RunGet(b.ctx(), run.ID)
	require.NoError(t, err)
	require.Equal(t, rtstore.StatusFailed, got.Status)
}
