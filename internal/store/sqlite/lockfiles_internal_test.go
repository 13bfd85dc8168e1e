//go:build unix

package sqlite

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// newFileLockers opens n fileLockers on one lock place, each on its own
// open file description of the lock file, as n Stores would.
func newFileLockers(t *testing.T, n int) ([]*fileLocker, string) {
	t.Helper()
	dir := t.TempDir()
	out := make([]*fileLocker, n)
	for i := range out {
		f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_CREATE|os.O_RDWR, fileMode)
		require.NoError(t, err)
		t.Cleanup(func() { _ = f.Close() })
		out[i] = &fileLocker{f: f, dir: dir}
	}
	return out, dir
}

// entries lists a folder's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestFileLocker: the locker of systems without OFD locks excludes other
// Stores, keeps a file only while a session is held and removes it on
// release; its migration lock excludes too.
func TestFileLocker(t *testing.T) {
	t.Parallel()
	ls, dir := newFileLockers(t, 2)
	a, b := ls[0], ls[1]

	unlock, ok, err := a.lockSession("s1")
	require.NoError(t, err)
	require.True(t, ok)
	require.ElementsMatch(t, []string{lockFileName, sessionHex("s1") + ".lock"}, entries(t, dir))
	_, ok, err = b.lockSession("s1")
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, unlock())
	require.Equal(t, []string{lockFileName}, entries(t, dir))
	unlock, ok, err = b.lockSession("s1")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, unlock())

	unlockM, ok, err := a.lockMigrations()
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = b.lockMigrations()
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, unlockM())
	unlockM, ok, err = b.lockMigrations()
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, unlockM())
	require.Equal(t, []string{lockFileName}, entries(t, dir))
}

// TestFileLockerRemovalIsSafe: eight Stores take and release one session
// as fast as they can. A locker that got the flock of a file its holder
// had removed meanwhile must not count as holding the session: there is
// never more than one holder, and no file is left.
func TestFileLockerRemovalIsSafe(t *testing.T) {
	t.Parallel()
	ls, dir := newFileLockers(t, 8)
	var holders, taken, most atomic.Int64
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() {
			for range 400 {
				unlock, ok, err := l.lockSession("s1")
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue
				}
				n := holders.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				taken.Add(1)
				holders.Add(-1)
				if err := unlock(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Positive(t, taken.Load())
	require.Equal(t, int64(1), most.Load(), "holders at once")
	require.Equal(t, []string{lockFileName}, entries(t, dir))
}
