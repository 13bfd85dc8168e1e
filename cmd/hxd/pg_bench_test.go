package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"hxd/internal/agent"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/storetest"
	"hxd/internal/store/postgres"
	"hxd/internal/tool"
)

// benchTenStep is a recorded agent of 10 scripted steps, each calling a
// builtin tool that answers at once.
func benchTenStep() *agent.Definition {
	var script []model.ScriptStep
	for i := 1; i <= 10; i++ {
		script = append(script, model.ScriptStep{ToolCalls: []model.ToolCall{{ID: fmt.Sprintf("c%d", i), Name: "count", Input: json.RawMessage(`{}`)}}})
	}
	script = append(script, model.ScriptStep{Text: "done"})
	return &agent.Definition{
		Name: "ten", Version: "v1", MaxIterations: 50,
		Model: model.Config{Provider: "scripted", Script: script},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"}}},
	}
}

// BenchmarkPostgresRuns (make bench, issue 6): recorded-run throughput
// on PostgreSQL against the raw commit rate of the same database, in the
// same run, at the same concurrency c = 1, 8 and 64. Each iteration first
// has c workers each drive runsPerWorker recorded 10-step runs through
// the runtime (sessions, leases, boundaries: 23 boundary commits per run,
// the run's insert included), then c raw committers — each on its own
// connection, so c commits are really in flight — each commit as many
// single-row autocommit INSERTs as one worker made boundary commits. Metrics: commits/s (hxd boundary
// commits), runs/s, raw-commits/s and ratio = commits/s ÷ raw-commits/s
// (the target is >= 0.8 at c = 64).
func BenchmarkPostgresRuns(b *testing.B) {
	dbURL, schema := testDatabaseTB(b)
	ctx := context.Background()
	require := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	require(postgres.Migrate(ctx, postgres.Config{URL: dbURL, Schema: schema}))
	st, err := postgres.Open(ctx, postgres.Config{URL: dbURL, Schema: schema, PoolSize: 16, LeaseDuration: 30 * time.Second})
	require(err)
	b.Cleanup(func() { _ = st.Close() })
	cs := &storetest.CountingStore{Store: st}
	reg := agent.NewRegistry("count")
	require(reg.Register(benchTenStep()))
	rt, err := hxruntime.New(hxruntime.Config{
		Store: cs, Agents: reg,
		ToolOptions: tool.Options{WorkDir: b.TempDir(), Builtins: map[string]tool.BuiltinFunc{
			"count": func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
				return tool.Outcome{Result: model.ToolResult{Content: json.RawMessage(`"ok"`)}}, nil
			},
		}},
		LeaseRenewEvery: 10 * time.Second,
	})
	require(err)
	b.Cleanup(func() { _ = rt.Stop(context.Background()) })

	raw := pgx.Identifier{schema, "raw_commits"}.Sanitize()
	conn, err := pgx.Connect(ctx, dbURL)
	require(err)
	_, err = conn.Exec(ctx, `CREATE TABLE `+raw+` (id bigserial PRIMARY KEY, payload text NOT NULL)`)
	_ = conn.Close(ctx)
	require(err)

	const runsPerWorker = 2
	for _, c := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) {
			// c raw committers on connections of their own.
			conns := make([]*pgx.Conn, c)
			for i := range conns {
				conns[i], err = pgx.Connect(ctx, dbURL)
				require(err)
			}
			defer func() {
				for _, conn := range conns {
					_ = conn.Close(ctx)
				}
			}()
			parallel := func(work func(w int) error) time.Duration {
				var wg sync.WaitGroup
				errs := make(chan error, c)
				start := time.Now()
				for w := range c {
					wg.Go(func() {
						if err := work(w); err != nil {
							errs <- err
						}
					})
				}
				wg.Wait()
				d := time.Since(start)
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				return d
			}
			hxdRuns := func(int) error {
				for range runsPerWorker {
					if err := benchOneRun(ctx, rt); err != nil {
						return err
					}
				}
				return nil
			}
			var perWorker int
			rawInserts := func(w int) error {
				for range perWorker {
					if _, err := conns[w].Exec(ctx, `INSERT INTO `+raw+` (payload) VALUES ($1)`, "x"); err != nil {
						return err
					}
				}
				return nil
			}
			// Warm up both sides (prepared statements, connections).
			perWorker = 2
			parallel(hxdRuns)
			parallel(rawInserts)

			var hxdTime, rawTime time.Duration
			var hxdCommits, rawCommits int64
			for b.Loop() {
				before := cs.Commits.Load()
				hxdTime += parallel(hxdRuns)
				n := cs.Commits.Load() - before
				hxdCommits += n
				b.StopTimer()
				perWorker = int(n) / c
				rawTime += parallel(rawInserts)
				rawCommits += int64(perWorker * c)
				b.StartTimer()
			}
			hxdRate := float64(hxdCommits) / hxdTime.Seconds()
			rawRate := float64(rawCommits) / rawTime.Seconds()
			b.ReportMetric(hxdRate, "commits/s")
			b.ReportMetric(float64(b.N*c*runsPerWorker)/hxdTime.Seconds(), "runs/s")
			b.ReportMetric(rawRate, "raw-commits/s")
			b.ReportMetric(hxdRate/rawRate, "ratio")
		})
	}
}

func benchOneRun(ctx context.Context, rt *hxruntime.Runtime) error {
	rec := true
	sess, err := rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "ten", Version: "v1"}, Recording: &rec})
	if err != nil {
		return err
	}
	run, _, err := rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: json.RawMessage(`"go"`)})
	if err != nil {
		return err
	}
	res, err := rt.WaitRun(ctx, run.RunID, time.Minute)
	if err != nil {
		return err
	}
	if res.Status != hxruntime.StatusCompleted {
		return fmt.Errorf("run %s ended %s", run.RunID, res.Status)
	}
	return nil
}
