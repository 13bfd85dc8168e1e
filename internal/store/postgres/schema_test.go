package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/postgres"
	"hxd/migrations"
)

// schemaObjects lists the relations and functions of a schema, sorted ("r:name", "f:name").
func schemaObjects(t *testing.T, ctx context.Context, schema string) []string {
	t.Helper()
	conn := adminConn(t, ctx, "")
	defer func() { _ = conn.Close(context.Background()) }()
	rows, err := conn.Query(ctx, `SELECT 'r:' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1
UNION ALL
SELECT 'f:' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1`, schema)
	require.NoError(t, err)
	objs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	slices.Sort(objs)
	return objs
}

// schemaExists reports whether the schema exists.
func schemaExists(t *testing.T, ctx context.Context, schema string) bool {
	t.Helper()
	var ok bool
	adminQueryRow(t, ctx, "", "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = '"+strings.ReplaceAll(schema, "'", "''")+"')", &ok)
	return ok
}

func TestSameVersionsAsSQLite(t *testing.T) {
	t.Parallel()
	pg, err := migrations.Checksums(migrations.Postgres, "postgres")
	require.NoError(t, err)
	lite, err := migrations.Checksums(migrations.SQLite, "sqlite")
	require.NoError(t, err)
	require.NotEmpty(t, pg)
	require.Equal(t, slices.Sorted(maps.Keys(lite)), slices.Sorted(maps.Keys(pg)))
	for _, dir := range []string{"postgres", "sqlite"} {
		fsys := migrations.Postgres
		if dir == "sqlite" {
			fsys = migrations.SQLite
		}
		ups, err := fs.Glob(fsys, dir+"/*.up.sql")
		require.NoError(t, err)
		downs, err := fs.Glob(fsys, dir+"/*.down.sql")
		require.NoError(t, err)
		require.Len(t, downs, len(ups), "every up file of %s has a down file", dir)
	}
}

func TestMigrationLockKey(t *testing.T) {
	t.Parallel()
	// REFERENCE §4.7 (py-probe).
	require.Equal(t, int64(7042081983987722100), postgres.MigrationLockKey("harness_x"))
}

func TestFreshProvision(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t)
	require.False(t, schemaExists(t, ctx, cfg.Schema))
	st := openStore(t, cfg)
	require.NoError(t, st.Ping(ctx))
	require.Equal(t, cfg.Schema, st.Schema())

	objs := schemaObjects(t, ctx, cfg.Schema)
	for _, want := range []string{
		"r:sessions", "r:runs", "r:steps", "r:approvals", "r:tool_outcomes", "r:events", "r:snapshots",
		"r:artifacts", "r:artifact_refs", "r:journal", "r:schema_migrations", "r:schema_checksums",
		"f:hxd_append_only", "f:hxd_commit",
	} {
		require.Contains(t, objs, want)
	}
	sums, err := migrations.Checksums(migrations.Postgres, "postgres")
	require.NoError(t, err)
	var (
		version int64
		dirty   bool
		sum     string
	)
	adminQueryRow(t, ctx, cfg.Schema, `SELECT version, dirty FROM schema_migrations`, &version, &dirty)
	require.Equal(t, int64(headVersion(t)), version)
	require.False(t, dirty)
	adminQueryRow(t, ctx, cfg.Schema, `SELECT sha256 FROM schema_checksums WHERE version = 1`, &sum)
	require.Equal(t, sums[1], sum)

	// Nothing lands outside the schema.
	var n int
	adminQueryRow(t, ctx, "", `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relname IN ('sessions', 'runs', 'journal', 'schema_migrations', 'schema_checksums')`, &n)
	require.Zero(t, n)
}

