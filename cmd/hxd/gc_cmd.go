package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	hxruntime "hxd/internal/runtime"
)

const gcUsage = `Usage: hxd gc (--db F | --database-url URL [--schema S]) [--dry-run] [--older-than D] [--json]

Deletes the sessions whose latest run completed or was cancelled longer ago
than their retention, with their runs, steps, events, journal, snapshots
and approvals, then the artifacts no session references, then expired
tombstones. It takes the session locks and leases the runtime takes, so it
may run beside serving processes. Retention: --older-than, else the
agent's retention.finished_for (--agents), else --retain-finished-for;
without any, nothing is deleted. Reports counts and bytes (text or --json);
--dry-run reports what a sweep would delete now (sessions, runs, records,
events, bytes, artifacts) and deletes nothing. The Temporal engine has no
database for gc to open: there, hxd serve --engine temporal sweeps.

`

// gcConfig is what `hxd gc` reads from flags.
type gcConfig struct {
	DB                string
	PG                pgOptions
	DryRun            bool
	OlderThan         time.Duration
	RetainFinishedFor time.Duration
	TombstoneFor      time.Duration
	AgentsDir         string
	JSON              bool
	// CrashAfter is HXD_CRASH_AFTER (gc.session[:n] applies).
	CrashAfter string
}

func parseGCFlags(args []string, e env) (*gcConfig, error) {
	c := &gcConfig{CrashAfter: e.getenv("HXD_CRASH_AFTER")}
	flags := flag.NewFlagSet("gc", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	flags.Usage = func() { fmt.Fprint(e.stderr, gcUsage); flags.PrintDefaults() }
	flags.StringVar(&c.DB, "db", "", "SQLite database file (this or --database-url)")
	ef := newEnvFlags(flags, e)
	c.PG.register(flags, ef, false)
	flags.BoolVar(&c.DryRun, "dry-run", false, "report what would be deleted (counts, bytes, artifacts); delete nothing")
	flags.DurationVar(&c.OlderThan, "older-than", 0, "delete sessions finished longer ago than this, whatever their policy")
	flags.DurationVar(&c.RetainFinishedFor, "retain-finished-for", 0, "server default retention of finished sessions (0 = keep forever)")
	flags.DurationVar(&c.TombstoneFor, "tombstone-for", hxruntime.DefaultTombstoneFor, "keep the tombstones of deleted sessions and runs this long")
	flags.StringVar(&c.AgentsDir, "agents", "", "folder of agent files, for their retention.finished_for")
	flags.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, &exitError{code: 0}
		}
		return nil, &exitError{code: 2, err: err}
	}
	if flags.NArg() > 0 {
		return nil, &exitError{code: 2, err: fmt.Errorf("gc takes no arguments, got %q", flags.Args())}
	}
	set, err := ef.apply()
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	if err := c.PG.resolve("gc", set, e, false, false); err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	var errs []error
	if set["schema"] && c.PG.URL == "" {
		errs = append(errs, errors.New("--schema needs --database-url"))
	}
	if c.DB == "" && c.PG.URL == "" {
		errs = append(errs, errors.New("gc needs --db or --database-url"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--older-than", c.OlderThan}, {"--retain-finished-for", c.RetainFinishedFor}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, not %s", d.name, d.v))
		}
	}
	if c.TombstoneFor <= 0 {
		errs = append(errs, fmt.Errorf("--tombstone-for must be positive, not %s", c.TombstoneFor))
	}
	if _, err := parseGCCrash(c.CrashAfter); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return c, nil
}

// gcCmd is `hxd gc`.
func gcCmd(ctx context.Context, args []string, e env) (err error) {
	cfg, err := parseGCFlags(args, e)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	registry, _, err := loadAgents(false, cfg.AgentsDir, nil)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	store, err := openExportStore(ctx, &exportConfig{DB: cfg.DB, PG: cfg.PG}, log)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	rep, gcErr := hxruntime.GC(ctx, hxruntime.GCOptions{
		Store: store, Agents: registry, Logger: log,
		RetainFinishedFor: cfg.RetainFinishedFor, OlderThan: cfg.OlderThan, TombstoneFor: cfg.TombstoneFor,
		DryRun: cfg.DryRun, AfterSessionFunc: gcCrashAfter(cfg.CrashAfter, log, e.exit),
	})
	if rep != nil {
		if err := printGCReport(e, rep, cfg.JSON); err != nil {
			return errors.Join(gcErr, err)
		}
	}
	if gcErr != nil {
		return &exitError{code: 1, err: gcErr}
	}
	return nil
}

