package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"hxd/internal/agent"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/postgres"
	"hxd/internal/tool"
)

// benchCountingStore counts boundary commits.
type benchCountingStore struct {
	rtstore.Store
	commits atomic.Int64
}

func (s *benchCountingStore) Commit(ctx context.Context, c *rtstore.Commit) error {
	s.commits.Add(1)
	return s.Store.Commit(ctx, c)
}

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

// BenchmarkPostgresRuns (make bench, issue 6): recorded 10-step runs on
// PostgreSQL with 1, 8 and 64 concurrent runs, against raw single-row
// autocommit INSERTs/s with as many concurrent writers on the same
// database in the same run. Metrics: commits/s (boundary commits of hxd,
// or raw INSERTs) and, for hxd, ratio = hxd commits/s ÷ raw commits/s at
// the same concurrency.
func BenchmarkPostgresRuns(b *testing.B) {
	dbURL, schema := testDatabaseTB(b)
	ctx := context.Background()
	require := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	require(postgres.Migrate(ctx, postgres.Config{URL: dbURL, Schema: schema}))
	st, err := postgres.Open(ctx, postgres.Config{URL: dbURL, Schema: schema, PoolSize: 24, LeaseDuration: 30 * time.Second})
	require(err)
	b.Cleanup(func() { _ = st.Close() })
	cs := &benchCountingStore{Store: st}
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

	// The raw writers get a pool of their own per concurrency (closed before
	// hxd runs, so both fit in max_connections=100).
	newPool := func(size int) *pgxpool.Pool {
		pcfg, err := pgxpool.ParseConfig(dbURL)
		require(err)
		pcfg.MaxConns = int32(size)
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		require(err)
		return pool
	}
	raw := fmt.Sprintf(`%q.raw_commits`, schema)
	pool := newPool(1)
	_, err = pool.Exec(ctx, `CREATE TABLE `+raw+` (id bigserial PRIMARY KEY, payload text NOT NULL)`)
	pool.Close()
	require(err)

	rawRate := map[int]float64{}
	for _, c := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("raw/concurrency=%d", c), func(b *testing.B) {
			n := b.N * 22 // as many commits as b.N hxd runs make
			pool := newPool(c)
			defer pool.Close()
			var next atomic.Int64
			start := time.Now()
			var wg sync.WaitGroup
			for range c {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(n) {
						if _, err := pool.Exec(ctx, `INSERT INTO `+raw+` (payload) VALUES ($1)`, "x"); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			rate := float64(n) / time.Since(start).Seconds()
			rawRate[c] = rate
			b.ReportMetric(rate, "commits/s")
		})
		b.Run(fmt.Sprintf("hxd/concurrency=%d", c), func(b *testing.B) {
			var next atomic.Int64
			before := cs.commits.Load()
			start := time.Now()
			var wg sync.WaitGroup
			for range c {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if err := benchOneRun(ctx, rt); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start).Seconds()
			rate := float64(cs.commits.Load()-before) / elapsed
			b.ReportMetric(rate, "commits/s")
			b.ReportMetric(float64(b.N)/elapsed, "runs/s")
			if r := rawRate[c]; r > 0 {
				b.ReportMetric(rate/r, "ratio")
			}
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