func TestRestartIsNoop(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t)
	b := &testBundle{store: openStore(t, cfg), cfg: cfg, tb: t}
	s := b.newSession(t)
	run := b.newRun(t, s.ID, nil)

	// xmin changes when a row is rewritten.
	var verXmin, sumXmin string
	b.queryRow(t, `SELECT xmin::text FROM schema_migrations`, &verXmin)
	b.queryRow(t, `SELECT string_agg(xmin::text, ',') FROM schema_checksums`, &sumXmin)
	before := schemaObjects(t, ctx, cfg.Schema)

	for _, auto := range []bool{true, false} {
		cfg.AutoMigrate = auto
		st, err := postgres.Open(ctx, cfg)
		require.NoError(t, err)
		got, err := st.RunGet(ctx, run.ID)
		require.NoError(t, err)
		require.Equal(t, run.ID, got.ID)
		require.NoError(t, st.Close())
	}
	require.NoError(t, postgres.Migrate(ctx, cfg))

	var verXmin2, sumXmin2 string
	b.queryRow(t, `SELECT xmin::text FROM schema_migrations`, &verXmin2)
	b.queryRow(t, `SELECT string_agg(xmin::text, ',') FROM schema_checksums`, &sumXmin2)
	require.Equal(t, verXmin, verXmin2)
	require.Equal(t, sumXmin, sumXmin2)
	require.Equal(t, before, schemaObjects(t, ctx, cfg.Schema))
}

func TestSchemaRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tamper  string
		message string
	}{
		{"ChecksumChanged", `UPDATE schema_checksums SET sha256 = 'deadbeef' WHERE version = 1`, "changed after it was applied"},
		{"ChecksumUnknown", `INSERT INTO schema_checksums (version, sha256) VALUES (9999, 'x')`, "does not have"},
		{"Dirty", `UPDATE schema_migrations SET dirty = true`, "dirty"},
		{"NewerVersion", `UPDATE schema_migrations SET version = 9999`, "knows versions up to"},
		{"ChecksumMissing", `DELETE FROM schema_checksums`, "no checksum recorded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			require.NoError(t, b.exec(t, tt.tamper))

			// A running store notices at Ping.
			err := b.store.Ping(b.ctx())
			require.ErrorIs(t, err, rtstore.ErrSchema)
			require.Contains(t, err.Error(), tt.message)

			cfg := b.cfg
			cfg.AutoMigrate = false
			_, err = postgres.Open(b.ctx(), cfg)
			require.ErrorIs(t, err, rtstore.ErrSchema)
			require.Contains(t, err.Error(), tt.message)
			if tt.name == "ChecksumMissing" {
				// Auto-migrate (and hxd migrate) record missing checksums.
				require.NoError(t, postgres.Migrate(b.ctx(), cfg))
				require.NoError(t, b.store.Ping(b.ctx()))
				return
			}
			cfg.AutoMigrate = true
			_, err = postgres.Open(b.ctx(), cfg)
			require.ErrorIs(t, err, rtstore.ErrSchema)
			require.Contains(t, err.Error(), tt.message)
			err = postgres.Migrate(b.ctx(), cfg)
			require.ErrorIs(t, err, rtstore.ErrSchema)
			require.Contains(t, err.Error(), tt.message)
		})
	}
}

func TestDirtyMessageSaysWhatToDo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	schema := pgx.Identifier{b.cfg.Schema}.Sanitize()
	require.NoError(t, b.exec(t, `UPDATE schema_migrations SET dirty = true`))
	err := b.store.Ping(b.ctx())
	require.ErrorIs(t, err, rtstore.ErrSchema)
	require.Contains(t, err.Error(), fmt.Sprintf("UPDATE %s.schema_migrations SET version = %d, dirty = false", schema, headVersion(t)-1))
	require.Contains(t, err.Error(), "hxd migrate")

	// Dirty at the first version: nothing was applied before it.
	require.NoError(t, b.exec(t, `UPDATE schema_migrations SET version = 1`))
	err = b.store.Ping(b.ctx())
	require.ErrorIs(t, err, rtstore.ErrSchema)
	require.Contains(t, err.Error(), "DELETE FROM "+schema+".schema_migrations")
}

