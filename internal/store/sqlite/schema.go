package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"hxd/internal/runtime/rtstore"
	"hxd/migrations"
)

// migrationsDir is the folder of migrations.SQLite holding the files.
const migrationsDir = "sqlite"

// Schema bookkeeping. schema_migrations belongs to golang-migrate;
// schema_checksums is hxd's own record of what it applied.
const (
	sqlSchemaTables = `SELECT name FROM sqlite_master
WHERE type = 'table' AND name IN ('schema_migrations', 'schema_checksums')`
	sqlSchemaVersion   = `SELECT version, dirty FROM schema_migrations LIMIT 1`
	sqlChecksumsList   = `SELECT version, sha256 FROM schema_checksums ORDER BY version`
	sqlChecksumsCreate = `CREATE TABLE IF NOT EXISTS schema_checksums (
    version INTEGER PRIMARY KEY,
    sha256  TEXT NOT NULL
)`
	sqlChecksumInsert = `INSERT INTO schema_checksums (version, sha256) VALUES (?, ?)
ON CONFLICT (version) DO NOTHING`
)

// schemaState is what a database says about its schema.
type schemaState struct {
	versioned bool            // golang-migrate recorded a version
	version   uint            // the applied version when versioned
	dirty     bool            // a migration failed part-way
	sums      map[uint]string // schema_checksums rows
}

// querier is what reading the schema state needs of *sql.DB.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readSchemaState reads golang-migrate's version and hxd's checksums.
func readSchemaState(ctx context.Context, q querier) (schemaState, error) {
	st := schemaState{sums: make(map[uint]string)}
	rows, err := q.QueryContext(ctx, sqlSchemaTables)
	if err != nil {
		return st, err
	}
	var hasVersions, hasSums bool
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			_ = rows.Close()
			return st, err
		}
		hasVersions = hasVersions || name == "schema_migrations"
		hasSums = hasSums || name == "schema_checksums"
	}
	if err := rows.Close(); err != nil {
		return st, err
	}
	if err := rows.Err(); err != nil {
		return st, err
	}
	if hasVersions {
		var v int64
		err := q.QueryRowContext(ctx, sqlSchemaVersion).Scan(&v, &st.dirty)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return st, err
		case v >= 0:
			st.versioned, st.version = true, uint(v)
		}
	}
	if hasSums {
		rows, err := q.QueryContext(ctx, sqlChecksumsList)
		if err != nil {
			return st, err
		}
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			var v int64
			var sum string
			if err := rows.Scan(&v, &sum); err != nil {
				return st, err
			}
			st.sums[uint(v)] = sum
		}
		if err := rows.Err(); err != nil {
			return st, err
		}
	}
	return st, nil
}

// schemaErr wraps rtstore.ErrSchema with what is wrong and what to do.
func schemaErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", rtstore.ErrSchema, fmt.Sprintf(format, args...))
}

// checkSchema compares st with the embedded migrations. With allowPending,
// a missing or old schema and missing checksums of applied versions are
// acceptable (the caller migrates and records them); everything else is an
// error wrapping rtstore.ErrSchema.
func (s *Store) checkSchema(st schemaState, allowPending bool) error {
	if st.dirty {
		return schemaErr("database %s is dirty at schema version %d: a migration failed part-way; "+
			"restore the file from a backup, or repair the schema by hand and then set "+
			"schema_migrations to the last fully applied version with dirty = 0", s.path, st.version)
	}
	if st.versioned && st.version > s.head {
		return schemaErr("database %s has schema version %d but this hxd knows versions up to %d: "+
			"run the hxd release that migrated it (or a newer one)", s.path, st.version, s.head)
	}
	if st.versioned {
		if _, ok := s.sums[st.version]; !ok {
			return schemaErr("database %s has schema version %d, which is not a migration of this hxd: "+
				"run the hxd release that migrated it", s.path, st.version)
		}
	}
	for _, v := range slices.Sorted(maps.Keys(st.sums)) {
		want, ok := s.sums[v]
		if !ok {
			return schemaErr("database %s records a checksum for migration %d, which this hxd does not have: "+
				"run the hxd release that migrated it", s.path, v)
		}
		if st.sums[v] != want {
			return schemaErr("migration %d changed after it was applied to %s (recorded sha256 %s, this binary has %s): "+
				"run the hxd release that applied it or restore the original migrations/sqlite file; "+
				"never edit an applied migration, add a new one", v, s.path, st.sums[v], want)
		}
	}
	if allowPending {
		return nil
	}
	if !st.versioned {
		return schemaErr("database %s has no schema: run `hxd migrate` or start with --auto-migrate", s.path)
	}
	if st.version < s.head {
		return schemaErr("database %s has schema version %d, this hxd needs %d: run `hxd migrate` or start with --auto-migrate",
			s.path, st.version, s.head)
	}
	for v := range s.sums {
		if _, ok := st.sums[v]; !ok && v <= st.version {
			return schemaErr("no checksum recorded for applied migration %d in %s: run `hxd migrate` to record it",
				v, s.path)
		}
	}
	return nil
}

