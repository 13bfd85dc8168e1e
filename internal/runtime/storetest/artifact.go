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
		require.NoError(t, b.store.ArtifactPut(b.ctx, id, data))
		got, err := b.store.ArtifactGet(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, data, got)

		// Idempotent.
		require.NoError(t, b.store.ArtifactPut(b.ctx, id, data))
		got, err = b.store.ArtifactGet(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, data, got)
	}},
	{"Empty", func(t *testing.T, b *bundle) {
		id := digest(nil)
		require.NoError(t, b.store.ArtifactPut(b.ctx, id, []byte{}))
		got, err := b.store.ArtifactGet(b.ctx, id)
		require.NoError(t, err)
		require.Empty(t, got)
	}},
	{"NotFound", func(t *testing.T, b *bundle) {
		_, err := b.store.ArtifactGet(b.ctx, digest([]byte("never stored")))
		require.ErrorIs(t, err, rtstore.ErrNotFound)
	}},
}

// digest is the artifact id of data.
func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
