package postgres

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
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

// HoldPool acquires every connection of the Store's pool, as a burst of
// commits and reads would, and returns the func that gives them back.
func (s *Store) HoldPool(ctx context.Context) (release func(), err error) {
	var held []*pgxpool.Conn
	release = func() {
		for _, c := range held {
			c.Release()
		}
	}
	for range s.poolSize {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, c)
	}
	return release, nil
}

// PoolMaxConns reports the configured maximum of the pool and of the
// reserved lease connections.
func (s *Store) PoolMaxConns() (pool, lease int32) {
	return s.pool.Config().MaxConns, s.leasePool.Config().MaxConns
}

// FastMisses reports how many one-round-trip group commits fell back to
// the careful path.
func (s *Store) FastMisses() int64 { return s.group.fastMisses.Load() }

// ForgetSeqs drops the cached seqs of a run: its next commit goes the
// careful way.
func (s *Store) ForgetSeqs(runID string) { s.seqs.Forget(runID) }

// Setting reads a run-time parameter on a pooled and on a lease
// connection.
func (s *Store) Setting(ctx context.Context, name string) (pool, lease string, err error) {
	if err := s.pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&pool); err != nil {
		return "", "", err
	}
	err = s.leasePool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&lease)
	return pool, lease, err
}

// PauseLiveness keeps the Store from re-acquiring its liveness lock once
// it is lost, until resume is called: with its lock connection killed
// meanwhile, the Store is, to the others, a process that died.
func (s *Store) PauseLiveness() (resume func()) {
	s.live.paused.Store(true)
	return func() { s.live.paused.Store(false) }
}

// LivenessPID returns the backend pid of the liveness lock's connection,
// 0 while the lock is lost.
func (s *Store) LivenessPID() uint32 {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	if s.live.conn == nil {
		return 0
	}
	return s.live.conn.PgConn().PID()
}

// Ungrouped returns cfg with the group committer off: every Commit is its
// own transaction on the caller's goroutine.
func Ungrouped(cfg Config) Config {
	cfg.ungrouped = true
	return cfg
}

// SetUngrouped turns the group committer off (on): every Commit is then
// its own transaction on the caller's goroutine.
func (s *Store) SetUngrouped(off bool) { s.group.ungrouped.Store(off) }

// ExecOnEveryConn runs sql on every connection of the pool (opening them
// as needed), e.g. a SET.
func (s *Store) ExecOnEveryConn(ctx context.Context, sql string) error {
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range s.poolSize {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		held = append(held, c)
		if _, err := c.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}

// SetMinExtraGroup sets how many boundaries must wait before a further
// group starts while one is in flight.
func (s *Store) SetMinExtraGroup(n int) {
	s.group.mu.Lock()
	s.group.minExtra = n
	s.group.mu.Unlock()
}

// OpenTraced is Open with tr tracing every connection of the Store.
func OpenTraced(ctx context.Context, cfg Config, tr pgx.QueryTracer) (*Store, error) {
	ms, err := embedded()
	if err != nil {
		return nil, err
	}
	s, err := newStore(cfg, ms)
	if err != nil {
		return nil, err
	}
	s.connCfg.Tracer = tr
	if err := s.prepareSchema(ctx, cfg.AutoMigrate); err != nil {
		return nil, err
	}
	if err := s.openPool(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// SQLFastCommit exposes the fast path's statement.
const SQLFastCommit = sqlFastCommit

// SQLNotifyRuns exposes the notifier's statement.
const SQLNotifyRuns = sqlNotifyRuns

// QueuedBoundaries is how many boundaries wait in the group committer's
// queue.
func (s *Store) QueuedBoundaries() int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.queue)
}
