package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// commitDelayMicros is the commit_delay (µs) of the "commit-delay"
// variant of BenchmarkGroupCommit; commit_siblings stays at its default 5.
const commitDelayMicros = 100

// BenchmarkGroupCommit asks whether the group committer pays for itself:
// n = 1, 8 and 64 runs commit typical recorded boundaries under their
// leases (see benchWorker.boundary) on one Store whose pool holds n
// connections (at least 2), in three ways interleaved round by round in
// the same run:
//
//   - group: the group committer (Config.CommitGroups, default 2), a
//     second group starting once 8 boundaries wait (minExtraGroup);
//   - plain: every Commit its own transaction on its caller's goroutine,
//     the pool sized for the concurrency;
//   - commit-delay: plain, with PostgreSQL's own group commit
//     (commit_delay = 100µs, commit_siblings = 5) set on every connection;
//   - group-min2: group, a second group starting once 2 wait.
//
// Metrics: boundaries/s of each, and group-x-plain, delay-x-plain and
// min2-x-plain (ratios to plain).
func BenchmarkGroupCommit(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			cfg := testConfig(b)
			cfg.PoolSize = max(2, n)
			cfg.Logger = nil
			cfg.LeaseDuration = time.Hour // nothing renews the leases
			st := openStore(b, cfg)
			workers := benchWorkers(b, ctx, st, n)
			commit := func(w int) error { return st.Commit(ctx, workers[w].boundary()) }
			setDelay := func(micros int) {
				if err := st.ExecOnEveryConn(ctx, fmt.Sprintf("SET commit_delay = %d", micros)); err != nil {
					b.Fatal(err)
				}
			}
			variants := []struct {
				name      string
				ungrouped bool
				minExtra  int
				delay     int
			}{
				{"group", false, 8, 0},
				{"plain", true, 0, 0},
				{"commit-delay", true, 0, commitDelayMicros},
				{"group-min2", false, 2, 0},
			}
			times := make([]time.Duration, len(variants))
			run := func(i, per int) time.Duration {
				v := variants[i]
				st.SetUngrouped(v.ungrouped)
				if v.minExtra > 0 {
					st.SetMinExtraGroup(v.minExtra)
				}
				setDelay(v.delay)
				return inParallel(b, n, per, commit)
			}
			for i := range variants {
				run(i, 2) // warm up: connections, prepared statements
			}
			const per = 20
			total := 0
			for b.Loop() {
				for i := range variants {
					times[i] += run(i, per)
				}
				total += n * per
			}
			rate := make([]float64, len(variants))
			for i, v := range variants {
				rate[i] = float64(total) / times[i].Seconds()
				b.ReportMetric(rate[i], v.name+"-boundaries/s")
			}
			b.ReportMetric(rate[0]/rate[1], "group-x-plain")
			b.ReportMetric(rate[2]/rate[1], "delay-x-plain")
			b.ReportMetric(rate[3]/rate[1], "min2-x-plain")
		})
	}
}
