package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/postgres"
	"hxd/internal/store/sqlite"
)

// pgOptions are the PostgreSQL flags shared by serve, migrate and the
// crash-recovery demo. An empty URL means SQLite.
type pgOptions struct {
	// URL of the database (--database-url, DATABASE_URL or
	// HXD_DATABASE_URL). Never echoed: its password stays out of errors.
	URL string
	// Schema, default harness_x (--schema, HXD_SCHEMA).
	Schema string
	// AutoMigrate provisions and migrates at start-up; default false:
	// validate only (--auto-migrate, HXD_AUTO_MIGRATE).
	AutoMigrate bool
	// PoolSize, 0 = the store's default postgres.DefaultPoolSize (10)
	// (--pool-size, HXD_POOL_SIZE).
	PoolSize int
	// LeaseDuration of session leases, default 30s (--lease-duration,
	// HXD_LEASE_DURATION); renewed and reaped every third of it.
	LeaseDuration time.Duration
	// WatchPoll overrides how often event streams re-check storage besides
	// the LISTEN/NOTIFY wake-ups (HXD_WATCH_POLL, no flag: for tests that
	// prove the wake-ups; 0 = the runtime's default).
	WatchPoll time.Duration
	// tracerProvider is the one of --otel (nil when off): queries are
	// traced with it.
	tracerProvider trace.TracerProvider
}

// register adds the flags to fs and binds them to their environment
// variables in ef; migrate and export pass withServe=false (no pool, lease
// or auto-migrate flags there).
func (o *pgOptions) register(fs *flag.FlagSet, ef *envFlags, withServe bool) {
	fs.StringVar(&o.URL, "database-url", "", "PostgreSQL URL; empty = SQLite (HXD_DATABASE_URL, DATABASE_URL)")
	ef.bind("database-url", "HXD_DATABASE_URL", "DATABASE_URL")
	fs.StringVar(&o.Schema, "schema", postgres.DefaultSchema, "PostgreSQL schema (HXD_SCHEMA)")
	ef.bind("schema", "HXD_SCHEMA")
	if !withServe {
		return
	}
	fs.BoolVar(&o.AutoMigrate, "auto-migrate", false, "PostgreSQL: provision and migrate the schema at start-up instead of only validating it (HXD_AUTO_MIGRATE)")
	ef.bind("auto-migrate", "HXD_AUTO_MIGRATE")
	fs.IntVar(&o.PoolSize, "pool-size", 0, fmt.Sprintf("PostgreSQL connection pool size, 0 = %d; %d more are reserved for lease renewals (HXD_POOL_SIZE)",
		postgres.DefaultPoolSize, postgres.LeaseConns))
	ef.bind("pool-size", "HXD_POOL_SIZE")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", postgres.DefaultLeaseDuration, "PostgreSQL session lease; renewed and reaped every third of it (HXD_LEASE_DURATION)")
	ef.bind("lease-duration", "HXD_LEASE_DURATION")
}

// resolve finishes the options once fs is parsed and ef applied (set: the
// flags given on the command line), for a command whose SQLite file is
// --db: an explicit --db wins over a database URL from the environment
// (DATABASE_URL, HXD_DATABASE_URL), and --db with --database-url is a
// usage error unless both is true (migrate does both). withServe (as given
// to register) also reads HXD_WATCH_POLL. Then the options are validated.
// Every error is a usage error (exit 2 for the caller).
func (o *pgOptions) resolve(cmd string, set map[string]bool, e env, withServe, both bool) error {
	switch {
	case set["db"] && set["database-url"] && !both:
		return fmt.Errorf("%s takes --db or --database-url, not both", cmd)
	case set["db"] && !set["database-url"]:
		o.URL = "" // a DATABASE_URL in the environment does not override --db
	}
	if v := e.getenv("HXD_WATCH_POLL"); withServe && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("invalid value %q for HXD_WATCH_POLL: %w", v, err)
		}
		o.WatchPoll = d
	}
	return o.validate(withServe)
}

// validate checks the options of a PostgreSQL URL; the pool and the lease
// only withServe (the flags register adds then).
func (o *pgOptions) validate(withServe bool) error {
	if o.URL == "" {
		return nil
	}
	var errs []error
	if o.Schema == "" {
		errs = append(errs, errors.New("--schema must not be empty"))
	}
	if !withServe {
		return errors.Join(errs...)
	}
	if o.PoolSize < 0 {
		errs = append(errs, fmt.Errorf("--pool-size %d: must not be negative", o.PoolSize))
	}
	if o.LeaseDuration < 3*time.Millisecond {
		errs = append(errs, fmt.Errorf("--lease-duration %s: too short", o.LeaseDuration))
	}
	return errors.Join(errs...)
}

// config is the store configuration; zero values (PoolSize 0) take the
// store's defaults.
func (o *pgOptions) config(log *slog.Logger) postgres.Config {
	return postgres.Config{URL: o.URL, Schema: o.Schema, AutoMigrate: o.AutoMigrate, PoolSize: o.PoolSize, LeaseDuration: o.LeaseDuration, Logger: log,
		TracerProvider: o.tracerProvider}
}

// openedStore is the store serve and the demo run on.
type openedStore struct {
	rtstore.Store
	pg *postgres.Store // nil on SQLite
	// watchPoll: pgOptions.WatchPoll.
	watchPoll time.Duration
	// desc names it for logs (no secret).
	desc string
}

// openStore opens PostgreSQL when o.URL is set, else the SQLite file db
// (migrated automatically, as before).
func openStore(ctx context.Context, o pgOptions, db string, log *slog.Logger) (*openedStore, error) {
	if o.URL == "" {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: db, Logger: log, AutoMigrate: true})
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", db, err)
		}
		return &openedStore{Store: st, desc: "sqlite:" + db}, nil
	}
	st, err := postgres.Open(ctx, o.config(log))
	if err != nil {
		// postgres errors never hold the password.
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &openedStore{Store: st, pg: st, watchPoll: o.WatchPoll, desc: "postgres schema " + strconv.Quote(st.Schema())}, nil
}

// wire sets the store's retention (tombstones) in a runtime config, and
// its PostgreSQL parts: lease renewal at a
// third of the lease, the reaper's work list, and its wake-up when another
// process dies.
func (s *openedStore) wire(cfg *hxruntime.Config) {
	if rs, ok := s.Store.(rtstore.RetentionStore); ok {
		cfg.Retention = rs
	}
	if s.pg == nil {
		return
	}
	cfg.LeaseRenewEvery = s.pg.LeaseDuration() / 3
	cfg.ExpiredRunsFunc = s.pg.ExpiredRuns
	cfg.ExpiredRunsWake = s.pg.ProcessGone()
	if s.watchPoll > 0 {
		cfg.WatchPoll = s.watchPoll
	}
}

// start runs the reaper (every third of the lease, and at once when another
// process of the schema dies) and feeds committed-event
// notifications of every process into rt.NotifyRun, until ctx ends or rt
// stops. No-op on SQLite.
func (s *openedStore) start(ctx context.Context, rt *hxruntime.Runtime, log *slog.Logger) {
	if s.pg == nil {
		return
	}
	rt.StartReaper(ctx, s.pg.LeaseDuration()/3)
	go func() {
		err := s.pg.ListenEvents(ctx, rt.NotifyRun)
		if err != nil && ctx.Err() == nil {
			log.Warn("event listener stopped; event streams fall back to polling", "error", err)
		}
	}()
}
