package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
)

// Compile-time check that *Store is a complete storage backend.
var _ rtstore.Store = (*Store)(nil)

// Config configures Open.
type Config struct {
	// Path is the database file. Beside it the store keeps one folder,
	// "<Path>.hxd" (mode 0700), for its locks (lock.go); the database's
	// folder is created (mode 0700) when missing. Required.
	Path string
	// Logger receives the store's logs (component=store/sqlite).
	// Optional; default: logs are discarded.
	Logger *slog.Logger
	// AutoMigrate applies pending migrations at Open. When false, Open only
	// validates the schema and returns an error wrapping rtstore.ErrSchema
	// if it is missing or old, changing nothing (not even creating the
	// file). The zero value validates only; cmd/hxd's --auto-migrate flag
	// defaults to true for SQLite, so a plain start creates the schema.
	AutoMigrate bool
}

// Store is the SQLite rtstore.Store. Safe for concurrent use: writes queue
// for the single writer connection (transactions start with BEGIN
// IMMEDIATE, so they never dead-lock on a read-to-write upgrade), reads use
// a separate pool and never block the writer (WAL).
type Store struct {
	path    string
	dir     string
	lockDir string // the lock place, "<path>.hxd" (lock.go)
	logger  *slog.Logger

	lockFile *os.File      // the lock place's lock file; its own open file description
	locker   sessionLocker // session and migration locks through lockFile

	w  *sql.DB // exactly one connection: every write goes through it
	r  *sql.DB // read-only pool
	ws writeStmts
	rs readStmts

	migs storekit.Migrations // the embedded migrations' checksums

	seqs seqCache // last journal/event seq per run under a lease

	ckptCfg checkpointConfig
	ckpt    *checkpointer // nil until Open succeeds

	// lastCommit is when a writer transaction last committed (Unix
	// nanoseconds, 0 before any); probe is the last readiness probe.
	lastCommit atomic.Int64
	probe      commitProbe

	mu     sync.Mutex
	locks  map[string]*lease // held session locks by session id
	closed bool
	// down mirrors closed for mapErr, which must not take mu: once set,
	// every failure is ErrUnavailable (database/sql's "database is closed").
	down atomic.Bool
}

// Connection pragmas, one reason each. modernc applies busy_timeout first.
const (
	// Wait up to 5 s for another connection or process holding the write
	// lock before failing with SQLITE_BUSY (mapped to ErrUnavailable).
	pragmaBusyTimeout = "busy_timeout(5000)"
	// Readers never block the writer and the writer never blocks readers;
	// commits append to the WAL instead of rewriting pages in place.
	pragmaWAL = "journal_mode(WAL)"
	// fsync the WAL at every commit: a committed boundary survives power
	// loss, which is what "durable" promises.
	pragmaSyncFull = "synchronous(FULL)"
	// Enforce the REFERENCES clauses (SQLite leaves them off by default).
	pragmaForeignKeys = "foreign_keys(1)"
	// The read pool must never write, even by mistake.
	pragmaQueryOnly = "query_only(1)"
	// Writer transactions take the write lock at BEGIN (BEGIN IMMEDIATE).
	txLockImmediate = "immediate"
)

// writerDSN is the DSN of the writer (and migration) connections.
func writerDSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", pragmaBusyTimeout)
	q.Add("_pragma", pragmaWAL)
	q.Add("_pragma", pragmaSyncFull)
	q.Add("_pragma", pragmaForeignKeys)
	q.Add("_pragma", pragmaAutocheckpointOff)
	q.Add("_pragma", pragmaJournalSizeLimit)
	q.Set("_txlock", txLockImmediate)
	return path + "?" + q.Encode()
}

// readerDSN is the DSN of the read pool.
func readerDSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", pragmaBusyTimeout)
	q.Add("_pragma", pragmaForeignKeys)
	q.Add("_pragma", pragmaQueryOnly)
	return path + "?" + q.Encode()
}

// fileMode is the mode of every file the store creates: the database holds
// raw prompts and tool payloads.
const fileMode os.FileMode = 0o600

// Open opens (creating and migrating, with cfg.AutoMigrate) the database at
// cfg.Path. Returns an error wrapping rtstore.ErrSchema if the schema is
// missing or old (without AutoMigrate), dirty, newer than this binary or an
// applied migration file changed; rtstore.ErrUnavailable if the file is
// locked longer than the busy timeout.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return open(ctx, cfg, defaultCheckpointConfig())
}

// open is Open with the checkpointer's settings.
// resolveLinks returns path with its symbolic links resolved (the file's,
// or its folder's when the file does not exist yet): SQLite opens the file
// a link names, and the lock place beside it must be the same for every
// Store of that file, whichever path it was opened by.
func resolveLinks(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(dir, filepath.Base(path))
	}
	return path
}

