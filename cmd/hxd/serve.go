package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/agent"
	hxhttp "hxd/internal/http"
	"hxd/internal/hxbundle"
	"hxd/internal/journal"
	"hxd/internal/mcp"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/telemetry"
	"hxd/internal/tool"
	"hxd/internal/ui"
)

// serveConfig is everything `hxd serve` reads from flags and HXD_* env.
type serveConfig struct {
	// Addr to listen on. Default: 127.0.0.1:8080.
	Addr string
	// DB is the SQLite file. Default: ./hxd.db.
	DB string
	// AgentsDir holds agent files. Default: none.
	AgentsDir string
	// Demo registers the demo agents. Default: false.
	Demo bool
	// LogFormat is text or json. Default: text.
	LogFormat string
	// Auth is the authentication mode: none (one local principal,
	// loopback addresses only) or oidc (bearer JWTs of OIDC). Default: none.
	Auth string
	// OIDC configures --auth=oidc.
	OIDC oidcConfig
	// ResumeInterrupted resumes runs left running at start-up. Default: true.
	ResumeInterrupted bool
	// MaxSessionDuration is the default deadline of a drive. Default: none.
	MaxSessionDuration time.Duration
	// ShutdownTimeout bounds the graceful stop. Default: 15s.
	ShutdownTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sent no request for
	// that long (an event stream being served is not idle). Default: 2m.
	IdleTimeout time.Duration
	// WorkDir is where demo tools write files. Default: the current folder.
	WorkDir string
	// CrashAfter is the HXD_CRASH_AFTER testing hook (<kind>[:<n>]).
	CrashAfter string
	// CheckpointHook is a URL notified of every checkpoint. Default: none.
	CheckpointHook string
	// PG selects PostgreSQL instead of the SQLite file DB when PG.URL is set.
	PG pgOptions
	// Engine is local (SQLite or PostgreSQL) or temporal. Default: local.
	Engine string
	// Temporal configures --engine temporal (temporal_flags.go).
	Temporal temporalConfig
	// Debug is --debug-addr (debug.go).
	Debug debugConfig
	// RetainFinishedFor is the retention of finished sessions (agents may
	// set their own). Default: 0, keep forever.
	RetainFinishedFor time.Duration
	// GCInterval is how often the sweeper runs. Default: 1h.
	GCInterval time.Duration
	// TombstoneFor keeps the tombstones of deleted sessions and runs.
	// Default: 720h.
	TombstoneFor time.Duration

	// Bundle is --bundle-signing-key and --bundle-verify-keys
	// (bundle_keys.go).
	Bundle bundleKeyConfig

	// OTel is --otel: OpenTelemetry traces, configured by the standard
	// OTEL_* variables (otel.go). Default: false.
	OTel bool
	// OTelCaptureContent is --otel-capture-content: payloads in spans,
	// auto-redacted. Default: false.
	OTelCaptureContent bool

	// bundleSigner and bundleKeys are Bundle loaded by serve.
	bundleSigner *hxbundle.Signer
	bundleKeys   *hxbundle.KeySet
	// tracerProvider is the one of --otel, set by serve; nil when off.
	tracerProvider trace.TracerProvider
}