// printGCReport writes rep to stdout as text or JSON.
func printGCReport(e env, rep *hxruntime.GCReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		return enc.Encode(rep)
	}
	verb := "deleted"
	if rep.DryRun {
		verb = "would delete"
	}
	_, err := fmt.Fprintf(e.stdout, "%s %d sessions (%d runs, %d records, %d events, %d bytes), %d artifacts (%d bytes); %d busy sessions skipped; %d tombstones purged, %d kept\n",
		verb, rep.Sessions, rep.Runs, rep.Records, rep.Events, rep.Bytes, rep.Artifacts, rep.ArtifactBytes, rep.Busy, rep.TombstonesPurged, rep.Tombstones)
	return err
}

// gcCrashKind is the HXD_CRASH_AFTER point of gc: after a session's delete
// committed.
const gcCrashKind = "gc.session"

// parseGCCrash returns n of HXD_CRASH_AFTER=gc.session[:n], 0 when v names
// another point (or none).
func parseGCCrash(v string) (int, error) {
	kind, nStr, hasN := strings.Cut(v, ":")
	if kind != gcCrashKind {
		return 0, nil
	}
	if !hasN {
		return 1, nil
	}
	n, err := strconv.Atoi(nStr)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("HXD_CRASH_AFTER %q: count must be a positive integer", v)
	}
	return n, nil
}

// gcCrashAfter returns the testing hook that exits with code 42 right
// after the n-th session gc deleted, or nil.
func gcCrashAfter(v string, log *slog.Logger, exit func(int)) func() {
	n, _ := parseGCCrash(v)
	if n == 0 {
		return nil
	}
	var (
		mu   sync.Mutex
		seen int
	)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		seen++
		if seen == n {
			log.Warn("HXD_CRASH_AFTER: exiting after a gc session delete", "n", n)
			exit(42)
		}
	}
}

// gcMetrics are the sweeper's Prometheus metrics.
type gcMetrics struct {
	sessions, artifacts, bytes prometheus.Counter
	tombstones                 prometheus.Gauge
}

func newGCMetrics() *gcMetrics {
	return &gcMetrics{
		sessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hxd_gc_deleted_sessions_total", Help: "Sessions deleted by retention.",
		}),
		artifacts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hxd_gc_deleted_artifacts_total", Help: "Artifacts deleted by retention (no session referenced them).",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hxd_gc_deleted_bytes_total", Help: "Journal, event and artifact bytes deleted by retention.",
		}),
		tombstones: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hxd_gc_tombstones", Help: "Tombstones of deleted sessions and runs kept.",
		}),
	}
}

// collectors returns the metrics to register.
func (m *gcMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.sessions, m.artifacts, m.bytes, m.tombstones}
}

// observe adds a sweep's report.
func (m *gcMetrics) observe(rep *hxruntime.GCReport) {
	m.sessions.Add(float64(rep.Sessions))
	m.artifacts.Add(float64(rep.Artifacts))
	m.bytes.Add(float64(rep.Bytes + rep.ArtifactBytes))
	m.tombstones.Set(float64(rep.Tombstones))
}

// startSweeper runs gc at once and then every interval until ctx ends,
// logging what each sweep deleted; opts.Store must keep tombstones.
func startSweeper(ctx context.Context, interval time.Duration, opts hxruntime.GCOptions, m *gcMetrics, log *slog.Logger) {
	runSweeper(ctx, interval, func(ctx context.Context) (*hxruntime.GCReport, error) {
		return hxruntime.GC(ctx, opts)
	}, m, log)
}

// runSweeper runs gcFunc at once and then every interval until ctx ends,
// counting each report in m and logging what it deleted.
func runSweeper(ctx context.Context, interval time.Duration, gcFunc func(context.Context) (*hxruntime.GCReport, error), m *gcMetrics, log *slog.Logger) {
	sweep := func() {
		rep, err := gcFunc(ctx)
		if rep != nil {
			m.observe(rep)
		}
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "gc sweep failed", "error", err)
			}
			return
		}
		if rep.Sessions > 0 || rep.Artifacts > 0 || rep.TombstonesPurged > 0 {
			log.InfoContext(ctx, "gc sweep", "sessions", rep.Sessions, "runs", rep.Runs, "bytes", rep.Bytes,
				"artifacts", rep.Artifacts, "artifact_bytes", rep.ArtifactBytes, "busy", rep.Busy,
				"tombstones_purged", rep.TombstonesPurged, "tombstones", rep.Tombstones)
		}
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		sweep()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sweep()
			}
		}
	}()
}