func open(ctx context.Context, cfg Config, ckpt checkpointConfig) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("open sqlite store: empty path")
	}
	if strings.ContainsAny(cfg.Path, "?#") {
		return nil, fmt.Errorf("open sqlite store %q: path must not contain '?' or '#'", cfg.Path)
	}
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	path = resolveLinks(path)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		path:    path,
		dir:     filepath.Dir(path),
		lockDir: path + lockPlaceSuffix,
		logger:  logger.With("component", "store/sqlite"),
		locks:   make(map[string]*lease),
		ckptCfg: ckpt,
	}
	if err := s.createFile(ctx, cfg.AutoMigrate); err != nil {
		return nil, err
	}
	if err := s.openLockPlace(); err != nil {
		return nil, err
	}
	if err := s.prepareSchema(ctx, cfg.AutoMigrate); err != nil {
		_ = s.closeLockPlace()
		return nil, err
	}
	if err := s.openPools(ctx); err != nil {
		_ = s.closePools()
		_ = s.closeLockPlace()
		return nil, err
	}
	c, err := startCheckpointer(ctx, s.path, s.ckptCfg, s.logger, s.holdWriter)
	if err != nil {
		_ = s.closePools()
		_ = s.closeLockPlace()
		return nil, s.mapErr(ctx, "start checkpointer", err)
	}
	s.ckpt = c
	s.tightenModes(ctx)
	return s, nil
}

// createFile creates the database folder and an empty database file with
// mode 0600 (SQLite gives -wal and -shm the mode of the database file).
func (s *Store) createFile(ctx context.Context, autoMigrate bool) error {
	st, err := os.Stat(s.path)
	if err == nil && st.IsDir() {
		// SQLite would say only "unable to open database file".
		return fmt.Errorf("open sqlite store: %s is a directory, not a SQLite database file", s.path)
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("open sqlite store: %w", err)
	}
	if !autoMigrate {
		return fmt.Errorf("open sqlite store: %w: database %s does not exist; run `hxd migrate` or start with --auto-migrate",
			rtstore.ErrSchema, s.path)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create database folder: %w", err)
	}
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fileMode)
	if errors.Is(err, os.ErrExist) {
		return nil // another process created it meanwhile
	}
	if err != nil {
		return fmt.Errorf("create database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create database file: %w", err)
	}
	s.logger.InfoContext(ctx, "created database", "path", s.path)
	return nil
}

// openPools opens the writer and the read pool and prepares the statements.
func (s *Store) openPools(ctx context.Context) error {
	w, err := sql.Open("sqlite", writerDSN(s.path))
	if err != nil {
		return fmt.Errorf("open writer: %w", plain(err))
	}
	s.w = w
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		return s.mapErr(ctx, "open writer", err)
	}

	r, err := sql.Open("sqlite", readerDSN(s.path))
	if err != nil {
		return fmt.Errorf("open read pool: %w", plain(err))
	}
	s.r = r
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxIdleTime(5 * time.Minute)
	if err := r.PingContext(ctx); err != nil {
		return s.mapErr(ctx, "open read pool", err)
	}

	if err := s.ws.prepare(ctx, w); err != nil {
		return s.mapErr(ctx, "prepare write statements", err)
	}
	if err := s.rs.prepare(ctx, r); err != nil {
		return s.mapErr(ctx, "prepare read statements", err)
	}
	return nil
}

// tightenModes makes sure the WAL and shared-memory files are 0600 and warns
// when the database file itself is readable by others.
func (s *Store) tightenModes(ctx context.Context) {
	for _, p := range []string{s.path + "-wal", s.path + "-shm", filepath.Join(s.lockDir, lockFileName)} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() == fileMode {
			continue
		}
		if err := os.Chmod(p, fileMode); err != nil {
			s.logger.WarnContext(ctx, "cannot restrict file mode", "path", p, "error", err)
		}
	}
	if fi, err := os.Stat(s.path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		s.logger.WarnContext(ctx, "database file is accessible to other users; it holds raw prompts",
			"path", s.path, "mode", fi.Mode().Perm().String())
	}
}

// Ping checks that the Store can take writes now: that this process can
// open a file (a new read connection or session lock needs one), that the
// database answers and its schema is the one this binary expects (current
// version, not dirty, checksums unchanged), and that a commit goes through
// (probeCommit). Returns an error wrapping rtstore.ErrSchema or
// rtstore.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.descriptors(); err != nil {
		return fmt.Errorf("ping: %w: %w", rtstore.ErrUnavailable, err)
	}
	st, err := readSchemaState(ctx, s.r)
	if err != nil {
		return s.mapErr(ctx, "ping", err)
	}
	if err := s.checkSchema(st, false); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return s.probeCommit(ctx)
}

