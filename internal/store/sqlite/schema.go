package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
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

// querier is what reading the schema state needs of *sql.DB.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaTables reports which of the schema's bookkeeping tables exist. Its
// rows are closed when it returns, before readSchemaState's next query (q
// may have a single connection).
func schemaTables(ctx context.Context, q querier) (hasVersions, hasSums bool, err error) {
	rows, err := q.QueryContext(ctx, sqlSchemaTables)
	if err != nil {
		return false, false, err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return false, false, err
		}
		hasVersions = hasVersions || name == "schema_migrations"
		hasSums = hasSums || name == "schema_checksums"
	}
	return hasVersions, hasSums, rows.Err()
}

// readSchemaState reads golang-migrate's version and hxd's checksums.
func readSchemaState(ctx context.Context, q querier) (storekit.SchemaState, error) {
	st := storekit.SchemaState{Sums: make(map[uint]string)}
	hasVersions, hasSums, err := schemaTables(ctx, q)
	if err != nil {
		return st, err
	}
	if hasVersions {
		var v int64
		err := q.QueryRowContext(ctx, sqlSchemaVersion).Scan(&v, &st.Dirty)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return st, err
		case v >= 0:
			st.Versioned, st.Version = true, uint(v)
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
			st.Sums[uint(v)] = sum
		}
		if err := rows.Err(); err != nil {
			return st, err
		}
	}
	return st, nil
}

// checkSchema compares st with the embedded migrations
// (storekit.CheckSchema).
func (s *Store) checkSchema(st storekit.SchemaState, allowPending bool) error {
	return storekit.CheckSchema(st, s.migs, allowPending, storekit.SchemaTarget{
		Name:        "database " + s.path,
		VersionNoun: "schema version",
		Files:       "migrations/" + migrationsDir,
		Missing:     "no schema",
		Dirty: func(version uint) error {
			return storekit.SchemaErr("database %s is dirty at schema version %d: a migration failed part-way; "+
				"restore the file from a backup, or repair the schema by hand and then set "+
				"schema_migrations to the last fully applied version with dirty = 0", s.path, version)
		},
	})
}

// prepareSchema validates the schema and, with autoMigrate, applies pending
// migrations and records their checksums. It holds the migration lock
// throughout, so concurrent starts of several processes are safe.
func (s *Store) prepareSchema(ctx context.Context, autoMigrate bool) error {
	sums, err := migrations.Checksums(migrations.SQLite, migrationsDir)
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	s.migs = storekit.NewMigrations(sums)

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
	if !st.Versioned || st.Version < s.migs.Head {
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
	for v, sum := range s.migs.Sums {
		if v > st.Version {
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
	m.Log = storekit.MigrateLogger{Logger: s.logger.With("path", s.path)}
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
