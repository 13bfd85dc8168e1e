package postgres_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/store/postgres"
)

// TestMigration0004EventCreatedAt: events stored before version 4 get
// their run's created_at, events stay append-only after the upgrade, and
// a new event gets the column's default.
func TestMigration0004EventCreatedAt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t)
	m, db := newMigrator(t, ctx, cfg)
	require.NoError(t, m.Migrate(3))

	created := time.Date(2025, 11, 30, 8, 9, 10, 123456000, time.UTC)
	for _, q := range []string{
		`INSERT INTO sessions (id, principal, created_at) VALUES ('ses-1', 'alice', '2025-11-30T08:00:00Z')`,
		`INSERT INTO runs (id, session_id, request_id, message_digest, status, phase, payload, created_at, updated_at)
		 VALUES ('run-1', 'ses-1', 'req-1', 'd', 'completed', 'result', '{}', '` + created.Format(time.RFC3339Nano) + `', '2025-11-30T09:00:00Z')`,
		`INSERT INTO events (run_id, seq, event_id, payload) VALUES ('run-1', 1, 'ev-1',
		  '{"type":"text_delta","data":"a","session_id":"ses-1","run_id":"run-1","step_id":"1","attempt_id":"1","event_id":"ev-1","cursor":"1"}')`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	require.NoError(t, m.Migrate(4))

	_, err := db.ExecContext(ctx, `UPDATE events SET created_at = now()`)
	require.ErrorContains(t, err, "events are append-only", "the guard is back")
	before := time.Now().UTC().Truncate(time.Microsecond)
	_, err = db.ExecContext(ctx, `INSERT INTO events (run_id, seq, event_id, payload) VALUES ('run-1', 2, 'ev-2',
		'{"type":"text_delta","data":"b","session_id":"ses-1","run_id":"run-1","step_id":"1","attempt_id":"1","event_id":"ev-2","cursor":"2"}')`)
	require.NoError(t, err)
	after := time.Now().UTC()
	srcErr, dbErr := m.Close()
	require.NoError(t, srcErr)
	require.NoError(t, dbErr)

	require.NoError(t, postgres.Migrate(ctx, cfg))
	cfg.AutoMigrate = false
	st := openStore(t, cfg)
	evs, err := st.EventListAfter(ctx, "run-1", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, created, evs[0].CreatedAt)
	require.False(t, evs[1].CreatedAt.Before(before), "default now(): %s before %s", evs[1].CreatedAt, before)
	require.False(t, evs[1].CreatedAt.After(after), "default now(): %s after %s", evs[1].CreatedAt, after)
}
