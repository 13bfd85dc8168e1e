package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSharedByteIsBusyNeverTwoOwners: two sessions whose locks fall on one
// byte of the lock file. The OS would let one open file description take
// the byte twice; the second session of the same Store is refused (a false
// busy), as it is by another Store, and releasing the first leaves the
// byte free for one taker only.
func TestSharedByteIsBusyNeverTwoOwners(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hxd.db")
	a := openCheckpointed(t, path, defaultCheckpointConfig()).locker.(*ofdLocker)
	b := openCheckpointed(t, path, defaultCheckpointConfig()).locker.(*ofdLocker)
	off := sessionByte("s1")

	unlockA, ok, err := a.lockByte(off)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = a.lockByte(off)
	require.NoError(t, err)
	require.False(t, ok, "a session sharing the byte in the same Store")
	_, ok, err = b.lockByte(off)
	require.NoError(t, err)
	require.False(t, ok, "another Store")

	require.NoError(t, unlockA())
	require.NoError(t, unlockA(), "unlock is idempotent")
	unlockB, ok, err := b.lockByte(off)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = a.lockByte(off)
	require.NoError(t, err)
	require.False(t, ok, "released, then taken by the other Store")
	require.NoError(t, unlockB())
}

// TestSessionBytes: session bytes never fall on the migration byte and
// stay within what an off_t addresses.
func TestSessionBytes(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"", "s1", "ses-0f1c", "\x00", "a/b?c"} {
		off := sessionByte(id)
		require.Greater(t, off, int64(migrationByte), id)
		require.Positive(t, off, id)
	}
}
