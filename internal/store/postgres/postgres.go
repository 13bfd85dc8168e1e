package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/runtime/rtstore"
)

// Compile-time check that *Store is a complete storage backend.
var _ rtstore.Store = (*Store)(nil)

// Defaults of Config.
const (
	// DefaultSchema is the schema every object lives in unless Config.Schema
	// names another.
	DefaultSchema = "harness_x"
	// DefaultPoolSize is the default maximum number of pooled connections
	// (Config.PoolSize 0 means this).
	DefaultPoolSize = 10
	// LeaseConns is the number of connections reserved for lease renewals
	// and releases, outside the pool of PoolSize: a pool busy with commits
	// and reads never delays a renewal past the lease.
	LeaseConns = 2
	// DefaultLeaseDuration is the default session lease length.
	DefaultLeaseDuration = 30 * time.Second
	// DefaultCommitGroups is the default number of group-commit
	// transactions in flight.
	DefaultCommitGroups = 2
)

// maxIdentifierBytes is PostgreSQL's identifier limit (NAMEDATALEN - 1).
const maxIdentifierBytes = 63

// Config configures Open and Migrate.
type Config struct {
	// URL is the libpq connection string: a postgres:// URL or key=value
	// pairs (TLS, host lists and the PG* environment variables work as in
	// libpq). Its password never appears in an error or log. Required.
	URL string
	// Schema holds every hxd object; any PostgreSQL identifier (non-empty,
	// at most 63 bytes of UTF-8, no NUL), quoted as needed. Several hxd
	// deployments can share one database with different schemas.
	// Default: "harness_x".
	Schema string
	// AutoMigrate creates the schema when missing and applies pending
	// migrations at Open. When false, Open only validates and changes
	// nothing (not even golang-migrate's version table): a missing, old,
	// dirty or changed schema is an error wrapping rtstore.ErrSchema that
	// says to run `hxd migrate`. Default: false.
	AutoMigrate bool
	// PoolSize is the maximum number of pooled connections for commits
	// and reads; 0 means DefaultPoolSize (10). Besides them the Store
	// keeps LeaseConns (2) reserved for lease renewals and releases, one
	// that holds its liveness lock, and ListenEvents uses one of its own:
	// at most PoolSize+4 connections.
	PoolSize int
	// LeaseDuration is how long a session lease lasts without renewal; the
	// runtime renews every third of it. Default: 30s.
	LeaseDuration time.Duration
	// CommitGroups is how many group-commit transactions (see Commit) may
	// be in flight at once; boundaries that arrive meanwhile queue and go
	// together in the next one (a further group starts only once several
	// wait). Fewer means larger groups and less database work per
	// boundary; more means more overlap (one group executes while another
	// waits for its WAL flush). At most half of PoolSize. Default: 2.
	CommitGroups int
	// Logger receives the store's logs (component=store/postgres).
	// Default: logs are discarded.
	Logger *slog.Logger
	// TracerProvider, when set, traces the queries and batches of the
	// commit and read pool (otelpgx: the SQL text, never its arguments)
	// made under a span of the caller; lease renewals and background work
	// outside a trace make none. Default: no tracing.
	TracerProvider trace.TracerProvider

	// ungrouped makes every Commit its own transaction on the caller's
	// goroutine, without the group committer (the benchmark's baseline).
	ungrouped bool
}

