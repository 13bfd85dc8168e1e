package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
)

var artifactCases = []testCase{
	{"PutGet", func(t *testing.T, b *bundle) {
		data := []byte("invoice #42\x00\xff binary")
		id := digest(data)
		sid := b.newSession(t, "alice").ID
		require.NoError(t, b.store.ArtifactPut(t.Context(), sid, id, data))
		got, err := b.store.ArtifactGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, data, got)

		// Idempotent.
		require.NoError(t, b.store.ArtifactPut(t.Context(), sid, id, data))
		got, err = b.store.ArtifactGet(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, data, got)
	}},
	{"Empty", func(t *testing.T, b *bundle) {
		id := digest(nil)
		require.NoError(t, b.store.ArtifactPut(t.Context(), b.newSession(t, "alice").ID, id, []byte{}))
		got, err := b.store.ArtifactGet(t.Context(), id)
		require.NoError(t, err)
		require.Empty(t, got)
	}},
	{"Ownership", func(t *testing.T, b *bundle) {
		data := []byte("alice's report")
		id := digest(data)
		alice, bob := b.newSession(t, "alice"), b.newSession(t, "bob")
		require.NoError(t, b.store.ArtifactPut(t.Context(), alice.ID, id, data))
		ok, err := b.store.ArtifactOwned(t.Context(), id, "alice")
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.ArtifactOwned(t.Context(), id, "bob")
		require.NoError(t, err)
		require.False(t, ok, "bob's sessions never referenced it")
		// The same bytes produced in bob's session link it to bob too.
		require.NoError(t, b.store.ArtifactPut(t.Context(), bob.ID, id, data))
		ok, err = b.store.ArtifactOwned(t.Context(), id, "bob")
		require.NoError(t, err)
		require.True(t, ok)
	}},
	{"NotFound", func(t *testing.T, b *bundle) {
		_, err := b.store.ArtifactGet(t.Context(), digest([]byte("never stored")))
		require.ErrorIs(t, err, rtstore.ErrNotFound)
	}},
}

// digest is the artifact id of data.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