// validate checks the configuration; c.PG is resolved (and validated)
// first.
func (c *serveConfig) validate() error {
	var errs []error
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format must be text or json, not %q", c.LogFormat))
	}
	errs = append(errs, validateAuth(c.Auth, c.OIDC)...)
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		errs = append(errs, fmt.Errorf("--addr %q: %w", c.Addr, err))
	} else if c.Auth == authNone && !isLoopback(host) {
		errs = append(errs, fmt.Errorf("--auth=none refuses to listen on non-loopback address %q: use 127.0.0.1 or configure authentication", c.Addr))
	}
	switch c.Engine {
	case engineLocal:
	case engineTemporal:
		errs = append(errs, c.Temporal.validate()...)
	default:
		errs = append(errs, fmt.Errorf("--engine must be %s or %s, not %q", engineLocal, engineTemporal, c.Engine))
	}
	if c.MaxSessionDuration < 0 {
		errs = append(errs, fmt.Errorf("--max-session-duration must not be negative, not %s (0 = none)", c.MaxSessionDuration))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout must not be negative, not %s", c.ShutdownTimeout))
	}
	if c.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--idle-timeout must be positive, not %s", c.IdleTimeout))
	}
	if c.DB == "" && c.PG.URL == "" && c.Engine == engineLocal {
		errs = append(errs, errors.New("--db must not be empty"))
	}
	if c.RetainFinishedFor < 0 {
		errs = append(errs, fmt.Errorf("--retain-finished-for must not be negative, not %s (0 = keep forever)", c.RetainFinishedFor))
	}
	if c.GCInterval <= 0 {
		errs = append(errs, fmt.Errorf("--gc-interval must be positive, not %s", c.GCInterval))
	}
	if c.TombstoneFor <= 0 {
		errs = append(errs, fmt.Errorf("--tombstone-for must be positive, not %s", c.TombstoneFor))
	}
	if c.CrashAfter != "" {
		if _, _, err := parseCrashAfter(c.CrashAfter); err != nil {
			errs = append(errs, err)
		}
	}
	if c.CheckpointHook != "" {
		if err := validateHookURL(c.CheckpointHook); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.Debug.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func parseServeFlags(args []string, e env) (*serveConfig, error) {
	c := &serveConfig{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	ef := newEnvFlags(fs, e)
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "listen address (HXD_ADDR)")
	ef.bind("addr", "HXD_ADDR")
	fs.StringVar(&c.DB, "db", "./hxd.db", "SQLite database file (HXD_DB)")
	ef.bind("db", "HXD_DB")
	fs.StringVar(&c.AgentsDir, "agents", "", "folder of agent YAML files (HXD_AGENTS)")
	ef.bind("agents", "HXD_AGENTS")
	fs.BoolVar(&c.Demo, "demo", false, "register the demo agents (HXD_DEMO)")
	ef.bind("demo", "HXD_DEMO")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json (HXD_LOG_FORMAT)")
	ef.bind("log-format", "HXD_LOG_FORMAT")
	fs.StringVar(&c.Auth, "auth", authNone, "authentication: none (loopback only) or oidc (HXD_AUTH)")
	ef.bind("auth", "HXD_AUTH")
	// The OIDC options hold no secret: their environment values may be
	// flag defaults.
	c.OIDC.register(fs, func(name, def string) string {
		if v := e.getenv(name); v != "" {
			return v
		}
		return def
	})
	fs.BoolVar(&c.ResumeInterrupted, "resume-interrupted", true, "resume runs left running at start-up (HXD_RESUME_INTERRUPTED)")
	ef.bind("resume-interrupted", "HXD_RESUME_INTERRUPTED")
	fs.DurationVar(&c.MaxSessionDuration, "max-session-duration", 0, "default deadline of one drive of a run, 0 = none")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "graceful shutdown bound")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 2*time.Minute, "close keep-alive connections idle that long")
	fs.StringVar(&c.WorkDir, "workdir", ".", "folder where demo tools write files (HXD_WORKDIR)")
	ef.bind("workdir", "HXD_WORKDIR")
	fs.StringVar(&c.CheckpointHook, "checkpoint-hook", "", "URL receiving a JSON POST {session_id, run_id, status, phase} at every checkpoint (HXD_CHECKPOINT_HOOK)")
	ef.bind("checkpoint-hook", "HXD_CHECKPOINT_HOOK")
	fs.DurationVar(&c.RetainFinishedFor, "retain-finished-for", 0, "delete sessions this long after their latest run completed or was cancelled; agents may set retention.finished_for; 0 = keep forever")
	fs.DurationVar(&c.GCInterval, "gc-interval", time.Hour, "how often the retention sweeper runs")
	fs.DurationVar(&c.TombstoneFor, "tombstone-for", hxruntime.DefaultTombstoneFor, "keep the tombstones of deleted sessions and runs (410 gone) this long")
	c.PG.register(fs, ef, true)
	fs.StringVar(&c.Engine, "engine", engineLocal, "engine: local (SQLite --db or PostgreSQL --database-url) or temporal (HXD_ENGINE)")
	ef.bind("engine", "HXD_ENGINE")
	c.Temporal.register(fs, ef)
	c.Debug.register(fs, ef)
	c.Bundle.register(fs, ef, true)
	registerOTel(fs, ef, &c.OTel, &c.OTelCaptureContent)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, &exitError{code: 0}
		}
		return nil, &exitError{code: 2, err: err}
	}
	if fs.NArg() > 0 {
		return nil, &exitError{code: 2, err: fmt.Errorf("serve takes no arguments, got %q", fs.Args())}
	}
	set, err := ef.apply()
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	c.CrashAfter = e.getenv("HXD_CRASH_AFTER")
	// resolve first: an explicit --db drops a database URL of the environment.
	if err := errors.Join(c.PG.resolve("serve", set, e, true, false), c.validate()); err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return c, nil
}

