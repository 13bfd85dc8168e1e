package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
)

// openWALShimDB opens path through the writer's DSN (the WAL shim, no
// automatic checkpoints) with one connection.
func openWALShimDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	require.NotEmpty(t, walVFSName, "the WAL shim is not registered")
	require.Contains(t, writerDSN(path), "vfs="+walVFSName)
	db, err := sql.Open("sqlite", writerDSN(path))
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// crashCopy copies the database file and its WAL, as a crash would leave
// them (the writer is still open, nothing checkpointed), and opens the
// copy through the plain unix VFS.
func crashCopy(t *testing.T, path string) *sql.DB {
	t.Helper()
	dir := t.TempDir()
	for _, suffix := range []string{"", "-wal"} {
		data, err := os.ReadFile(path + suffix)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "copy.db"+suffix), data, 0o600))
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "copy.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var ok string
	require.NoError(t, db.QueryRow(`PRAGMA integrity_check`).Scan(&ok))
	require.Equal(t, "ok", ok)
	return db
}

// TestWALShimOneWritePerCommit: a commit that changes ten pages reaches the
// WAL in one write instead of two per page. Not parallel: it reads the
// process-wide write counter.
func TestWALShimOneWritePerCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	db := openWALShimDB(t, path)
	const tables, commits = 10, 20
	for i := range tables {
		_, err := db.Exec(fmt.Sprintf(`CREATE TABLE t%d (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`, i))
		require.NoError(t, err)
	}
	before := walWrites.Load()
	for c := range commits {
		tx, err := db.Begin()
		require.NoError(t, err)
		for i := range tables {
			_, err := tx.Exec(fmt.Sprintf(`INSERT INTO t%d (v) VALUES (?)`, i), fmt.Sprint(c))
			require.NoError(t, err)
		}
		require.NoError(t, tx.Commit())
	}
	// Each commit writes at least one frame per table; unshimmed that is
	// two write calls per frame.
	require.Equal(t, int64(commits), walWrites.Load()-before, "one WAL write per commit")

	// Everything committed is in the files, as a crash would find them.
	cp := crashCopy(t, path)
	for i := range tables {
		var n int
		require.NoError(t, cp.QueryRow(fmt.Sprintf(`SELECT count(*) FROM t%d`, i)).Scan(&n))
		require.Equal(t, commits, n)
	}
}

// TestWALShimCommitsAreVisibleAndDurable: readers on other connections see
// each commit as soon as it returns, and a copy of the files taken then (a
// crash) holds it, for small commits, commits larger than the shim's
// buffer, and transactions that spill pages into the WAL before they
// commit (and overwrite those frames).
func TestWALShimCommitsAreVisibleAndDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	db := openWALShimDB(t, path)
	_, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB NOT NULL)`)
	require.NoError(t, err)
	reader, err := sql.Open("sqlite", readerDSN(path))
	require.NoError(t, err)
	t.Cleanup(func() { _ = reader.Close() })

	big := bytes.Repeat([]byte("0123456789abcdef"), (walMaxBuffer+walMaxBuffer/2)/16)
	cases := []struct {
		name  string
		write func(tx *sql.Tx) error
		rows  int
	}{
		{"small", func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO t (v) VALUES (?)`, []byte("x"))
			return err
		}, 1},
		{"larger than the buffer", func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO t (v) VALUES (?)`, big)
			return err
		}, 1},
		{"spilled and rewritten", func(tx *sql.Tx) error {
			// A tiny page cache makes SQLite write dirty pages to the WAL
			// mid-transaction and write them again when they change.
			if _, err := tx.Exec(`PRAGMA cache_size = 2`); err != nil {
				return err
			}
			for i := range 300 {
				if _, err := tx.Exec(`INSERT INTO t (v) VALUES (?)`, []byte(strings.Repeat("s", 500+i))); err != nil {
					return err
				}
			}
			_, err := tx.Exec(`UPDATE t SET v = v || 'u' WHERE length(v) >= 500`)
			return err
		}, 300},
	}
	want := 0
	for _, c := range cases {
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err, c.name)
		require.NoError(t, c.write(tx), c.name)
		require.NoError(t, tx.Commit(), c.name)
		want += c.rows

		var n int
		require.NoError(t, reader.QueryRow(`SELECT count(*) FROM t`).Scan(&n), c.name)
		require.Equal(t, want, n, "%s: a reader sees the commit", c.name)

		var sum int64
		require.NoError(t, db.QueryRow(`SELECT coalesce(sum(length(v)), 0) FROM t`).Scan(&sum), c.name)
		var got int64
		require.NoError(t, crashCopy(t, path).QueryRow(`SELECT coalesce(sum(length(v)), 0) FROM t`).Scan(&got), c.name)
		require.Equal(t, sum, got, "%s: the crash copy holds the commit", c.name)
	}
}

// TestWALShimFlushesAtTheCommitFrame: without a sync per commit
// (synchronous=OFF, which hxd never uses), the commit frame alone gets the
// buffer written before SQLite publishes the commit to readers.
func TestWALShimFlushesAtTheCommitFrame(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "w.db")
	db := openWALShimDB(t, path)
	_, err := db.Exec(`PRAGMA synchronous = OFF`)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`)
	require.NoError(t, err)
	reader, err := sql.Open("sqlite", readerDSN(path))
	require.NoError(t, err)
	t.Cleanup(func() { _ = reader.Close() })
	for i := 1; i <= 5; i++ {
		_, err := db.Exec(`INSERT INTO t (v) VALUES (?)`, strings.Repeat("v", 3000))
		require.NoError(t, err)
		var n int
		require.NoError(t, reader.QueryRow(`SELECT count(*) FROM t WHERE length(v) = 3000`).Scan(&n))
		require.Equal(t, i, n)
		require.NoError(t, crashCopy(t, path).QueryRow(`SELECT count(*) FROM t`).Scan(&n))
		require.Equal(t, i, n)
	}
}

