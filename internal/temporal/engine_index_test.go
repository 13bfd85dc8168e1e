package temporal

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest/s3test"
	"hxd/internal/runtime"
)

// TestS3RunIndex: an entry round-trips, an unknown or invalid run id is
// runtime.ErrNotFound, and Delete (retention) forgets it, twice without
// error.
func TestS3RunIndex(t *testing.T) {
	t.Parallel()
	srv := s3test.StartS3(t)
	x, err := NewS3RunIndex(srv.Client(t), srv.Bucket, "hx/")
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, x.Record(ctx, "run-1", "key-1"))
	got, err := x.Lookup(ctx, "run-1")
	require.NoError(t, err)
	require.Equal(t, "key-1", got)
	for _, id := range []string{"run-2", "../run-1"} {
		_, err = x.Lookup(ctx, id)
		require.ErrorIs(t, err, runtime.ErrNotFound, id)
	}
	require.NoError(t, x.Delete(ctx, "run-1"))
	_, err = x.Lookup(ctx, "run-1")
	require.ErrorIs(t, err, runtime.ErrNotFound)
	require.NoError(t, x.Delete(ctx, "run-1"))
}
