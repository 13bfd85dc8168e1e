package sqlite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"

	"hxd/internal/hxtest"
	"hxd/internal/runtime/rtstore"
)

// fullDatabase makes s's database full: its writer connection (every
// write of the Store goes through it) may not grow the file past the pages
// it has (PRAGMA max_page_count), and filler rows take up the free pages,
// so that a write needing a new page fails with SQLITE_FULL, as a write
// the file system has no room for does (the unix VFS reports ENOSPC as
// SQLITE_FULL). Until spaceBack (also at cleanup) lifts the limit. A write
// that fits in the free space of a page it changes still goes through:
// tests write payloads larger than a page to meet the limit.
func fullDatabase(t *testing.T, s *Store) (spaceBack func()) {
	t.Helper()
	ctx := context.Background()
	var limit, pages int64
	require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA max_page_count").Scan(&limit))
	_, err := s.w.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS test_filler (b BLOB)")
	require.NoError(t, err)
	require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages))
	require.NoError(t, s.w.QueryRowContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)).Scan(&pages))
	for {
		_, err := s.w.ExecContext(ctx, "INSERT INTO test_filler (b) VALUES (zeroblob(3000))")
		if err == nil {
			continue
		}
		var se *sqlite.Error
		require.ErrorAs(t, err, &se)
		require.Equal(t, codeFull, se.Code()&0xff, "filling the free pages: %v", err)
		break
	}
	done := false
	spaceBack = func() {
		if !done {
			done = true
			require.NoError(t, s.w.QueryRowContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", limit)).Scan(&pages))
		}
	}
	t.Cleanup(spaceBack)
	return spaceBack
}

// pageFiller is a payload larger than a page: a write carrying it needs
// new pages (fullDatabase).
var pageFiller = strings.Repeat("z", 16<<10)

func openFaultStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), "hxd.db"), Logger: hxtest.Logger(t), AutoMigrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// TestTransientCode: which SQLite result codes mean "unavailable for now".
// An I/O error or a failed open counts only while the OS is short of disk
// space or descriptors.
func TestTransientCode(t *testing.T) {
	t.Parallel()
	const (
		codeError    = 1
		codeReadOnly = 8
		codeCorrupt  = 11
		ioerrWrite   = codeIOErr | 3<<8
		ioerrFsync   = codeIOErr | 4<<8
		ioerrShmSize = codeIOErr | 19<<8
	)
	none := func() error { return nil }
	short := func(errno syscall.Errno) func() error { return func() error { return errno } }
	tests := []struct {
		name     string
		code     int
		shortage func() error
		want     bool
		cause    error
	}{
		{"busy", codeBusy, none, true, nil},
		{"busy snapshot", codeBusy | 2<<8, none, true, nil},
		{"locked", codeLocked, none, true, nil},
		{"full", codeFull, none, true, nil},
		{"write error, disk full", ioerrWrite, short(syscall.ENOSPC), true, syscall.ENOSPC},
		{"fsync error, disk full", ioerrFsync, short(syscall.ENOSPC), true, syscall.ENOSPC},
		{"shm growth, disk full", ioerrShmSize, short(syscall.ENOSPC), true, syscall.ENOSPC},
		{"write error, space left", ioerrWrite, none, false, nil},
		{"cannot open, no descriptors", codeCantOpen, short(syscall.EMFILE), true, syscall.EMFILE},
		{"cannot open, system table full", codeCantOpen, short(syscall.ENFILE), true, syscall.ENFILE},
		{"cannot open, descriptors left", codeCantOpen, none, false, nil},
		{"constraint", codeConstraintUnique, short(syscall.ENOSPC), false, nil},
		{"corrupt", codeCorrupt, short(syscall.ENOSPC), false, nil},
		{"read only", codeReadOnly, none, false, nil},
		{"generic error", codeError, none, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, cause := transientCode(tt.code, tt.shortage)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.cause, cause)
		})
	}
}

// TestShortageErrno: OS errors of a full disk or of no descriptors left,
// however wrapped, and no others.
func TestShortageErrno(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"disk full", &fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, syscall.ENOSPC},
		{"quota", fmt.Errorf("create: %w", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EDQUOT}), syscall.EDQUOT},
		{"process descriptors", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EMFILE}, syscall.EMFILE},
		{"system descriptors", os.NewSyscallError("socket", syscall.ENFILE), syscall.ENFILE},
		{"permission", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, 0},
		{"missing", &fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, 0},
		{"plain", errors.New("no space left on device"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := shortageErrno(tt.err)
			require.Equal(t, tt.want != 0, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestMapErrUnavailable: mapErr turns the errors of a full disk or of no
// descriptors left into ErrUnavailable, whichever way they come, without
// letting a driver type out; other errors are not.
func TestMapErrUnavailable(t *testing.T) {
	t.Parallel()
	s := openFaultStore(t)
	ctx := context.Background()
	for _, err := range []error{
		&fs.PathError{Op: "open", Path: s.dir, Err: syscall.EMFILE},
		fmt.Errorf("lock session: %w", &fs.PathError{Op: "write", Path: s.dir, Err: syscall.ENOSPC}),
	} {
		got := s.mapErr(ctx, "op", err)
		require.ErrorIs(t, got, rtstore.ErrUnavailable, err.Error())
	}
	got := s.mapErr(ctx, "op", &fs.PathError{Op: "open", Path: s.dir, Err: syscall.EACCES})
	require.NotErrorIs(t, got, rtstore.ErrUnavailable)
}

// TestDatabaseFullIsUnavailable: a real SQLITE_FULL (the writer's
// max_page_count reached) is ErrUnavailable, carries no driver type, and
// writes go through again once there is room.
func TestDatabaseFullIsUnavailable(t *testing.T) {
	t.Parallel()
	s := openFaultStore(t)
	ctx := context.Background()
	require.NoError(t, s.SessionInsert(ctx, &rtstore.SessionRow{ID: "ses-1", Principal: "alice"}))
	var pages int64
	require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages))
	require.NoError(t, s.w.QueryRowContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)).Scan(&pages))

	data := make([]byte, 1<<20) // far more than the free pages
	for i := range data {
		data[i] = byte(i * 7)
	}
	err := s.ArtifactPut(ctx, "ses-1", sha(data), data)
	require.ErrorIs(t, err, rtstore.ErrUnavailable)
	var se *sqlite.Error
	require.False(t, errors.As(err, &se), "no driver type escapes")
	_, err = s.SessionGet(ctx, "ses-1")
	require.NoError(t, err, "reads go on")

	require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA max_page_count = 1073741823").Scan(&pages))
	require.NoError(t, s.ArtifactPut(ctx, "ses-1", sha(data), data))
}

