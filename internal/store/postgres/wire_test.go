package postgres_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"hxd/internal/store/postgres"
)

// TestWireEncoding round-trips the fast path's binary parameters through
// the server: what it reads back is what was sent.
func TestWireEncoding(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg, err := pgx.ParseConfig(testURL(t))
	require.NoError(t, err)
	cfg.RuntimeParams["timezone"] = "UTC"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })

	times := []time.Time{
		time.Date(2026, 11, 29, 19, 45, 1, 123456789, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.FixedZone("x", 3600)),
	}
	row, err := postgres.WireEcho(ctx, conn,
		[]string{"a", `b "c"`, "", "ü\\"},
		[]json.RawMessage{json.RawMessage(`{"k":1}`), nil},
		[]int64{0, -1, 1 << 62},
		times, -42)
	require.NoError(t, err)
	require.Equal(t, []string{
		`{a,"b \"c\"","","ü\\"}`,
		`{"{\"k\":1}",NULL}`,
		`{0,-1,4611686018427387904}`,
		`{"2026-11-29 19:45:01.123456+00","1999-12-31 22:59:59.999999+00"}`,
		`-42`,
	}, row)
	require.Equal(t, byte('I'), conn.PgConn().TxStatus(), "committed")

	_, err = postgres.WireEcho(ctx, conn, nil, nil, nil, nil, 0)
	require.NoError(t, err, "empty arrays")

	// A statement error comes back as the server's and leaves the
	// transaction aborted for the caller to roll back; the connection
	// stays usable.
	_, err = postgres.WireEcho(ctx, conn, nil, nil, nil, []time.Time{time.Date(294300, 1, 1, 0, 0, 0, 0, time.UTC)}, 0)
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "22008", pe.Code, "timestamp out of range")
	require.Equal(t, byte('E'), conn.PgConn().TxStatus())
	_, err = conn.Exec(ctx, "rollback")
	require.NoError(t, err)
	row, err = postgres.WireEcho(ctx, conn, []string{"x"}, nil, nil, nil, 1)
	require.NoError(t, err)
	require.Equal(t, `{x}`, row[0])
}