// TestWALShimRollbackWritesNothing: a transaction rolled back leaves the
// WAL as it was, and the next commit goes through.
func TestWALShimRollbackWritesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "w.db")
	db := openWALShimDB(t, path)
	_, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`)
	require.NoError(t, err)
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)

	tx, err := db.Begin()
	require.NoError(t, err)
	_, err = tx.Exec(`INSERT INTO t (v) VALUES ('gone')`)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	after, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	require.Equal(t, fi.Size(), after.Size())

	_, err = db.Exec(`INSERT INTO t (v) VALUES ('kept')`)
	require.NoError(t, err)
	var v string
	require.NoError(t, crashCopy(t, path).QueryRow(`SELECT group_concat(v) FROM t`).Scan(&v))
	require.Equal(t, "kept", v)
}

// TestWALShimDropsAnUncommittedSpill: a transaction that spills pages into
// the WAL and fails (here an artifact of an unknown session, refused by a
// foreign key after its 3 MB row was written) leaves nothing behind that
// could later land over another writer's committed frames. Two Stores on
// one file stand for two processes; without the drop, the first Store's
// next commit writes its stale frames over the second's and the database
// is corrupt.
func TestWALShimDropsAnUncommittedSpill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hxd.db")
	idle := checkpointConfig{commits: 1 << 30, interval: time.Hour, restart: 1 << 40, maxWAL: 1 << 40, busy: 50 * time.Millisecond}
	a, err := open(ctx, Config{Path: path, AutoMigrate: true}, idle)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b, err := open(ctx, Config{Path: path, AutoMigrate: true}, idle)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })

	blob := bytes.Repeat([]byte("0123456789abcdef"), (3<<20)/16)
	sum := sha256.Sum256(blob)
	require.Error(t, a.ArtifactPut(ctx, "no-such-session", hex.EncodeToString(sum[:]), blob))
	pad := json.RawMessage(`{"pad":"` + strings.Repeat("x", 1500) + `"}`)
	for i := range 200 {
		require.NoError(t, b.SessionInsert(ctx, &rtstore.SessionRow{ID: fmt.Sprint("b-", i), Principal: "p", Metadata: pad}))
	}
	require.NoError(t, a.SessionInsert(ctx, &rtstore.SessionRow{ID: "a-1", Principal: "p"}))

	var ok string
	require.NoError(t, a.r.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok))
	require.Equal(t, "ok", ok)
	var n int
	require.NoError(t, a.r.QueryRowContext(ctx, `SELECT count(*) FROM sessions`).Scan(&n))
	require.Equal(t, 201, n)
}