// prepareSchema validates the schema and, with autoMigrate, applies pending
// migrations and records their checksums. It holds the migration lock
// throughout, so concurrent starts of several processes are safe.
func (s *Store) prepareSchema(ctx context.Context, autoMigrate bool) error {
	sums, err := migrations.Checksums(migrations.SQLite, migrationsDir)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	s.sums = sums
	for v := range sums {
		s.head = max(s.head, v)
	}

	unlock, err := s.lockMigrations(ctx)
	if err != nil {
		return err
	}
	defer unlock()

	// Validate-only start-up reads through a query-only connection, so it
	// changes nothing in the file.
	dsn := readerDSN(s.path)
	if autoMigrate {
		dsn = writerDSN(s.path)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return fmt.Errorf("open schema connection: %w", plain(err))
	}
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(1)

	st, err := readSchemaState(ctx, db)
	if err != nil {
		return s.mapErr(ctx, "read schema version", err)
	}
	if err := s.checkSchema(st, autoMigrate); err != nil {
		return err
	}
	if !autoMigrate {
		return nil
	}
	if !st.versioned || st.version < s.head {
		if err := s.migrateUp(ctx); err != nil {
			return err
		}
		if st, err = readSchemaState(ctx, db); err != nil {
			return s.mapErr(ctx, "read schema version", err)
		}
	}
	if _, err := db.ExecContext(ctx, sqlChecksumsCreate); err != nil {
		return s.mapErr(ctx, "create schema_checksums", err)
	}
	for v, sum := range s.sums {
		if v > st.version {
			continue
		}
		if _, err := db.ExecContext(ctx, sqlChecksumInsert, int64(v), sum); err != nil {
			return s.mapErr(ctx, "record migration checksum", err)
		}
	}
	if st, err = readSchemaState(ctx, db); err != nil {
		return s.mapErr(ctx, "read schema version", err)
	}
	return s.checkSchema(st, false)
}

// migrateUp applies every pending migration with golang-migrate.
func (s *Store) migrateUp(ctx context.Context) error {
	db, err := sql.Open("sqlite", writerDSN(s.path))
	if err != nil {
		return fmt.Errorf("open migration connection: %w", plain(err))
	}
	db.SetMaxOpenConns(1)
	src, err := iofs.New(migrations.SQLite, migrationsDir)
	if err != nil {
		_ = db.Close()
		return fmt.Errorf("load migrations: %w", plain(err))
	}
	drv, err := migratesqlite.WithInstance(db, &migratesqlite.Config{})
	if err != nil {
		_ = src.Close()
		_ = db.Close()
		return fmt.Errorf("apply migrations: %w", s.mapErr(ctx, "connect", err))
	}
	m, err := migrate.NewWithInstance("iofs", src, "sqlite", drv)
	if err != nil {
		_ = src.Close()
		_ = drv.Close()
		return fmt.Errorf("apply migrations: %w", plain(err))
	}
	m.Log = migrateLogger{s}
	defer func() { _, _ = m.Close() }()

	start := time.Now()
	err = m.Up()
	if errors.Is(err, migrate.ErrNoChange) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("apply migrations to %s: %w: %w (the schema may now be dirty; see the error of the next start)",
			s.path, rtstore.ErrSchema, plain(err))
	}
	v, _, _ := m.Version()
	s.logger.InfoContext(ctx, "applied migrations", "path", s.path, "version", v, "duration", time.Since(start))
	return nil
}

// migrateLogger routes golang-migrate's logs to slog.
type migrateLogger struct{ s *Store }

// Printf implements migrate.Logger.
func (l migrateLogger) Printf(format string, v ...any) {
	l.s.logger.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "path", l.s.path)
}

// Verbose implements migrate.Logger.
func (l migrateLogger) Verbose() bool { return false }