func newLogger(format string, e env) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(e.stderr, nil))
	}
	return slog.New(slog.NewTextHandler(e.stderr, nil))
}

func serve(ctx context.Context, args []string, e env) (err error) {
	cfg, err := parseServeFlags(args, e)
	if err != nil {
		return err
	}
	log := newLogger(cfg.LogFormat, e)
	// First: the spans still queued are flushed last, after everything
	// below stopped.
	tel, log, stopOTel, err := setupOTel(ctx, cfg.OTel, log)
	if err != nil {
		return err
	}
	defer stopOTel()
	if tel.Enabled() {
		cfg.tracerProvider = tel.TracerProvider()
		cfg.Temporal.tracerProvider = tel.TracerProvider()
		cfg.PG.tracerProvider = tel.TracerProvider()
	}
	auth, err := newAuthenticator(ctx, cfg.Auth, cfg.OIDC, log)
	if err != nil {
		return &exitError{code: 2, err: err}
	}

	// Models are called where runs are driven: here with the local engine,
	// by `hxd worker` with Temporal, so only there must their keys be set.
	keys := e.lookupEnv
	if cfg.Engine == engineTemporal {
		keys = nil
	}
	registry, nAgents, err := loadAgents(cfg.Demo, cfg.AgentsDir, keys)
	if err != nil {
		return err
	}

	// Listen before opening anything: an address that is taken or wrong
	// fails here, without creating or migrating a database.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer func() { _ = ln.Close() }() // after a shutdown, a no-op
	dbg, err := startDebug(ctx, cfg.Debug, log, e.onDebugListen)
	if err != nil {
		return err
	}
	defer dbg.close()
	sqliteDB := ""
	if cfg.PG.URL == "" && cfg.Engine == engineLocal {
		sqliteDB = cfg.DB
	}
	if cfg.bundleSigner, cfg.bundleKeys, err = cfg.Bundle.load(sqliteDB); err != nil {
		return &exitError{code: 2, err: err}
	}
	log.Info("bundle signing key", "kid", cfg.bundleSigner.Kid(), "trusted_keys", cfg.bundleKeys.Len())

	if cfg.Engine == engineTemporal {
		return serveTemporal(ctx, cfg, ln, e, log, auth, registry, nAgents)
	}
	if cfg.Demo {
		n, err := registerMCPDemo(registry)
		if err != nil {
			return err
		}
		nAgents += n
	}
	store, err := openStore(ctx, cfg.PG, cfg.DB, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	// One MCP manager per process; closed (its children waited for) after
	// the runtime stopped, so no run calls a server any more.
	mcpm := mcp.NewManager(mcp.Options{Logger: log, LookupEnvFunc: e.lookupEnv})
	defer func() {
		if cerr := mcpm.Close(); cerr != nil {
			log.Warn("close MCP connections", "error", cerr)
		}
	}()

	rtCfg := hxruntime.Config{
		Store: store, Agents: registry, Logger: log,
		ToolOptions:        tool.Options{HTTPClient: &http.Client{}, WorkDir: cfg.WorkDir},
		MaxSessionDuration: cfg.MaxSessionDuration,
		MCP:                mcpm,
	}
	store.wire(&rtCfg)
	rtCfg.ModelOptions.LookupEnvFunc = e.lookupEnv
	if cfg.CrashAfter != "" {
		rtCfg.AfterCommitFunc = crashAfter(cfg.CrashAfter, log, e.exit)
	}
	// The hook queues from the first commit and delivers once started.
	var hook *checkpointHook
	if cfg.CheckpointHook != "" {
		hook = newCheckpointHook(hookConfig{URL: cfg.CheckpointHook, Logger: log})
		rtCfg.CheckpointFunc = hook.Notify
	}
	// Runs make spans under --otel (nil: off) and carry payloads in them
	// only with --otel-capture-content.
	rtCfg.TracerProvider, rtCfg.CaptureContent = cfg.tracerProvider, cfg.OTelCaptureContent
	rt, err := hxruntime.New(rtCfg)
	if err != nil {
		return err
	}

	gcm := newGCMetrics()
	api := newAPIServer(cfg, ln, rt, log, auth, gcm.collectors()...)
	if hook != nil {
		if err := hook.Start(ctx); err != nil {
			return fmt.Errorf("start checkpoint hook: %w", err)
		}
	}
	// Interrupted runs are resumed before the first request is served, so
	// a client never races start-up recovery.
	if cfg.ResumeInterrupted {
		n, err := rt.ResumeInterrupted(ctx)
		if err != nil {
			log.ErrorContext(ctx, "resume interrupted runs", "error", err)
		}
		if n > 0 {
			log.InfoContext(ctx, "resumed interrupted runs", "count", n)
		}
	}
	// PostgreSQL: the reaper takes over runs of dead processes, and event
	// streams wake on other processes' commits.
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	store.start(bgCtx, rt, log)
	startSweeper(bgCtx, cfg.GCInterval, hxruntime.GCOptions{
		Store: store.Store, Agents: registry, Logger: log,
		RetainFinishedFor: cfg.RetainFinishedFor, TombstoneFor: cfg.TombstoneFor,
		AfterSessionFunc: gcCrashAfter(cfg.CrashAfter, log, e.exit),
	}, gcm, log)
	api.serve(ctx, e, store.desc, nAgents)

	if err := api.wait(ctx); err != nil {
		_ = rt.Stop(context.Background())
		if hook != nil {
			hctx, hcancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			_ = hook.Stop(hctx)
			hcancel()
		}
		return err
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	api.shutdown(sctx)
	if err := rt.Stop(sctx); err != nil {
		log.Warn("runtime stop", "error", err)
	}
	// Last: the runs' final checkpoints are queued by now.
	if hook != nil {
		if err := hook.Stop(sctx); err != nil {
			log.Warn("checkpoint hook stop", "error", err)
		}
	}
	return nil
}

// loadAgents returns the registry of the agents of --demo and --agents
// (demo agents first) and how many there are. With lookupEnv, a file whose
// api_key_env names a variable lookupEnv reports unset is refused; nil
// skips that check, for a process that never calls models.
func loadAgents(demo bool, dir string, lookupEnv func(string) (string, bool)) (*agent.Registry, int, error) {
	registry := agent.NewRegistry()
	var defs []*agent.Definition
	if demo {
		defs = append(defs, agent.Demo()...)
	}
	if dir != "" {
		taken := map[agent.Ref]string{}
		for _, d := range defs {
			taken[d.Ref()] = "--demo"
		}
		loaded, err := agent.LoadDirWith(dir, agent.LoadOptions{Taken: taken, LookupEnv: lookupEnv})
		if err != nil {
			return nil, 0, fmt.Errorf("load agents: %w", err)
		}
		defs = append(defs, loaded...)
	}
	for _, d := range defs {
		if err := registry.Register(d); err != nil {
			return nil, 0, fmt.Errorf("register agents: %w", err)
		}
	}
	return registry, len(defs), nil
}

// apiServer is the HTTP API of `hxd serve` (either engine) on its listener.
type apiServer struct {
	ln   net.Listener
	srv  *http.Server
	log  *slog.Logger
	errc chan error
	// textLog: the log is text, so the console line may be plain text too.
	textLog bool
}

// newAPIServer is the HTTP API over svc (with Go and process metrics, and
// extra ones) on
// ln; nothing is served before serve. Request headers must arrive within
// 10 s, and a keep-alive connection closes after cfg.IdleTimeout without
// a request.
func newAPIServer(cfg *serveConfig, ln net.Listener, svc hxhttp.Service, log *slog.Logger, auth hxhttp.Authenticator, extra ...prometheus.Collector) *apiServer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	handler := hxhttp.New(hxhttp.Config{Service: svc, Logger: log, Version: version, Registry: reg, Authenticator: auth,
		Console: ui.Handler(consoleConfig(cfg)), BundleSigner: cfg.bundleSigner, BundleKeys: cfg.bundleKeys,
		TracerProvider: cfg.tracerProvider, Propagator: telemetry.Propagator()})
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return &apiServer{ln: ln, srv: srv, log: log, errc: make(chan error, 1), textLog: cfg.LogFormat != "json"}
}

// serve starts serving, logs where (storeDesc: what backs it) and tells
// e.onListen.
func (a *apiServer) serve(ctx context.Context, e env, storeDesc string, nAgents int) {
	go func() { a.errc <- a.srv.Serve(a.ln) }()
	addr := a.ln.Addr().String()
	a.log.InfoContext(ctx, "hxd listening", "addr", "http://"+addr, "store", storeDesc, "version", version, "agents", nAgents,
		"console", consoleURL(addr))
	if a.textLog {
		// The line a person running `make run` looks for.
		fmt.Fprintf(e.stderr, "console: %s\n", consoleURL(addr))
	}
	if e.onListen != nil {
		e.onListen(addr)
	}
}

// wait returns nil when ctx ends, or the error serving stopped with.
func (a *apiServer) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-a.errc:
		return fmt.Errorf("serve: %w", err)
	}
}