// TestFullDatabaseFailsWrites: while the database cannot grow (a full
// disk, fullDatabase), every write that needs room and Ping report
// ErrUnavailable, failed writes leave nothing behind, and reads go on;
// when space returns, Ping recovers by itself (no write needed) and
// writes go through again without a restart.
func TestFullDatabaseFailsWrites(t *testing.T) {
	t.Parallel()
	s := openFaultStore(t)
	ctx := context.Background()
	require.NoError(t, s.SessionInsert(ctx, &rtstore.SessionRow{ID: "ses-1", Principal: "alice"}))
	require.NoError(t, s.Ping(ctx))

	spaceBack := fullDatabase(t, s)
	// Past the grace of the last commit (probeFresh), readiness must see
	// it: the probe's own rows fit in a page the table has, its page
	// check does not.
	require.Eventually(t, func() bool { return errors.Is(s.Ping(ctx), rtstore.ErrUnavailable) }, 10*time.Second, 50*time.Millisecond)
	big := []byte(pageFiller)
	require.ErrorIs(t, s.SessionInsert(ctx, &rtstore.SessionRow{ID: "ses-2", Principal: pageFiller}), rtstore.ErrUnavailable)
	require.ErrorIs(t, s.ArtifactPut(ctx, "ses-1", sha(big), big), rtstore.ErrUnavailable)
	_, err := s.SessionGet(ctx, "ses-1")
	require.NoError(t, err, "reads go on")
	_, err = s.SessionGet(ctx, "ses-2")
	require.ErrorIs(t, err, rtstore.ErrNotFound, "nothing of a failed write is left")
	_, err = s.ArtifactGet(ctx, sha(big))
	require.ErrorIs(t, err, rtstore.ErrNotFound, "nothing of a failed write is left")

	spaceBack()
	require.Eventually(t, func() bool { return s.Ping(ctx) == nil }, 10*time.Second, 50*time.Millisecond, "readiness recovers by itself")
	require.NoError(t, s.SessionInsert(ctx, &rtstore.SessionRow{ID: "ses-2", Principal: pageFiller}))
	require.NoError(t, s.ArtifactPut(ctx, "ses-1", sha(big), big))
}

// TestPingLeavesNothingBehind: the probe's page check allocates a page
// and rolls it back, so probing neither grows the file nor leaves a free
// page or a row behind.
func TestPingLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	s := openFaultStore(t)
	ctx := context.Background()
	pages := func() (count, free int64) {
		t.Helper()
		require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&count))
		require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free))
		return count, free
	}
	count, free := pages()
	for range 3 {
		s.probe.mu.Lock()
		s.probe.at = time.Time{} // the next Ping probes
		s.probe.mu.Unlock()
		s.lastCommit.Store(0)
		require.NoError(t, s.Ping(ctx))
		c, f := pages()
		require.Equal(t, count, c, "page_count")
		require.Equal(t, free, f, "freelist_count")
	}
	var rows int
	require.NoError(t, s.w.QueryRowContext(ctx, "SELECT count(*) FROM schema_checksums WHERE version < 0").Scan(&rows))
	require.Zero(t, rows)
}

// TestPingCommitsOnlyWhenIdle: Ping proves a commit with one of its own
// only when no commit of the Store did within probeFresh, and probes at
// most once per probeFresh however often it is called.
func TestPingCommitsOnlyWhenIdle(t *testing.T) {
	t.Parallel()
	s := openFaultStore(t)
	ctx := context.Background()
	require.NoError(t, s.SessionInsert(ctx, &rtstore.SessionRow{ID: "ses-1", Principal: "alice"}))
	before := s.lastCommit.Load()
	for range 20 {
		require.NoError(t, s.Ping(ctx))
	}
	require.Equal(t, before, s.lastCommit.Load(), "a fresh commit spares the probe")

	s.lastCommit.Store(time.Now().Add(-time.Minute).UnixNano())
	for range 20 {
		require.NoError(t, s.Ping(ctx))
	}
	probed := s.lastCommit.Load()
	require.Greater(t, probed, before, "an idle store is probed with a commit")
	require.Equal(t, probed, s.lastCommit.Load())
}
