package postgres_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/postgres"
)

// defaultTestURL is the PostgreSQL the tests use unless
// HXD_TEST_DATABASE_URL names another (DEVELOPERS.md).
const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	reachOnce sync.Once
	reachErr  error
)

// testURL returns the test database URL. When the database cannot be
// reached the test is skipped, or fails under CI=true.
func testURL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv("HXD_TEST_DATABASE_URL")
	if url == "" {
		url = defaultTestURL
	}
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Close(ctx)
	})
	if reachErr != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("PostgreSQL at HXD_TEST_DATABASE_URL is unreachable (required under CI=true): %v", reachErr)
		}
		tb.Skipf("PostgreSQL unreachable (set HXD_TEST_DATABASE_URL): %v", reachErr)
	}
	return url
}

// adminConn connects to the test database outside any store, with
// search_path set to schema when not empty. The caller closes it.
func adminConn(tb testing.TB, ctx context.Context, schema string) *pgx.Conn {
	tb.Helper()
	cfg, err := pgx.ParseConfig(testURL(tb))
	require.NoError(tb, err)
	if schema != "" {
		cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(tb, err)
	return conn
}

// adminExec runs SQL on schema outside any store.
func adminExec(tb testing.TB, ctx context.Context, schema, sql string, args ...any) error {
	tb.Helper()
	conn := adminConn(tb, ctx, schema)
	defer func() { _ = conn.Close(context.Background()) }()
	_, err := conn.Exec(ctx, sql, args...)
	return err
}

// adminQueryRow scans one row of SQL run on schema outside any store.
func adminQueryRow(tb testing.TB, ctx context.Context, schema, sql string, dest ...any) {
	tb.Helper()
	conn := adminConn(tb, ctx, schema)
	defer func() { _ = conn.Close(context.Background()) }()
	require.NoError(tb, conn.QueryRow(ctx, sql).Scan(dest...))
}

// newSchemaName returns a fresh schema name with quotes, spaces and the
// characters that trip URL and format handling, and drops the schema at
// cleanup.
func newSchemaName(tb testing.TB, prefix string) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	dropSchemaAtCleanup(tb, name)
	return name
}

// dropSchemaAtCleanup drops the schema (if any) when the test ends.
func dropSchemaAtCleanup(tb testing.TB, name string) {
	tb.Helper()
	testURL(tb)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adminExec(tb, ctx, "", "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %q: %v", name, err)
		}
	})
}

// testCtx is a context that ends with the test.
func testCtx(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// testConfig is a store configuration on a fresh schema.
func testConfig(tb testing.TB) postgres.Config {
	tb.Helper()
	return postgres.Config{
		URL:         testURL(tb),
		Schema:      newSchemaName(tb, `hxd test "`),
		AutoMigrate: true,
		PoolSize:    4,
		Logger:      hxtest.Logger(tb),
	}
}

// openStore opens cfg and closes the store at cleanup.
func openStore(tb testing.TB, cfg postgres.Config) *postgres.Store {
	tb.Helper()
	st, err := postgres.Open(testCtx(tb), cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, st.Close()) })
	return st
}

// testBundle is a store on its own schema.
type testBundle struct {
	store *postgres.Store
	cfg   postgres.Config
	tb    testing.TB // the test the bundle belongs to
}

// ctx is the context of the bundle's test, which ends with it.
func (b *testBundle) ctx() context.Context { return b.tb.Context() }

func setup(t *testing.T) *testBundle {
	t.Helper()
	cfg := testConfig(t)
	return &testBundle{store: openStore(t, cfg), cfg: cfg, tb: t}
}

// exec runs SQL on the bundle's schema outside the store.
func (b *testBundle) exec(t *testing.T, sql string, args ...any) error {
	t.Helper()
	return adminExec(t, b.ctx(), b.cfg.Schema, sql, args...)
}

// queryRow scans one row of SQL run on the bundle's schema.
func (b *testBundle) queryRow(t *testing.T, sql string, dest ...any) {
	t.Helper()
	adminQueryRow(t, b.ctx(), b.cfg.Schema, sql, dest...)
}

// newSession inserts a session.
func (b *testBundle) newSession(t *testing.T) *rtstore.SessionRow {
	t.Helper()
	s := &rtstore.SessionRow{ID: "ses-" + uuid.NewString(), Principal: "alice"}
	require.NoError(t, b.store.SessionInsert(b.ctx(), s))
	return s
}

// leasedRun creates a session, takes its lease and starts a run under it.
func (b *testBundle) leasedRun(t *testing.T) (*rtstore.SessionRow, rtstore.Lease, *rtstore.RunRow) {
	t.Helper()
	s := b.newSession(t)
	l, err := b.store.SessionLock(b.ctx(), s.ID)
	require.NoError(t, err)
	return s, l, b.newRun(t, s.ID, l)
}

// record builds a journal record of a run.
func record(sessionID, runID string, kind journal.Kind, payload string) journal.Record {
	return journal.Record{
		Version: 1, ID: uuid.NewString(), Kind: kind, RecordedAt: journal.Timestamp(time.Now()),
		SessionID: sessionID, RunID: runID, StepID: "1", AttemptID: "1", Payload: json.RawMessage(payload),
	}
}

// event builds a pending event with its record.
func event(sessionID, runID, typ string) rtstore.PendingEvent {
	r := record(sessionID, runID, journal.KindEvent, "")
	r.Payload = nil
	return rtstore.PendingEvent{
		Event: rtstore.RunEvent{Type: typ, Data: json.RawMessage(`{}`), SessionID: sessionID, RunID: runID,
			StepID: "1", AttemptID: "1", EventID: "evt-" + uuid.NewString()},
		Record: &r,
	}
}

// newRun inserts a running run of the session, fenced by l when not nil.
func (b *testBundle) newRun(t *testing.T, sessionID string, l rtstore.Lease) *rtstore.RunRow {
	t.Helper()
	runID := "run-" + uuid.NewString()
	run, created, err := b.store.RunInsert(b.ctx(), &rtstore.RunInsertParams{
		Run: rtstore.RunRow{ID: runID, SessionID: sessionID, RequestID: "req-" + uuid.NewString(), MessageDigest: "d",
			Phase: "start", State: json.RawMessage(`{}`)},
		Commit: &rtstore.Commit{SessionID: sessionID, RunID: runID, Lease: l, Status: rtstore.StatusRunning,
			Phase: "prepare_model", State: json.RawMessage(`{"iterations":0}`),
			Records: []journal.Record{record(sessionID, runID, journal.KindRunStarted, `{}`)}},
	})
	require.NoError(t, err)
	require.True(t, created)
	return run
}

// digest is the artifact id of s.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
