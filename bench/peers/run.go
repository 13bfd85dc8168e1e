package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// The systems compared on PostgreSQL (and SQLite), by name.
const (
	sysRaw          = "raw-commit"
	sysDBOS         = "dbos"
	sysHxdPGRec     = "hxd-pg-recorded"
	sysHxdPGUnrec   = "hxd-pg-unrecorded"
	sysHxdLiteRec   = "hxd-sqlite-recorded"
	sysHxdLiteUnrec = "hxd-sqlite-unrecorded"
	sysTemporalHxd  = "hxd-temporal"
	sysTemporalBare = "temporal-bare"
)

var allSystems = []string{sysRaw, sysDBOS, sysHxdPGRec, sysHxdPGUnrec, sysHxdLiteRec, sysHxdLiteUnrec, sysTemporalHxd, sysTemporalBare}

// effectsPerRun is what one hxd run of the benchmark agent makes: 11 model
// calls and 10 tool calls; DBOS and bare Temporal workflows do as many
// no-op steps or activities.
const (
	benchSteps    = 10
	effectsPerRun = 2*benchSteps + 1
)

// system is one thing measured: op does one unit of work (a run, a
// workflow, a commit) as worker w of a cell.
type system struct {
	name string
	// effects is how many effects one op makes.
	effects int
	// db, when set, is the PostgreSQL database whose xact_commit counts
	// the system's commits (a database of its own).
	db string
	op func(ctx context.Context, w int) error
	// prepare, when set, runs before a cell at concurrency c (pools, connections).
	prepare func(ctx context.Context, c int) error
	// profile, when set, takes a CPU profile of d into file while the cell runs.
	profile func(ctx context.Context, d time.Duration, file string) error
}

// cell is the measurement of one system at one concurrency.
type cell struct {
	System      string
	Concurrency int
	Ops         int
	Effects     int
	Elapsed     time.Duration
	Latencies   []time.Duration
	// Commits is the xact_commit delta of the system's database over its
	// slices, its background commits while idle between them taken out
	// (-1: not counted).
	Commits int64
	// Background is the system's commits/s while idle.
	Background float64
}

func (c *cell) add(o *cell) {
	c.Ops += o.Ops
	c.Effects += o.Effects
	c.Elapsed += o.Elapsed
	c.Latencies = append(c.Latencies, o.Latencies...)
}

// EffectsPerSec is effects over the time the workers ran.
func (c *cell) EffectsPerSec() float64 {
	if c.Elapsed <= 0 {
		return 0
	}
	return float64(c.Effects) / c.Elapsed.Seconds()
}

// Percentile of the op latencies (nearest rank).
func (c *cell) Percentile(p float64) time.Duration {
	if len(c.Latencies) == 0 {
		return 0
	}
	l := slices.Clone(c.Latencies)
	slices.Sort(l)
	i := int(math.Ceil(p/100*float64(len(l)))) - 1
	return l[max(0, min(i, len(l)-1))]
}

// CommitsPerEffect is -1 when commits were not counted.
func (c *cell) CommitsPerEffect() float64 {
	if c.Commits < 0 || c.Effects == 0 {
		return -1
	}
	return float64(c.Commits) / float64(c.Effects)
}

// Results is everything one run measured.
type Results struct {
	Started  time.Time
	Machine  machine
	Cells    []*cell // PostgreSQL/SQLite comparison, by concurrency then system
	Temporal []*cell // the Temporal comparison
	Notes    []string
}

// Cell returns the measurement of system at c, or nil.
func (r *Results) Cell(system string, c int) *cell {
	for _, x := range append(slices.Clone(r.Cells), r.Temporal...) {
		if x.System == system && x.Concurrency == c {
			return x
		}
	}
	return nil
}