// Readiness must see what commits see. A database that answers reads may
// refuse every commit: a full disk fails the WAL append at COMMIT, after
// every statement succeeded, and a transaction that is rolled back writes
// nothing at all. So the probe commits a transaction that changes pages
// and no data: a row of schema_checksums that no migration has, inserted
// and deleted again (SQLite writes nothing for an UPDATE that leaves the
// bytes as they were). It takes the write lock, appends to the WAL and
// fsyncs as a boundary does. That row fits in a page the table already
// has, so the probe also makes SQLite allocate a page, as any boundary
// with a payload larger than the free space of its pages does: inside a
// savepoint it inserts a row larger than a page (sqlProbePage), which
// needs an overflow page from the free list or the file's growth and
// fails with SQLITE_FULL when the database may not grow, then rolls the
// savepoint back, so that the page is neither written nor kept (the file
// does not grow a page per probe). It is skipped while the Store's own commits
// prove the same (one succeeded within probeFresh), so a busy server pays
// nothing; otherwise one probe runs at a time and its outcome stands for
// probeFresh, so readiness polls cost at most one small commit per
// probeFresh however often they come. A probe waits at most probeTimeout.
const (
	sqlProbeInsert = `INSERT INTO schema_checksums (version, sha256) VALUES (-1, 'readiness probe')`
	sqlProbeDelete = `DELETE FROM schema_checksums WHERE version = -1`
	// A text of twice the page size: larger than any page's payload.
	sqlProbePage = `INSERT INTO schema_checksums (version, sha256)
SELECT -2, hex(zeroblob(page_size)) FROM pragma_page_size()`
	sqlProbeSavepoint = `SAVEPOINT readiness_probe`
	sqlProbeRollback  = `ROLLBACK TO readiness_probe`
	sqlProbeRelease   = `RELEASE readiness_probe`
	probeFresh        = time.Second
	probeTimeout      = 2 * time.Second
)

// commitProbe is the outcome of the last probe commit.
type commitProbe struct {
	mu  sync.Mutex // held while a probe runs
	at  time.Time
	err error
}

// probeCommit reports whether a commit goes through now (see sqlProbeInsert).
func (s *Store) probeCommit(ctx context.Context) error {
	if s.committedWithin(probeFresh) {
		return nil
	}
	p := &s.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.committedWithin(probeFresh) {
		return nil
	}
	if !p.at.IsZero() && time.Since(p.at) < probeFresh {
		return p.err
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := s.inTx(pctx, "ping", func(ctx context.Context, t *txn) error {
		if err := probePage(ctx, t.tx); err != nil {
			return err
		}
		if _, err := t.tx.ExecContext(ctx, sqlProbeInsert); err != nil {
			return err
		}
		_, err := t.tx.ExecContext(ctx, sqlProbeDelete)
		return err
	})
	if ctx.Err() == nil { // the caller's own end says nothing about storage
		p.at, p.err = time.Now(), err
	}
	return err
}

// probePage reports whether tx can have a new page (see sqlProbePage),
// leaving nothing of it in tx.
func probePage(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, sqlProbeSavepoint); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sqlProbePage); err != nil {
		return err // the transaction is rolled back as a whole
	}
	if _, err := tx.ExecContext(ctx, sqlProbeRollback); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, sqlProbeRelease)
	return err
}

// committedWithin reports whether a writer transaction of this Store
// committed within d.
func (s *Store) committedWithin(d time.Duration) bool {
	last := s.lastCommit.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < d
}

// holdWriter takes the writer connection, keeping this Store's writes
// out until release.
func (s *Store) holdWriter(ctx context.Context) (release func(), err error) {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return func() { _ = conn.Close() }, nil
}

// committed tells the checkpointer and readiness (probeCommit) about a
// writer commit.
func (s *Store) committed() {
	s.lastCommit.Store(time.Now().UnixNano())
	if s.ckpt != nil {
		s.ckpt.committed()
	}
}

// Close stops the checkpointer, releases every session lock this Store
// holds and closes the connections (the last connection to the file
// checkpoints the WAL). Safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.down.Store(true)
	held := make([]*lease, 0, len(s.locks))
	for _, l := range s.locks {
		held = append(held, l)
	}
	s.mu.Unlock()

	var errs []error
	if s.ckpt != nil {
		if err := s.ckpt.close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range held {
		if err := l.Release(context.Background()); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.closePools(); err != nil {
		errs = append(errs, err)
	}
	if err := s.closeLockPlace(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// closePools closes the statements and both pools.
func (s *Store) closePools() error {
	var errs []error
	errs = append(errs, s.ws.close()...)
	errs = append(errs, s.rs.close()...)
	for _, db := range []*sql.DB{s.r, s.w} {
		if db == nil {
			continue
		}
		if err := db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close sqlite store: %w", plain(err)))
		}
	}
	return errors.Join(errs...)
}

// now is the store's clock for timestamps the caller does not provide.
func now() time.Time { return time.Now().UTC() }

// timeLayout is the stored timestamp format: UTC, fixed width, microseconds
// (the precision PostgreSQL keeps), so text order is time order.
const timeLayout = "2006-01-02T15:04:05.000000Z"

// formatTime renders t for storage.
func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// parseTime reads a stored timestamp.
func parseTime(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse stored time %q: %w", v, err)
	}
	return t.UTC(), nil
}

// limitArg turns a list limit into SQLite's LIMIT argument: <= 0 means no
// limit.
func limitArg(limit int) int64 {
	if limit <= 0 {
		return -1
	}
	return int64(limit)
}