// withDefaults returns cfg with every zero field set to its default, or an
// error for a value that cannot work.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.URL == "" {
		return cfg, errors.New("empty database url")
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if err := validSchema(cfg.Schema); err != nil {
		return cfg, err
	}
	switch {
	case cfg.PoolSize == 0:
		cfg.PoolSize = DefaultPoolSize
	case cfg.PoolSize < 0:
		return cfg, fmt.Errorf("pool size %d: must be positive", cfg.PoolSize)
	}
	switch {
	case cfg.LeaseDuration == 0:
		cfg.LeaseDuration = DefaultLeaseDuration
	case cfg.LeaseDuration < time.Millisecond:
		return cfg, fmt.Errorf("lease duration %s: must be at least 1ms", cfg.LeaseDuration)
	}
	switch {
	case cfg.CommitGroups == 0:
		cfg.CommitGroups = DefaultCommitGroups
	case cfg.CommitGroups < 0:
		return cfg, fmt.Errorf("commit groups %d: must be positive", cfg.CommitGroups)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// validSchema checks that name is a usable PostgreSQL identifier. Two legal
// identifiers cannot be hxd's schema: "$user", which search_path (how hxd
// selects the schema) reads as the schema named after the current role,
// quoted or not; and names starting with "pg_", which PostgreSQL reserves
// for its system schemas (pg_catalog, pg_temp) and refuses to create.
func validSchema(name string) error {
	switch {
	case name == "":
		return errors.New("empty schema name")
	case len(name) > maxIdentifierBytes:
		return fmt.Errorf("schema name %q: longer than %d bytes", name, maxIdentifierBytes)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("schema name %q: contains NUL", name)
	case !utf8.ValidString(name):
		return fmt.Errorf("schema name %q: not valid UTF-8", name)
	case name == "$user":
		return fmt.Errorf("schema name %q: search_path reads it as the schema named after the database role; name that schema instead", name)
	case strings.HasPrefix(name, "pg_"):
		return fmt.Errorf("schema name %q: names starting with pg_ are reserved for PostgreSQL's system schemas", name)
	}
	return nil
}

// Store is the PostgreSQL rtstore.Store. Safe for concurrent use by many
// goroutines and, through the database, by many processes.
type Store struct {
	schema       string
	poolSize     int
	commitGroups int
	ungrouped    bool
	leaseDur     time.Duration
	logger       *slog.Logger
	secret       string // the URL's password, scrubbed from every error
	connCfg      *pgx.ConnConfig
	tracer       pgx.QueryTracer // the main pool's, nil without Config.TracerProvider
	pool         *pgxpool.Pool
	leasePool    *pgxpool.Pool // LeaseConns reserved for Renew and Release
	channel      string        // NOTIFY channel of this schema's events
	notify       *notifier     // sends the NOTIFYs of committed events
	group        *committer    // groups concurrent commits
	live         *liveness     // this process's liveness lock (live.go)
	migrations   *migrationSet

	seqs seqCache     // last journal/event seq per run under a lease
	ctl  controlCache // control flags read by recent commits

	closed atomic.Bool
	done   chan struct{} // closed by Close: stops the listeners
	mu     sync.Mutex
	leases map[*lease]struct{} // leases taken and not yet released
}

// Open connects to cfg.URL, validates (or, with cfg.AutoMigrate, provisions
// and migrates) cfg.Schema and returns the Store. Returns an error wrapping
// rtstore.ErrSchema if the schema is missing or old (without AutoMigrate),
// dirty, newer than this binary, holds foreign tables, or an applied
// migration file changed; rtstore.ErrUnavailable if the database cannot be
// reached. No error contains the URL's password.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	ms, err := embedded()
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	return open(ctx, cfg, ms)
}