// measure runs s at concurrency c for d: c workers each repeat op until d
// has passed since the start; the elapsed time ends when the last op ends.
func measure(ctx context.Context, s *system, c int, d time.Duration) (*cell, error) {
	var (
		mu   sync.Mutex
		lats []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			var mine []time.Duration
			for time.Since(start) < d && ctx.Err() == nil {
				t0 := time.Now()
				if err := s.op(ctx, w); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					cancel()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s at c=%d: %w", s.name, c, errors.Join(errs...))
	}
	return &cell{System: s.name, Concurrency: c, Ops: len(lats), Effects: len(lats) * s.effects,
		Elapsed: elapsed, Latencies: lats, Commits: -1}, nil
}

// Run measures every selected system and prints a table per concurrency
// to out.
func Run(ctx context.Context, cfg *config, log *slog.Logger, out io.Writer) (*Results, error) {
	res := &Results{Started: time.Now().UTC()}
	res.Machine = describeMachine(ctx, cfg)
	want := func(name string) bool { return cfg.Systems == nil || cfg.Systems[name] }
	needHxd := false
	for _, n := range []string{sysHxdPGRec, sysHxdPGUnrec, sysHxdLiteRec, sysHxdLiteUnrec, sysTemporalHxd} {
		needHxd = needHxd || want(n)
	}
	env, err := newEnv(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	defer env.close()
	if needHxd {
		if err := env.buildHxd(ctx); err != nil {
			return nil, err
		}
	}
	res.Machine.PostgreSQL = env.pgVersion

	// The PostgreSQL/SQLite systems.
	var systems []*system
	add := func(name string, mk func() (*system, error)) error {
		if !want(name) {
			return nil
		}
		s, err := mk()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		systems = append(systems, s)
		return nil
	}
	maxC := slices.Max(cfg.Concurrency)
	if err := errors.Join(
		add(sysRaw, func() (*system, error) { return env.rawSystem(ctx) }),
		add(sysDBOS, func() (*system, error) { return env.dbosSystem(ctx, maxC) }),
		add(sysHxdPGRec, func() (*system, error) { return env.hxdSystem(ctx, sysHxdPGRec, true, true, maxC) }),
		add(sysHxdPGUnrec, func() (*system, error) { return env.hxdSystem(ctx, sysHxdPGUnrec, true, false, maxC) }),
		add(sysHxdLiteRec, func() (*system, error) { return env.hxdSystem(ctx, sysHxdLiteRec, false, true, maxC) }),
		add(sysHxdLiteUnrec, func() (*system, error) { return env.hxdSystem(ctx, sysHxdLiteUnrec, false, false, maxC) }),
	); err != nil {
		return nil, err
	}
	if cfg.BaseHxd != "" {
		s, err := env.hxdSystemBin(ctx, cfg.BaseHxd, sysHxdPGRec+"@base", true, true, maxC)
		if err != nil {
			return nil, fmt.Errorf("-base-hxd: %w", err)
		}
		systems = append(systems, s)
	}
	// Warm up every system once (connections, prepared statements, caches).
	for _, s := range systems {
		if s.prepare != nil {
			if err := s.prepare(ctx, 1); err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
		}
		if _, err := measure(ctx, s, 1, 0); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	cells, err := runInterleaved(ctx, cfg, env, log, systems, cfg.Concurrency)
	if err != nil {
		return nil, err
	}
	res.Cells = cells
	if len(res.Cells) > 0 {
		printTable(out, res.Cells, cfg.Concurrency, sysDBOS)
	}

	if cfg.Temporal && (want(sysTemporalHxd) || want(sysTemporalBare)) {
		tcells, note, err := env.runTemporal(ctx, cfg, log, want)
		if err != nil {
			return nil, fmt.Errorf("temporal: %w", err)
		}
		if note != "" {
			res.Notes = append(res.Notes, note)
			log.Info(note)
		}
		res.Temporal = tcells
		if len(tcells) > 0 {
			printTable(out, tcells, []int{cfg.TemporalConcurrency}, sysTemporalBare)
		}
	}
	return res, nil
}

// statsFlush bounds how late PostgreSQL (15+) counts a backend's commits
// in pg_stat_database: a busy backend reports at most once a second, an
// idle one within 10 s (PGSTAT_IDLE_INTERVAL).
const statsFlush = 11 * time.Second

// idleWindow is how long each system's background commits are counted
// while no op runs.
const idleWindow = 10 * time.Second

// runInterleaved measures systems at each concurrency: for each level,
// cfg.Rounds rounds, each running every system for Duration/Rounds in
// turn. Commits are counted per system database: xact_commit is read
// before each of its slices and once more at the end, each time at least
// statsFlush after the system's previous slice ended, so that a slice's
// count is every commit since its start, its system's background work
// until its next slice included.
func runInterleaved(ctx context.Context, cfg *config, env *env, log *slog.Logger, systems []*system, levels []int) ([]*cell, error) {
	type key struct {
		sys string
		c   int
	}
	cells := map[key]*cell{}
	var order []key
	// commits: each slice's delta is known when the next reading of its
	// database is taken; idleOf is the part of that window the system sat
	// idle (other systems' slices), whose background commits are taken
	// out at the end.
	type pending struct {
		k      key
		before int64
		at     time.Time
		busy   time.Duration
	}
	last := map[string]*pending{}
	commitsOf := map[key]int64{}
	idleOf := map[key]time.Duration{}
	ended := map[string]time.Time{} // when the system's last slice ended
	read := func(s *system, k key, busy time.Duration) error {
		if s.db == "" {
			return nil
		}
		// The previous slice's backends may not have reported yet: wait
		// until statsFlush has passed since it ended (in a default run
		// the other systems' slices take longer than that anyway).
		if t, ok := ended[s.db]; ok {
			select {
			case <-time.After(time.Until(t.Add(statsFlush))):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		n, err := env.xactCommit(ctx, s.db)
		if err != nil {
			return err
		}
		now := time.Now()
		if p := last[s.db]; p != nil {
			commitsOf[p.k] += n - p.before
			idleOf[p.k] += now.Sub(p.at) - p.busy
		}
		last[s.db] = &pending{k: k, before: n, at: now}
		return nil
	}
	slice := cfg.Duration / time.Duration(cfg.Rounds)
	for _, c := range levels {
		for _, s := range systems {
			if s.prepare != nil {
				if err := s.prepare(ctx, c); err != nil {
					return nil, fmt.Errorf("%s: %w", s.name, err)
				}
			}
		}
		for round := range cfg.Rounds {
			for _, s := range systems {
				k := key{s.name, c}
				if err := read(s, k, 0); err != nil {
					return nil, err
				}
				var prof chan error
				if cfg.Profile != "" && c == levels[0] && round == 0 && s.profile != nil {
					prof = make(chan error, 1)
					file := filepath.Join(cfg.Profile, fmt.Sprintf("%s.c%d.pprof", s.name, c))
					go func() { prof <- s.profile(ctx, slice, file) }()
				}
				got, err := measure(ctx, s, c, slice)
				if err != nil {
					return nil, err
				}
				if s.db != "" {
					ended[s.db] = time.Now()
					last[s.db].busy = got.Elapsed
				}
				if prof != nil {
					if err := <-prof; err != nil {
						log.Warn("profile", "system", s.name, "error", err)
					}
				}
				if cells[k] == nil {
					cells[k] = &cell{System: s.name, Concurrency: c, Commits: -1}
					order = append(order, k)
				}
				cells[k].add(got)
				log.Info("cell", "system", s.name, "c", c, "round", round+1, "effects/s", fmt.Sprintf("%.0f", got.EffectsPerSec()),
					"p50", got.Percentile(50).Round(10*time.Microsecond))
			}
		}
	}
	// The last slices' commits (read waits out PostgreSQL's statistics
	// flush), then each system's background rate while idle, over
	// idleWindow, to take out of the windows' idle parts.
	background := map[string]float64{}
	if len(last) > 0 {
		log.Info("waiting for PostgreSQL to report every backend's commits, then counting idle background commits",
			"flush", statsFlush, "idle_window", idleWindow)
		start := map[string]int64{}
		for _, s := range systems {
			if s.db != "" && last[s.db] != nil {
				if err := read(s, key{}, 0); err != nil {
					return nil, err
				}
				start[s.db] = last[s.db].before
			}
		}
		t0 := time.Now()
		select {
		case <-time.After(idleWindow):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		for db, n0 := range start {
			n1, err := env.xactCommit(ctx, db)
			if err != nil {
				return nil, err
			}
			background[db] = float64(n1-n0) / time.Since(t0).Seconds()
		}
	}
	out := make([]*cell, 0, len(order))
	for _, k := range order {
		c := cells[k]
		if n, ok := commitsOf[k]; ok {
			var db string
			for _, s := range systems {
				if s.name == k.sys {
					db = s.db
				}
			}
			c.Background = background[db]
			c.Commits = max(0, n-int64(background[db]*idleOf[k].Seconds()+0.5))
		}
		out = append(out, c)
	}
	return out, nil
}

// printTable writes one line per cell, with the ratio of effects/s to
// the baseline system at the same concurrency.
func printTable(out io.Writer, cells []*cell, levels []int, baseline string) {
	fmt.Fprintf(out, "\n%-24s %4s %12s %10s %10s %14s %8s\n", "system", "c", "effects/s", "p50", "p99", "commits/effect", "x-"+baseline)
	for _, c := range levels {
		var base *cell
		for _, x := range cells {
			if x.System == baseline && x.Concurrency == c {
				base = x
			}
		}
		for _, x := range cells {
			if x.Concurrency != c {
				continue
			}
			ratio := "-"
			if base != nil && base.EffectsPerSec() > 0 {
				ratio = fmt.Sprintf("%.2f", x.EffectsPerSec()/base.EffectsPerSec())
			}
			fmt.Fprintf(out, "%-24s %4d %12.0f %10s %10s %14s %8s\n", x.System, c, x.EffectsPerSec(),
				fmtDur(x.Percentile(50)), fmtDur(x.Percentile(99)), fmtCommits(x.CommitsPerEffect()), ratio)
		}
	}
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
}

func fmtCommits(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

// tempDir is a folder removed by env.close.
func tempDir() (string, error) { return os.MkdirTemp("", "hxd-peers-") }
