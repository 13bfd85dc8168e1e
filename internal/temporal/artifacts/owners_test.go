package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"
)

// TestOwnerIndex: PutOwned stores the bytes and an empty owner object at
// <prefix>owners/<sha256>/<sha256(owner)>; GetOwned reads them (hash
// verified) for that owner only; malformed digests read nothing.
func TestOwnerIndex(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{Prefix: "hx/"})
	ctx := context.Background()
	data := []byte("a report a tool returned")

	digest, err := tb.store.PutOwned(ctx, "alice", data)
	require.NoError(t, err)
	require.Equal(t, sha(data), digest)
	ownerSum := sha256.Sum256([]byte("alice"))
	okey := "hx/owners/" + digest + "/" + hex.EncodeToString(ownerSum[:])
	require.Equal(t, okey, tb.store.OwnerKey(digest, "alice"))
	info, err := os.Stat(tb.srv.ObjectPath(okey))
	require.NoError(t, err, "owner index object written")
	require.Zero(t, info.Size(), "owner index object is empty")
	onDisk, err := os.ReadFile(tb.srv.ObjectPath("hx/" + digest))
	require.NoError(t, err)
	require.Equal(t, data, onDisk, "artifact stored under prefix + digest")

	got, err := tb.store.GetOwned(ctx, "alice", digest)
	require.NoError(t, err)
	require.Equal(t, data, got)
	owned, err := tb.store.Owned(ctx, "alice", digest)
	require.NoError(t, err)
	require.True(t, owned)

	_, err = tb.store.GetOwned(ctx, "mallory", digest)
	require.ErrorIs(t, err, ErrNotFound, "another principal")
	owned, err = tb.store.Owned(ctx, "mallory", digest)
	require.NoError(t, err)
	require.False(t, owned)

	// The same bytes from another owner's session: both may read them.
	again, err := tb.store.PutOwned(ctx, "bob", data)
	require.NoError(t, err)
	require.Equal(t, digest, again)
	for _, who := range []string{"alice", "bob"} {
		got, err := tb.store.GetOwned(ctx, who, digest)
		require.NoError(t, err, who)
		require.Equal(t, data, got)
	}

	// An owner object without the artifact: not found, nothing invented.
	missing := sha([]byte("never stored"))
	_, err = tb.raw.PutObject(ctx, tb.srv.Bucket, tb.store.OwnerKey(missing, "alice"), strings.NewReader(""), 0, minio.PutObjectOptions{})
	require.NoError(t, err)
	_, err = tb.store.GetOwned(ctx, "alice", missing)
	require.ErrorIs(t, err, ErrNotFound)

	// A tampered artifact is refused even for its owner.
	require.NoError(t, os.WriteFile(tb.srv.ObjectPath("hx/"+digest), []byte("a report a tool returneD"), 0o600))
	_, err = tb.store.GetOwned(ctx, "alice", digest)
	require.ErrorIs(t, err, ErrCorrupt)

	for _, bad := range []string{"", "abc", strings.ToUpper(digest), digest + "0", digest[:63] + "g",
		"../" + digest[:61], "owners/" + digest[:57], digest[:32] + "/" + digest[33:]} {
		require.False(t, ValidDigest(bad), bad)
		_, err := tb.store.GetOwned(ctx, "alice", bad)
		require.ErrorIs(t, err, ErrInvalidKey, bad)
		_, err = tb.store.Owned(ctx, "alice", bad)
		require.ErrorIs(t, err, ErrInvalidKey, bad)
	}
	require.True(t, ValidDigest(digest))
}