// open is Open with a given migration set.
func open(ctx context.Context, cfg Config, ms *migrationSet) (*Store, error) {
	const op = "open postgres store"
	s, err := newStore(cfg, ms)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := s.prepareSchema(ctx, cfg.AutoMigrate); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := s.openPool(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return s, nil
}

// Migrate provisions cfg.Schema (creating it when missing) and applies every
// pending migration, then checks the result: the explicit `hxd migrate`. A
// current schema is left as it is. cfg.AutoMigrate is ignored. Returns an
// error wrapping rtstore.ErrSchema as Open does (dirty, newer, changed,
// foreign tables) or rtstore.ErrUnavailable.
func Migrate(ctx context.Context, cfg Config) error {
	ms, err := embedded()
	if err != nil {
		return fmt.Errorf("migrate postgres store: %w", err)
	}
	return migrateWith(ctx, cfg, ms)
}

// migrateWith is Migrate with a given migration set.
func migrateWith(ctx context.Context, cfg Config, ms *migrationSet) error {
	const op = "migrate postgres store"
	s, err := newStore(cfg, ms)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := s.prepareSchema(ctx, true); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// newStore checks cfg and parses the connection string; it connects to
// nothing.
func newStore(cfg Config, ms *migrationSet) (*Store, error) {
	secret := urlPassword(cfg.URL)
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, scrub(err, secret)
	}
	connCfg, err := pgx.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", scrub(err, secret))
	}
	if connCfg.Password != "" {
		secret = connCfg.Password
	}
	connCfg.RuntimeParams["search_path"] = quoteIdent(cfg.Schema)
	if connCfg.RuntimeParams["application_name"] == "" {
		connCfg.RuntimeParams["application_name"] = "hxd"
	}
	// Generic plans: every statement hxd prepares is an indexed lookup,
	// insert or update whose plan does not depend on the values bound, and
	// a boundary's statements take arrays whose lengths vary. Under the
	// default (auto) PostgreSQL plans such a statement anew at every bind
	// (its generic cost estimate for an unnest looks worse than the
	// custom plans'), which was a sixth of a lone boundary commit's time.
	// A plan_cache_mode in the URL wins.
	if connCfg.RuntimeParams["plan_cache_mode"] == "" {
		connCfg.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	return &Store{
		schema:       cfg.Schema,
		poolSize:     cfg.PoolSize,
		commitGroups: cfg.CommitGroups,
		ungrouped:    cfg.ungrouped,
		leaseDur:     cfg.LeaseDuration,
		logger:       cfg.Logger.With("component", "store/postgres", "schema", cfg.Schema),
		secret:       secret,
		connCfg:      connCfg,
		tracer:       newQueryTracer(cfg.TracerProvider),
		channel:      eventChannel(cfg.Schema),
		migrations:   ms,
		leases:       make(map[*lease]struct{}),
		done:         make(chan struct{}),
	}, nil
}

// openPool opens the connection pool, the reserved lease connections and
// the liveness lock's connection, and checks that they answer.
func (s *Store) openPool(ctx context.Context) error {
	ctx, cancel := opContext(ctx)
	defer cancel()
	pool, err := s.newPool(ctx, "open pool", s.poolSize, 0, s.tracer)
	if err != nil {
		return err
	}
	// The lease connections stay open (MinConns): a renewal never waits
	// for a connection to be established either.
	leasePool, err := s.newPool(ctx, "open lease connections", LeaseConns, LeaseConns, nil)
	if err != nil {
		pool.Close()
		return err
	}
	live, err := s.startLiveness(ctx)
	if err != nil {
		pool.Close()
		leasePool.Close()
		return err
	}
	s.pool, s.leasePool, s.live = pool, leasePool, live
	s.notify = newNotifier(s)
	s.group = newCommitter(s, s.poolSize, s.commitGroups)
	s.group.ungrouped.Store(s.ungrouped)
	return nil
}

// newPool opens a pool of at most size connections (min kept open),
// tracing its queries with tracer when not nil, and pings it.
func (s *Store) newPool(ctx context.Context, op string, size, minConns int, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, s.plain(err))
	}
	pcfg.ConnConfig = s.connCfg.Copy()
	if tracer != nil {
		pcfg.ConnConfig.Tracer = tracer
	}
	pcfg.MaxConns = int32(size)
	pcfg.MinConns = int32(minConns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, s.mapErr(ctx, op, err)
	}
	return pool, nil
}

// PoolSize returns the maximum number of pooled connections for commits
// and reads (Config.PoolSize, or DefaultPoolSize when it was 0); LeaseConns
// more are reserved for leases.
func (s *Store) PoolSize() int { return s.poolSize }

