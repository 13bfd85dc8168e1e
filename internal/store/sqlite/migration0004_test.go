package sqlite_test

import (
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/stretchr/testify/require"

	"hxd/migrations"
)

// TestMigration0004EventCreatedAt: events stored before version 4 get
// their run's created_at, and events stay append-only after the upgrade.
func TestMigration0004EventCreatedAt(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/m.db"
	db := rawDB(t, path)
	src, err := iofs.New(migrations.SQLite, "sqlite")
	require.NoError(t, err)
	drv, err := migratesqlite.WithInstance(db, &migratesqlite.Config{})
	require.NoError(t, err)
	m, err := migrate.NewWithInstance("iofs", src, "sqlite", drv)
	require.NoError(t, err)
	require.NoError(t, m.Migrate(3))

	const created = "2025-11-30T08:09:10.123456Z"
	for _, q := range []string{
		`INSERT INTO sessions (id, principal, created_at) VALUES ('ses-1', 'alice', '2025-11-30T08:00:00.000000Z')`,
		`INSERT INTO runs (id, session_id, request_id, message_digest, status, phase, payload, created_at, updated_at)
		 VALUES ('run-1', 'ses-1', 'req-1', 'd', 'completed', 'result', '{}', '` + created + `', '2025-11-30T09:00:00.000000Z')`,
		`INSERT INTO events (k, run_id, seq, event_id, payload) VALUES
		 ((SELECT seq FROM runs WHERE id = 'run-1') << 32 | 1, 'run-1', 1, 'ev-1',
		  '{"type":"text_delta","data":"a","session_id":"ses-1","run_id":"run-1","step_id":"1","attempt_id":"1","event_id":"ev-1","cursor":"1"}')`,
		`INSERT INTO ids (id, tag, k) VALUES ('ev-1', 1, (SELECT seq FROM runs WHERE id = 'run-1') << 32 | 1)`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	require.NoError(t, m.Migrate(4))
	srcErr, dbErr := m.Close()
	require.NoError(t, srcErr)
	require.NoError(t, dbErr)

	_, err = rawDB(t, path).Exec(`UPDATE events SET created_at = 'x'`)
	require.ErrorContains(t, err, "events are append-only", "the guard is back")

	st := openAt(t, path)
	evs, err := st.EventListAfter(testCtx(t), "run-1", 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, "ev-1", evs[0].EventID)
	require.Equal(t, time.Date(2025, 11, 30, 8, 9, 10, 123456000, time.UTC), evs[0].CreatedAt)
}