func TestValidateOnlyLeavesEmptySchemaAlone(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t)
	cfg.AutoMigrate = false

	// No schema at all: refused, nothing created.
	_, err := postgres.Open(ctx, cfg)
	require.ErrorIs(t, err, rtstore.ErrSchema)
	require.Contains(t, err.Error(), "hxd migrate")
	require.False(t, schemaExists(t, ctx, cfg.Schema), "validate-only creates no schema")

	// An empty schema (created by an administrator): refused, left empty,
	// not even golang-migrate's version table.
	require.NoError(t, adminExec(t, ctx, "", "CREATE SCHEMA "+pgx.Identifier{cfg.Schema}.Sanitize()))
	_, err = postgres.Open(ctx, cfg)
	require.ErrorIs(t, err, rtstore.ErrSchema)
	require.Contains(t, err.Error(), "no hxd tables")
	require.Empty(t, schemaObjects(t, ctx, cfg.Schema))

	// hxd migrate provisions the existing schema; then validate-only opens.
	require.NoError(t, postgres.Migrate(ctx, cfg))
	openStore(t, cfg)
}

// headVersion is the newest embedded migration's version.
func headVersion(t *testing.T) int {
	t.Helper()
	sums, err := migrations.Checksums(migrations.Postgres, "postgres")
	require.NoError(t, err)
	return int(slices.Max(slices.Collect(maps.Keys(sums))))
}

// upgradeFS is the embedded migrations plus the next version.
func upgradeFS(t *testing.T) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	entries, err := fs.ReadDir(migrations.Postgres, "postgres")
	require.NoError(t, err)
	for _, e := range entries {
		data, err := fs.ReadFile(migrations.Postgres, "postgres/"+e.Name())
		require.NoError(t, err)
		fsys["postgres/"+e.Name()] = &fstest.MapFile{Data: data}
	}
	next := fmt.Sprintf("postgres/%04d_test_upgrade", headVersion(t)+1)
	fsys[next+".up.sql"] = &fstest.MapFile{Data: []byte(
		"CREATE TABLE upgrade_marker (id int PRIMARY KEY);\nALTER TABLE sessions ADD COLUMN upgrade_note text;\n")}
	fsys[next+".down.sql"] = &fstest.MapFile{Data: []byte(
		"ALTER TABLE sessions DROP COLUMN upgrade_note;\nDROP TABLE upgrade_marker;\n")}
	return fsys
}

func TestValidateOnlyRefusesOldSchema(t *testing.T) {
	t.Parallel()
	b := setup(t) // the embedded head
	head := headVersion(t)
	s := b.newSession(t)
	require.NoError(t, b.store.Close())

	// A binary that knows the next version refuses to start validate-only and
	// changes nothing.
	cfg := b.cfg
	cfg.AutoMigrate = false
	before := schemaObjects(t, b.ctx(), cfg.Schema)
	_, err := postgres.OpenWithMigrations(b.ctx(), cfg, upgradeFS(t))
	require.ErrorIs(t, err, rtstore.ErrSchema)
	require.Contains(t, err.Error(), fmt.Sprintf("has version %d, this hxd needs %d", head, head+1))
	require.Contains(t, err.Error(), "hxd migrate")
	require.Equal(t, before, schemaObjects(t, b.ctx(), cfg.Schema))

	// hxd migrate upgrades it; existing sessions survive.
	require.NoError(t, postgres.MigrateWithMigrations(b.ctx(), cfg, upgradeFS(t)))
	st, err := postgres.OpenWithMigrations(b.ctx(), cfg, upgradeFS(t))
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()
	got, err := st.SessionGet(b.ctx(), s.ID)
	require.NoError(t, err)
	require.Equal(t, s.ID, got.ID)
	var n int
	b.queryRow(t, `SELECT count(*) FROM schema_checksums`, &n)
	require.Equal(t, head+1, n)

	// The binary that only knows the embedded versions now refuses: the
	// schema is newer.
	_, err = postgres.Open(b.ctx(), cfg)
	require.ErrorIs(t, err, rtstore.ErrSchema)
	require.Contains(t, err.Error(), fmt.Sprintf("knows versions up to %d", head))
}

