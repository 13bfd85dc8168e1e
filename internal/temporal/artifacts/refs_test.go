package artifacts

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"
)

// TestSessionRefs: an artifact two sessions reference survives the
// release of one and goes with the last; an owner object stays while a
// session of that owner references the artifact; an artifact PutOwned
// stored (no session known) is never deleted; a release is idempotent.
func TestSessionRefs(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{Prefix: "hx/"})
	ctx := context.Background()
	shared, own, legacy := []byte("shared by two sessions"), []byte("only the first"), []byte("stored before refs")

	for _, p := range []struct {
		owner, session string
		data           []byte
	}{{"alice", "k1", shared}, {"alice", "k1", own}, {"alice", "k2", shared}, {"bob", "k3", shared}, {"alice", "k1", legacy}} {
		d, err := tb.store.PutSession(ctx, p.owner, p.session, p.data)
		require.NoError(t, err)
		require.Equal(t, sha(p.data), d)
	}
	_, err := tb.store.PutOwned(ctx, "carol", legacy)
	require.NoError(t, err)
	exists := func(key string) bool {
		_, err := os.Stat(tb.srv.ObjectPath(key))
		return err == nil
	}

	rel, err := tb.store.ReleaseSession(ctx, "alice", "k1")
	require.NoError(t, err)
	require.Equal(t, Released{Artifacts: 1, Bytes: int64(len(own))}, rel, "only the artifact no other session references")
	require.False(t, exists("hx/"+sha(own)))
	require.True(t, exists("hx/"+sha(shared)))
	require.True(t, exists("hx/"+sha(legacy)), "an owner object PutOwned wrote keeps it")
	got, err := tb.store.GetOwned(ctx, "alice", sha(shared))
	require.NoError(t, err, "alice's other session still references it")
	require.Equal(t, shared, got)
	_, err = tb.store.GetOwned(ctx, "alice", sha(own))
	require.ErrorIs(t, err, ErrNotFound)
	_, err = tb.store.GetOwned(ctx, "alice", sha(legacy))
	require.ErrorIs(t, err, ErrNotFound, "alice's only session referencing it is gone")
	_, err = tb.store.GetOwned(ctx, "carol", sha(legacy))
	require.NoError(t, err)

	again, err := tb.store.ReleaseSession(ctx, "alice", "k1")
	require.NoError(t, err)
	require.Zero(t, again, "idempotent")

	rel, err = tb.store.ReleaseSession(ctx, "alice", "k2")
	require.NoError(t, err)
	require.Zero(t, rel.Artifacts, "bob's session still references it")
	_, err = tb.store.GetOwned(ctx, "alice", sha(shared))
	require.ErrorIs(t, err, ErrNotFound)
	_, err = tb.store.GetOwned(ctx, "bob", sha(shared))
	require.NoError(t, err)

	rel, err = tb.store.ReleaseSession(ctx, "bob", "k3")
	require.NoError(t, err)
	require.Equal(t, Released{Artifacts: 1, Bytes: int64(len(shared))}, rel)
	require.False(t, exists("hx/"+sha(shared)))
}

// TestPutWaitsForRelease: a put of a digest whose release is under way
// (its marker stands) stores its bytes only once the marker is gone, so a
// release never deletes bytes a new reference needs; a stale marker is
// ignored.
func TestPutWaitsForRelease(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{Prefix: "hx/"})
	ctx := context.Background()
	data := []byte("wanted again")
	marker, err := tb.store.newMarkerKey(sha(data))
	require.NoError(t, err)
	require.NoError(t, tb.store.putEmpty(ctx, marker, nil))

	done := make(chan error, 1)
	go func() {
		_, err := tb.store.PutSession(ctx, "alice", "k1", data)
		done <- err
	}()
	// Its reference is written first; its bytes wait for the marker.
	require.Eventually(t, func() bool {
		_, err := os.Stat(tb.srv.ObjectPath(tb.store.RefKey(sha(data), "alice", "k1")))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the put finished while the marker stood: %v", err)
	default:
	}
	_, err = os.Stat(tb.srv.ObjectPath("hx/" + sha(data)))
	require.True(t, os.IsNotExist(err), "no bytes stored under the marker")
	require.NoError(t, tb.raw.RemoveObject(ctx, tb.srv.Bucket, marker, minio.RemoveObjectOptions{}))
	require.NoError(t, <-done)
	got, err := tb.store.GetOwned(ctx, "alice", sha(data))
	require.NoError(t, err)
	require.Equal(t, data, got)
}
