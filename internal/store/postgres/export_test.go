package postgres

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Test hooks (compiled into the package's tests only).

// OpenWithMigrations is Open with the migration files of fsys (directory
// "postgres") instead of the embedded ones.
func OpenWithMigrations(ctx context.Context, cfg Config, fsys fs.FS) (*Store, error) {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return nil, err
	}
	return open(ctx, cfg, ms)
}

// MigrateWithMigrations is Migrate with the migration files of fsys.
func MigrateWithMigrations(ctx context.Context, cfg Config, fsys fs.FS) error {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	return migrateWith(ctx, cfg, ms)
}

// MigrationLockKey exposes migrationLockKey.
var MigrationLockKey = migrationLockKey

// EventChannel exposes eventChannel.
var EventChannel = eventChannel

// FailingTx runs a write transaction through withTx whose first failures
// attempts fail with SQLSTATE code, and returns how many attempts ran.
func (s *Store) FailingTx(ctx context.Context, failures int, code string) (int, error) {
	attempts := 0
	err := s.withTx(ctx, "failing tx", func(ctx context.Context, t *tx) error {
		attempts++
		b := &pgx.Batch{}
		b.Queue("SELECT 1")
		if err := t.send(ctx, b, false); err != nil {
			return err
		}
		if attempts <= failures {
			return &pgconn.PgError{Code: code, Message: "injected"}
		}
		return t.send(ctx, &pgx.Batch{}, true)
	})
	return attempts, err
}