func TestConcurrentProvisioning(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t)
	cfg.PoolSize = 2
	const n = 4
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = postgres.Open(ctx, cfg)
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "store %d", i)
	}
	for i := range n {
		require.NoError(t, stores[i].Ping(ctx))
	}
	// They share one database: a lease of one excludes the others.
	b := &testBundle{store: stores[0], cfg: cfg, tb: t}
	s := b.newSession(t)
	l, err := stores[0].SessionLock(ctx, s.ID)
	require.NoError(t, err)
	_, err = stores[1].SessionLock(ctx, s.ID)
	require.ErrorIs(t, err, rtstore.ErrSessionBusy)
	require.NoError(t, l.Release(ctx))
	for i := range n {
		require.NoError(t, stores[i].Close())
	}
	var version int64
	adminQueryRow(t, ctx, cfg.Schema, `SELECT version FROM schema_migrations`, &version)
	require.Equal(t, int64(headVersion(t)), version)
}

func TestForeignTablesRefused(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t)
	schema := pgx.Identifier{cfg.Schema}.Sanitize()
	require.NoError(t, adminExec(t, ctx, "", "CREATE SCHEMA "+schema))
	require.NoError(t, adminExec(t, ctx, "", "CREATE TABLE "+schema+".sessions (x int)"))
	_, err := postgres.Open(ctx, cfg)
	require.ErrorIs(t, err, rtstore.ErrSchema)
	require.Contains(t, err.Error(), "did not provision (sessions)")
	require.Equal(t, []string{"r:sessions"}, schemaObjects(t, ctx, cfg.Schema), "nothing adopted or added")
}

func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t)
	m, _ := newMigrator(t, ctx, cfg)
	require.NoError(t, m.Up())
	require.NoError(t, m.Down())
	require.Equal(t, []string{"r:schema_migrations", "r:schema_migrations_pkey"}, schemaObjects(t, ctx, cfg.Schema),
		"down leaves no object behind")
	require.NoError(t, m.Up())
	srcErr, dbErr := m.Close()
	require.NoError(t, srcErr)
	require.NoError(t, dbErr)

	// The migrated schema opens (checksums are recorded on first migrate).
	cfg.AutoMigrate = false
	_, err := postgres.Open(ctx, cfg)
	require.ErrorIs(t, err, rtstore.ErrSchema)
	require.Contains(t, err.Error(), "no checksum recorded")
	require.NoError(t, postgres.Migrate(ctx, cfg))
	openStore(t, cfg)
}

func TestQuotedSchema(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t)
	cfg.Schema = newSchemaName(t, `harness "x"?% `)
	b := &testBundle{store: openStore(t, cfg), cfg: cfg, tb: t}
	require.True(t, schemaExists(t, ctx, cfg.Schema), "schema named exactly %q", cfg.Schema)

	s := b.newSession(t)
	run := b.newRun(t, s.ID, nil)
	c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusCompleted, Phase: "result",
		Events: []rtstore.PendingEvent{event(s.ID, run.ID, "run_result")}}
	require.NoError(t, b.store.Commit(ctx, c))
	var n int
	b.queryRow(t, `SELECT count(*) FROM journal`, &n)
	require.Equal(t, 2, n)
	require.NoError(t, b.store.Ping(ctx))

	// Validate-only finds it too.
	cfg.AutoMigrate = false
	openStore(t, cfg)
}

func TestConfigRefused(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for name, cfg := range map[string]postgres.Config{
		"no url":          {},
		"long schema":     {URL: defaultTestURL, Schema: strings.Repeat("s", 64)},
		"nul in schema":   {URL: defaultTestURL, Schema: "a\x00b"},
		"bad utf8":        {URL: defaultTestURL, Schema: "a\xffb"},
		"negative pool":   {URL: defaultTestURL, PoolSize: -1},
		"negative lease":  {URL: defaultTestURL, LeaseDuration: -1},
		"negative groups": {URL: defaultTestURL, CommitGroups: -1},
	} {
		_, err := postgres.Open(ctx, cfg)
		require.Error(t, err, name)
	}
	// 63 bytes is the limit.
	_, err := postgres.Open(ctx, postgres.Config{URL: "postgres://127.0.0.1:1/x?connect_timeout=1", Schema: strings.Repeat("é", 31) + "s"})
	require.ErrorIs(t, err, rtstore.ErrUnavailable)
}

