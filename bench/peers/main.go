// Command peers is `make bench-peers`: hxd over its HTTP API against DBOS
// Transact Go workflows and raw single-row commits on one PostgreSQL, in
// one run, interleaved, at several concurrencies; and hxd's Temporal
// engine against a bare Temporal workflow on the Temporal dev server. It
// prints effects/s, p50/p99 run latency and commits per effect, and
// writes docs/bench/peers.md and docs/bench/peers.png.
//
// It is a module of its own (bench/peers/go.mod) so that DBOS, gonum/plot
// and their dependencies never enter hxd's go.mod; it drives hxd only as a
// built binary (bin/hxd) over HTTP, as a user would.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// config is the command line of the harness.
type config struct {
	// Repo is hxd's repository root (where bin/hxd is built). Default: ../..
	Repo string
	// DatabaseURL is the PostgreSQL server; the harness creates and drops
	// databases of its own on it. Default: HXD_TEST_DATABASE_URL, else
	// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
	DatabaseURL string
	// Duration of one measured cell (one system at one concurrency).
	Duration time.Duration
	// Rounds splits each cell into that many slices, interleaved with the
	// other systems' slices. Default: 2.
	Rounds int
	// Concurrency levels of the PostgreSQL/SQLite comparison.
	Concurrency []int
	// Temporal runs the Temporal comparison (at TemporalConcurrency).
	Temporal            bool
	TemporalConcurrency int
	// TemporalDuration is the cell of the Temporal comparison (its runs
	// take seconds on the dev server). Default: 15s.
	TemporalDuration time.Duration
	// Systems, when set, keeps only the named systems (comma list).
	Systems map[string]bool
	// Out is the folder of peers.md and peers.png; empty writes nothing.
	Out string
	// Profile, when set, is a folder where a CPU profile of hxd (through
	// --debug-addr) is written for every hxd cell at the first concurrency.
	Profile string
	// Command is the command line, quoted in peers.md.
	Command string
	// RawConns caps the connections of the raw committers (they share
	// them beyond it). Default: 32.
	RawConns int
	// BaseHxd, when set, is another hxd binary (say, of a base commit)
	// measured as one more system, hxd-pg-recorded@base, beside bin/hxd.
	BaseHxd string
	// runID ends the names of the run's databases and task queues.
	runID string
}

func defaultDatabaseURL() string {
	if v := os.Getenv("HXD_TEST_DATABASE_URL"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.StringVar(&c.Repo, "repo", "../..", "hxd repository root (bin/hxd is built there)")
	fs.StringVar(&c.DatabaseURL, "database-url", defaultDatabaseURL(), "PostgreSQL server (HXD_TEST_DATABASE_URL); databases hxd_peers_* are created and dropped on it")
	fs.DurationVar(&c.Duration, "duration", 5*time.Second, "measured time per cell (one system at one concurrency)")
	fs.IntVar(&c.Rounds, "rounds", 2, "interleave the systems in this many slices of each cell (a system's slices must be 11 s apart for its commits to be counted: shorter gaps wait)")
	conc := fs.String("c", "1,8,64", "concurrency levels (comma list)")
	fs.BoolVar(&c.Temporal, "temporal", true, "also compare the Temporal engine with a bare Temporal workflow (needs the Temporal CLI and versitygw of scripts/build-*.sh)")
	fs.IntVar(&c.TemporalConcurrency, "temporal-c", 8, "concurrency of the Temporal comparison")
	fs.DurationVar(&c.TemporalDuration, "temporal-duration", 15*time.Second, "measured time per cell of the Temporal comparison")
	systems := fs.String("systems", "", "only these systems (comma list of "+strings.Join(allSystems, ",")+"); default all")
	fs.StringVar(&c.Out, "out", "", "write peers.md and peers.png into this folder (make bench-peers: docs/bench)")
	fs.StringVar(&c.Profile, "profile", "", "write a CPU profile of hxd (via --debug-addr) for each hxd cell at the first concurrency of -c into this folder")
	fs.StringVar(&c.BaseHxd, "base-hxd", "", "also measure this hxd binary, PostgreSQL, recorded, as "+sysHxdPGRec+"@base (before/after in one run)")
	fs.IntVar(&c.RawConns, "raw-conns", 32, "at most this many connections for the raw commits (PostgreSQL's max_connections is shared with hxd's and DBOS's pools)")
	quick := fs.Bool("quick", false, "smoke run: 1s cells at c=1,8, Temporal off")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *quick {
		c.Duration, *conc, c.Temporal = time.Second, "1,8", false
	}
	for _, f := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-c %q: want positive integers", *conc)
		}
		c.Concurrency = append(c.Concurrency, n)
	}
	if *systems != "" {
		c.Systems = map[string]bool{}
		for _, s := range strings.Split(*systems, ",") {
			c.Systems[strings.TrimSpace(s)] = true
		}
	}
	if c.Rounds < 1 || c.Duration <= 0 || c.RawConns < 1 {
		return nil, errors.New("-rounds, -duration and -raw-conns must be positive")
	}
	repo, err := filepath.Abs(c.Repo)
	if err != nil {
		return nil, err
	}
	c.Repo = repo
	if _, err := os.Stat(filepath.Join(repo, "cmd", "hxd")); err != nil {
		return nil, fmt.Errorf("-repo %s is not hxd's repository: %w", repo, err)
	}
	c.Command = "go run . " + strings.Join(args, " ")
	c.runID = randomHex(4)
	return c, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
	res, err := Run(ctx, cfg, log, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
	if cfg.Out != "" {
		if err := writeReport(cfg, res); err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
		log.Info("wrote", "md", filepath.Join(cfg.Out, "peers.md"), "png", filepath.Join(cfg.Out, "peers.png"))
	}
}
