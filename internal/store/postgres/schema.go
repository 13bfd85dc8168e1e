package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
	"hxd/migrations"
)

// migrationsDir is the folder of migrations.Postgres holding the files.
const migrationsDir = "postgres"

// versionTable is golang-migrate's version table (in the schema).
const versionTable = "schema_migrations"

// Schema bookkeeping. schema_migrations belongs to golang-migrate;
// schema_checksums is hxd's own record of what it applied. Both live in the
// configured schema; unqualified names resolve through search_path.
const (
	// sqlSchemaObjects lists the schema's tables by name from the catalog
	// (information_schema would hide tables the role may not read).
	sqlSchemaObjects = `SELECT c.relname FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')`
	sqlSchemaExists    = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)`
	sqlSchemaVersion   = `SELECT version, dirty FROM schema_migrations LIMIT 1`
	sqlChecksumsList   = `SELECT version, sha256 FROM schema_checksums ORDER BY version`
	sqlChecksumsCreate = `CREATE TABLE IF NOT EXISTS schema_checksums (
    version bigint PRIMARY KEY,
    sha256  text   NOT NULL
)`
	sqlChecksumInsert = `INSERT INTO schema_checksums (version, sha256) VALUES ($1, $2)
ON CONFLICT (version) DO NOTHING`
	sqlAdvisoryLock   = `SELECT pg_advisory_lock($1)`
	sqlAdvisoryUnlock = `SELECT pg_advisory_unlock($1)`
)

// ownTables are the tables migrations create: a schema holding one of them
// without golang-migrate's version table was not provisioned by hxd, and
// hxd refuses to adopt it.
var ownTables = []string{
	"sessions", "runs", "steps", "approvals", "tool_outcomes", "events",
	"snapshots", "artifacts", "artifact_refs", "journal",
}

// migrationLockKey is the advisory lock that serialises schema checks and
// migrations of one schema across processes (REFERENCE §4.7): the first 8
// bytes of SHA-256("harness_x:migrations:" + schema) as a signed big-endian
// int64.
func migrationLockKey(schema string) int64 {
	sum := sha256.Sum256([]byte("harness_x:migrations:" + schema))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// migrationSet is a set of migration files: the embedded ones, or a test's.
type migrationSet struct {
	storekit.Migrations       // checksums of the up files by version, highest version
	fsys                fs.FS // holds the files under migrationsDir
}

// embedded is the set compiled into the binary.
var embedded = sync.OnceValues(func() (*migrationSet, error) {
	return loadMigrations(migrations.Postgres)
})

// loadMigrations reads the checksums of the migration files in fsys.
func loadMigrations(fsys fs.FS) (*migrationSet, error) {
	sums, err := migrations.Checksums(fsys, migrationsDir)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return &migrationSet{Migrations: storekit.NewMigrations(sums), fsys: fsys}, nil
}

// schemaState is what a database says about the schema.
type schemaState struct {
	storekit.SchemaState
	exists  bool     // the schema exists
	tables  []string // its tables (and views), sorted
	hasSums bool     // schema_checksums exists
}

// has reports whether the schema holds a table of that name.
func (st *schemaState) has(table string) bool {
	_, ok := slices.BinarySearch(st.tables, table)
	return ok
}

// readSchemaState reads the schema's tables, golang-migrate's version and
// hxd's checksums. conn's search_path must be the schema. It changes
// nothing.
func readSchemaState(ctx context.Context, conn *pgx.Conn, schema string) (schemaState, error) {
	st := schemaState{SchemaState: storekit.SchemaState{Sums: make(map[uint]string)}}
	if err := conn.QueryRow(ctx, sqlSchemaExists, schema).Scan(&st.exists); err != nil {
		return st, err
	}
	if !st.exists {
		return st, nil
	}
	rows, err := conn.Query(ctx, sqlSchemaObjects, schema)
	if err != nil {
		return st, err
	}
	st.tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return st, err
	}
	slices.Sort(st.tables)
	if st.has(versionTable) {
		var v int64
		err := conn.QueryRow(ctx, sqlSchemaVersion).Scan(&v, &st.Dirty)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return st, err
		case v >= 0:
			st.Versioned, st.Version = true, uint(v)
		}
	}
	if st.has("schema_checksums") {
		st.hasSums = true
		rows, err := conn.Query(ctx, sqlChecksumsList)
		if err != nil {
			return st, err
		}
		var v int64
		var sum string
		_, err = pgx.ForEachRow(rows, []any{&v, &sum}, func() error {
			st.Sums[uint(v)] = sum
			return nil
		})
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// schemaErr wraps rtstore.ErrSchema with what is wrong and what to do.
func schemaErr(format string, args ...any) error { return storekit.SchemaErr(format, args...) }

// checkSchema compares st with the Store's migrations
// (storekit.CheckSchema); a schema holding tables of hxd's without
// golang-migrate's version table was not provisioned by hxd and is refused.
func (s *Store) checkSchema(st schemaState, allowPending bool) error {
	name := quoteIdent(s.schema)
	return storekit.CheckSchema(st.SchemaState, s.migrations.Migrations, allowPending, storekit.SchemaTarget{
		Name:        "schema " + name,
		VersionNoun: "version",
		Files:       "migrations/" + migrationsDir,
		Missing:     "no hxd tables",
		Dirty: func(version uint) error {
			prev := "DELETE FROM " + name + ".schema_migrations"
			if version > 1 {
				prev = fmt.Sprintf("UPDATE %s.schema_migrations SET version = %d, dirty = false", name, version-1)
			}
			return schemaErr("schema %s is dirty at version %d: migration %d failed; PostgreSQL rolled the file back, "+
				"so the schema is still at the version before it. Fix the cause reported when it failed, run `%s`, "+
				"then run `hxd migrate` again", name, version, version, prev)
		},
		Unversioned: func() error {
			var foreign []string
			for _, t := range ownTables {
				if st.has(t) {
					foreign = append(foreign, t)
				}
			}
			if len(foreign) > 0 {
				return schemaErr("schema %s holds tables hxd did not provision (%s) and no %s: "+
					"point --schema at a new or empty schema", name, strings.Join(foreign, ", "), versionTable)
			}
			return nil
		},
	})
}

// prepareSchema validates the schema and, with autoMigrate, creates it when
// missing, applies pending migrations and records their checksums. It holds
// the schema's advisory lock throughout, on a connection of its own, so
// concurrent starts of many processes are safe. Without autoMigrate it
// changes nothing: golang-migrate, whose driver creates its version table on
// connect, is never handed a connection.
func (s *Store) prepareSchema(ctx context.Context, autoMigrate bool) error {
	conn, err := pgx.ConnectConfig(ctx, s.connCfg.Copy())
	if err != nil {
		return s.mapErr(ctx, "connect", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx) // ends the session: the advisory lock goes with it
	}()

	// Journal payloads must come back byte for byte: only a UTF8 database
	// stores every string hxd writes unchanged.
	if enc := conn.PgConn().ParameterStatus("server_encoding"); enc != "UTF8" {
		return schemaErr("database encoding is %s: hxd needs a UTF8 database (CREATE DATABASE … ENCODING 'UTF8')", enc)
	}

	key := migrationLockKey(s.schema)
	if _, err := conn.Exec(ctx, sqlAdvisoryLock, key); err != nil {
		return s.mapErr(ctx, "take migration lock", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(cctx, sqlAdvisoryUnlock, key)
	}()

	st, err := readSchemaState(ctx, conn, s.schema)
	if err != nil {
		return s.mapErr(ctx, "read schema version", err)
	}
	if err := s.checkSchema(st, autoMigrate); err != nil {
		return err
	}
	if !autoMigrate {
		return nil
	}

	if !st.exists {
		// Only when missing: CREATE SCHEMA IF NOT EXISTS needs the CREATE
		// privilege on the database even when the schema exists.
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+quoteIdent(s.schema)); err != nil {
			return s.provisionErr(ctx, "create schema", err)
		}
		s.logger.InfoContext(ctx, "created schema")
	}
	if !st.Versioned || st.Version < s.migrations.Head {
		if err := s.migrateUp(ctx); err != nil {
			return err
		}
		if st, err = readSchemaState(ctx, conn, s.schema); err != nil {
			return s.mapErr(ctx, "read schema version", err)
		}
	}
	if !st.hasSums {
		if _, err := conn.Exec(ctx, sqlChecksumsCreate); err != nil {
			return s.provisionErr(ctx, "create schema_checksums", err)
		}
	}
	for v, sum := range s.migrations.Sums {
		if _, ok := st.Sums[v]; ok || v > st.Version {
			continue
		}
		if _, err := conn.Exec(ctx, sqlChecksumInsert, int64(v), sum); err != nil {
			return s.provisionErr(ctx, "record migration checksum", err)
		}
	}
	if st, err = readSchemaState(ctx, conn, s.schema); err != nil {
		return s.mapErr(ctx, "read schema version", err)
	}
	return s.checkSchema(st, false)
}

// provisionErr maps an error of creating objects: missing privileges become
// ErrSchema with what to grant.
func (s *Store) provisionErr(ctx context.Context, op string, err error) error {
	if sqlState(err) == codeInsufficientPriv {
		return fmt.Errorf("%s: %w: insufficient PostgreSQL privileges: %w (grant the role CREATE on the database, "+
			"or have an administrator create schema %s owned by it)", op, rtstore.ErrSchema, s.plain(err), quoteIdent(s.schema))
	}
	return s.mapErr(ctx, op, err)
}

// migrateUp applies every pending migration with golang-migrate over a
// database/sql handle whose connections have search_path set to the
// schema. golang-migrate takes its own advisory lock besides ours.
func (s *Store) migrateUp(ctx context.Context) error {
	db := stdlib.OpenDB(*s.connCfg.Copy())
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(2)
	if err := db.PingContext(ctx); err != nil {
		return s.mapErr(ctx, "open migration connection", err)
	}
	src, err := iofs.New(s.migrations.fsys, migrationsDir)
	if err != nil {
		return fmt.Errorf("load migrations: %w", s.plain(err))
	}
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{
		SchemaName:      s.schema,
		MigrationsTable: versionTable,
	})
	if err != nil {
		_ = src.Close()
		return s.provisionErr(ctx, "apply migrations: connect", unwrapMigrate(err))
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		_ = src.Close()
		_ = drv.Close()
		return fmt.Errorf("apply migrations: %w", s.plain(err))
	}
	m.Log = storekit.MigrateLogger{Logger: s.logger}
	defer func() { _, _ = m.Close() }()

	// golang-migrate takes no context: stop it between files when ctx ends.
	stop := context.AfterFunc(ctx, func() {
		select {
		case m.GracefulStop <- true:
		default:
		}
	})
	defer stop()

	start := time.Now()
	err = m.Up()
	if errors.Is(err, migrate.ErrNoChange) {
		return nil
	}
	if err != nil {
		if sqlState(unwrapMigrate(err)) == codeInsufficientPriv {
			return s.provisionErr(ctx, "apply migrations", unwrapMigrate(err))
		}
		return fmt.Errorf("apply migrations to schema %s: %w: %w (the schema may now be dirty; see the error of the next start)",
			quoteIdent(s.schema), rtstore.ErrSchema, s.plain(errors.New(migrateErrText(err))))
	}
	v, _, _ := m.Version()
	s.logger.InfoContext(ctx, "applied migrations", "version", v, "duration", time.Since(start))
	return nil
}

// unwrapMigrate returns the driver error inside a golang-migrate
// database.Error, else err.
func unwrapMigrate(err error) error {
	var de database.Error
	if errors.As(err, &de) && de.OrigErr != nil {
		return de.OrigErr
	}
	var dp *database.Error
	if errors.As(err, &dp) && dp.OrigErr != nil {
		return dp.OrigErr
	}
	return err
}

// migrateErrText describes a failed migration without the file's text,
// which golang-migrate's errors carry whole.
func migrateErrText(err error) string {
	var de database.Error
	if !errors.As(err, &de) {
		var dp *database.Error
		if !errors.As(err, &dp) {
			return err.Error()
		}
		de = *dp
	}
	msg := de.Err
	if msg == "" {
		msg = "migration failed"
	}
	if de.Line > 0 {
		msg = fmt.Sprintf("%s (line %d)", msg, de.Line)
	}
	if de.OrigErr != nil {
		msg += ": " + de.OrigErr.Error()
	}
	return msg
}
