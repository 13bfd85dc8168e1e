package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPragmas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "hxd.db"), AutoMigrate: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()

	for _, tt := range []struct {
		pragma string
		writer any
		reader any
	}{
		{"journal_mode", "wal", "wal"},
		{"synchronous", int64(2), nil}, // FULL
		{"foreign_keys", int64(1), int64(1)},
		{"busy_timeout", int64(5000), int64(5000)},
		{"query_only", int64(0), int64(1)},
		{"wal_autocheckpoint", int64(0), nil}, // the checkpointer does it
		{"journal_size_limit", int64(maxWALBytes), nil},
	} {
		var got any
		require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got), tt.pragma)
		require.Equal(t, tt.writer, got, "writer %s", tt.pragma)
		if tt.reader != nil {
			require.NoError(t, s.r.QueryRowContext(ctx, "PRAGMA "+tt.pragma).Scan(&got), tt.pragma)
			require.Equal(t, tt.reader, got, "reader %s", tt.pragma)
		}
	}
	require.Equal(t, 1, s.w.Stats().MaxOpenConnections)
}