// Schema returns the schema the Store works in.
func (s *Store) Schema() string { return s.schema }

// LeaseDuration returns how long a session lease lasts without renewal.
// The runtime's heartbeat renews every third of it.
func (s *Store) LeaseDuration() time.Duration { return s.leaseDur }

// Ping checks that the database answers, the schema is the one this
// binary expects (current version, not dirty, checksums unchanged) and the
// server takes a write (probeWrite). Returns an error wrapping
// rtstore.ErrSchema or rtstore.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.checkOpen("ping"); err != nil {
		return err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.mapErr(ctx, "ping", err)
	}
	defer conn.Release()
	st, err := readSchemaState(ctx, conn.Conn(), s.schema)
	if err != nil {
		return s.mapErr(ctx, "ping", err)
	}
	if err := s.checkSchema(st, false); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if err := probeWrite(ctx, conn.Conn()); err != nil {
		return s.mapErr(ctx, "ping", err)
	}
	return nil
}

// sqlProbeWrite is Ping's write: it changes nothing and is rolled back,
// but the server must still be able to write a row version (not a
// standby, a read-only session or a disk it cannot extend).
const sqlProbeWrite = `UPDATE schema_migrations SET dirty = dirty`

// probeTimeout bounds Ping's write (it may wait for a migration holding
// the row).
const probeTimeout = 2 * time.Second

// probeWrite runs sqlProbeWrite in a transaction that it rolls back.
func probeWrite(ctx context.Context, c *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	tx, err := c.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	_, err = tx.Exec(ctx, sqlProbeWrite)
	return err
}

// Close releases every lease this Store holds (so another process can take
// the sessions over at once instead of after expiry) and closes the pool.
// Safe to call more than once.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.done)
	// Boundaries in flight finish first; queued ones fail as unavailable.
	if s.group != nil {
		s.group.close()
	}
	s.mu.Lock()
	held := make([]*lease, 0, len(s.leases))
	for l := range s.leases {
		held = append(held, l)
	}
	s.mu.Unlock()

	var errs []error
	if len(held) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for _, l := range held {
			if err := l.release(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		cancel()
	}
	if s.notify != nil {
		s.notify.close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.leasePool != nil {
		s.leasePool.Close()
	}
	// Last: until the leases are released, they must not look orphaned.
	if s.live != nil {
		s.live.close()
	}
	return errors.Join(errs...)
}

// checkOpen returns ErrUnavailable once the Store is closed.
func (s *Store) checkOpen(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("%s: %w: store closed", op, rtstore.ErrUnavailable)
	}
	return nil
}

// opTimeout bounds a single store operation whose context has no deadline.
const opTimeout = 30 * time.Second

// opContext gives ctx a deadline of opTimeout unless it has one.
func opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, opTimeout)
}

// quoteIdent quotes a PostgreSQL identifier: in double quotes, embedded
// quotes doubled. Used only for the schema name (search_path, CREATE
// SCHEMA) and the notification channel.
func quoteIdent(name string) string {
	return pgx.Identifier{name}.Sanitize()
}

// eventChannel is the NOTIFY channel of a schema's events:
// "hxd_events_" + the first 8 bytes of SHA-256(schema) in hex, so that
// deployments on one database with different schemas do not wake each
// other, whatever the schema's name.
func eventChannel(schema string) string {
	sum := sha256.Sum256([]byte(schema))
	return "hxd_events_" + hex.EncodeToString(sum[:8])
}

// now is the store's clock for timestamps the caller does not provide,
// truncated to the microseconds PostgreSQL keeps.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// dbTime prepares a caller's time for storage: UTC, microseconds, no
// monotonic reading, so what is written equals what is read back.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// limitArg turns a list limit into a LIMIT argument: NULL (no limit) when
// limit <= 0.
func limitArg(limit int) any {
	if limit <= 0 {
		return nil
	}
	return int64(limit)
}
