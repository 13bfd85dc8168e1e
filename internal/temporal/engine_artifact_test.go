package temporal

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/runtime"
)

// failingStore is an artifact store whose reads fail like an S3 outage.
type failingStore struct{ ArtifactStore }

func (failingStore) GetOwned(context.Context, string, string) ([]byte, error) {
	return nil, errors.New("connection refused")
}

// TestEngineArtifact: GET /artifacts/{sha256} on the Temporal engine
// answers the bytes to the owner recorded by the tool activity, and
// runtime.ErrNotFound to anyone else and for any other key, whatever its
// shape; without a store every key is not found.
func TestEngineArtifact(t *testing.T) {
	store := newTestStore(t)
	ctx := context.Background()
	data := []byte("%PDF-1.7 report")
	digest, err := store.PutOwned(ctx, "alice", data)
	require.NoError(t, err)
	// A payload the codec stored: in the bucket, but nobody's.
	codecKey, err := store.Put(ctx, []byte("a large temporal payload"))
	require.NoError(t, err)
	codecDigest := strings.TrimPrefix(codecKey, store.Prefix())

	eng := newTestEngine(t, &fakeClient{}, nil)
	eng.cfg.Artifacts = store

	got, err := eng.Artifact(as("alice"), digest)
	require.NoError(t, err)
	require.Equal(t, data, got, "the owner reads the bytes")

	for _, tc := range []struct{ name, who, key string }{
		{"another principal", "bob", digest},
		{"the anonymous principal", "", digest},
		{"unknown key", "alice", sha256Hex("never stored")},
		{"codec payload", "alice", codecDigest},
		{"uppercase", "alice", strings.ToUpper(digest)},
		{"short", "alice", digest[:63]},
		{"long", "alice", digest + "0"},
		{"prefixed", "alice", store.Prefix() + digest},
		{"owner index path", "alice", "owners/" + digest},
		{"traversal", "alice", "../" + digest[3:]},
		{"empty", "alice", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := eng.Artifact(as(tc.who), tc.key)
			require.ErrorIs(t, err, runtime.ErrNotFound)
		})
	}

	t.Run("no store", func(t *testing.T) {
		bare := newTestEngine(t, &fakeClient{}, nil)
		_, err := bare.Artifact(as("alice"), digest)
		require.ErrorIs(t, err, runtime.ErrNotFound)
	})
	t.Run("store outage is unavailable", func(t *testing.T) {
		down := newTestEngine(t, &fakeClient{}, nil)
		down.cfg.Artifacts = failingStore{}
		_, err := down.Artifact(as("alice"), digest)
		require.ErrorIs(t, err, runtime.ErrUnavailable)
		require.NotErrorIs(t, err, runtime.ErrNotFound)
	})
}