// shutdown stops the server gracefully within ctx (a failure is logged).
func (a *apiServer) shutdown(ctx context.Context) {
	if err := a.srv.Shutdown(ctx); err != nil {
		a.log.Warn("http shutdown", "error", err)
	}
}

// parseCrashAfter parses HXD_CRASH_AFTER=<kind>[:<n>].
func parseCrashAfter(v string) (journal.Kind, int, error) {
	kind, nStr, hasN := strings.Cut(v, ":")
	n := 1
	if hasN {
		var err error
		if n, err = strconv.Atoi(nStr); err != nil || n < 1 {
			return "", 0, fmt.Errorf("HXD_CRASH_AFTER %q: count must be a positive integer", v)
		}
	}
	if kind == gcCrashKind {
		return journal.Kind(kind), n, nil // the sweeper's (gc_cmd.go)
	}
	if !journal.Kind(kind).Valid() {
		return "", 0, fmt.Errorf("HXD_CRASH_AFTER %q: unknown boundary kind", v)
	}
	return journal.Kind(kind), n, nil
}

// crashAfter returns the testing hook that exits the process with code 42
// right after the n-th commit holding a boundary of the kind.
func crashAfter(v string, log *slog.Logger, exit func(int)) func([]journal.Kind) {
	kind, n, _ := parseCrashAfter(v)
	var mu sync.Mutex
	seen := 0
	return func(kinds []journal.Kind) {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(kinds, kind) {
			return
		}
		// One commit counts once, however many records of the kind it holds.
		seen++
		if seen == n {
			log.Warn("HXD_CRASH_AFTER: exiting after boundary commit", "kind", kind, "n", n)
			exit(42)
		}
	}
}