func TestPasswordNeverEchoed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const secret = "s3cr3t-Pa55w0rd"
	for _, url := range []string{
		"postgres://hxd:" + secret + "@127.0.0.1:1/test?sslmode=disable&connect_timeout=2",
		"host=127.0.0.1 port=1 user=hxd password=" + secret + " dbname=test sslmode=disable connect_timeout=2",
		"host=127.0.0.1 port=1 user=hxd password='" + secret + "' dbname=test connect_timeout=2",
		"postgres://hxd:" + secret + "@127.0.0.1:notaport/test",
		"postgres://hxd:" + secret + "@127.0.0.1:1/test?sslmode=bogus",
	} {
		_, err := postgres.Open(ctx, postgres.Config{URL: url})
		require.Error(t, err, url)
		require.NotContains(t, err.Error(), secret, url)
		err = postgres.Migrate(ctx, postgres.Config{URL: url})
		require.Error(t, err, url)
		require.NotContains(t, err.Error(), secret, url)
	}
	_, err := postgres.Open(ctx, postgres.Config{URL: "postgres://hxd:" + secret + "@127.0.0.1:1/test?connect_timeout=2"})
	require.ErrorIs(t, err, rtstore.ErrUnavailable)

	// A wrong password against the real server: refused, not echoed.
	url := strings.Replace(testURL(t), "postgres://postgres@", "postgres://nosuchrole:"+secret+"@", 1)
	if url != testURL(t) {
		_, err = postgres.Open(ctx, postgres.Config{URL: url})
		require.Error(t, err)
		require.NotContains(t, err.Error(), secret)
	}
}

func TestAppendOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.newSession(t)
	run := b.newRun(t, s.ID, nil)
	c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Status: rtstore.StatusRunning, Phase: "model",
		Events: []rtstore.PendingEvent{event(s.ID, run.ID, "text_delta")}}
	require.NoError(t, b.store.Commit(b.ctx(), c))
	require.NoError(t, b.store.ArtifactPut(b.ctx(), s.ID, digest("blob"), []byte("blob")))
	for _, q := range []string{
		`UPDATE journal SET seq = seq + 100`,
		`DELETE FROM journal`,
		`TRUNCATE journal`,
		`UPDATE events SET payload = '{}'`,
		`DELETE FROM events`,
		`TRUNCATE events`,
		`UPDATE artifacts SET content = '\x00'`,
		`DELETE FROM artifacts`,
		`TRUNCATE artifacts CASCADE`,
	} {
		err := b.exec(t, q)
		require.Error(t, err, q)
		require.Contains(t, err.Error(), "append-only", q)
	}
	// Even gc (hxd.gc on, migration 0005) never deletes a referenced
	// artifact, and never updates.
	for _, q := range []string{
		`DO $$ BEGIN PERFORM set_config('hxd.gc', 'on', true); DELETE FROM artifacts; END $$`,
		`DO $$ BEGIN PERFORM set_config('hxd.gc', 'on', true); UPDATE journal SET seq = seq + 100; END $$`,
	} {
		require.Error(t, b.exec(t, q), q)
	}
	var n int
	b.queryRow(t, `SELECT (SELECT count(*) FROM journal) + (SELECT count(*) FROM events) + (SELECT count(*) FROM artifacts)`, &n)
	require.Equal(t, 2+1+1, n)
}

// newMigrator creates cfg.Schema and returns golang-migrate on it (with
// the embedded migrations) and its database handle, closed at cleanup:
// for tests that step through migrations one version at a time.
func newMigrator(t *testing.T, ctx context.Context, cfg postgres.Config) (*migrate.Migrate, *sql.DB) {
	t.Helper()
	schema := pgx.Identifier{cfg.Schema}.Sanitize()
	require.NoError(t, adminExec(t, ctx, "", "CREATE SCHEMA "+schema))
	pcfg, err := pgx.ParseConfig(cfg.URL)
	require.NoError(t, err)
	pcfg.RuntimeParams["search_path"] = schema
	db := stdlib.OpenDB(*pcfg)
	t.Cleanup(func() { _ = db.Close() })
	src, err := iofs.New(migrations.Postgres, "postgres")
	require.NoError(t, err)
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{SchemaName: cfg.Schema})
	require.NoError(t, err)
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	require.NoError(t, err)
	return m, db
}
