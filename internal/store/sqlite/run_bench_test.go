package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"hxd/internal/agent"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/tool"
)

// benchSteps is the number of tool steps of the benchmark agent.
const benchSteps = 10

// countingStore counts the boundary commits of a run (Commit and RunInsert).
type countingStore struct {
	rtstore.Store
	n atomic.Int64
}

func (c *countingStore) Commit(ctx context.Context, cm *rtstore.Commit) error {
	c.n.Add(1)
	return c.Store.Commit(ctx, cm)
}

func (c *countingStore) RunInsert(ctx context.Context, p *rtstore.RunInsertParams) (*rtstore.RunRow, bool, error) {
	c.n.Add(1)
	return c.Store.RunInsert(ctx, p)
}

func benchAgent() *agent.Definition {
	var script []model.ScriptStep
	for i := 1; i <= benchSteps; i++ {
		script = append(script, model.ScriptStep{ToolCalls: []model.ToolCall{{ID: "c" + strconv.Itoa(i), Name: "noop", Input: json.RawMessage(`{}`)}}})
	}
	script = append(script, model.ScriptStep{Text: "done"})
	return &agent.Definition{
		Name: "bench", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: script},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "noop", Kind: "builtin", Builtin: "noop", ReplayPolicy: "safe"}}},
	}
}

type runBench struct {
	rt    *hxruntime.Runtime
	store *countingStore
}

func newRunBench(b *testing.B) *runBench {
	b.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(b.TempDir(), "hxd.db"), AutoMigrate: true})
	if err != nil {
		b.Fatal(err)
	}
	cs := &countingStore{Store: s}
	reg := agent.NewRegistry("noop")
	if err := reg.Register(benchAgent()); err != nil {
		b.Fatal(err)
	}
	rt, err := hxruntime.New(hxruntime.Config{Store: cs, Agents: reg, ToolOptions: tool.Options{Builtins: map[string]tool.BuiltinFunc{
		"noop": func(context.Context, tool.Invocation) (tool.Outcome, error) {
			return tool.Outcome{Result: model.ToolResult{Content: json.RawMessage(`"ok"`)}}, nil
		},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = rt.Stop(context.Background())
		_ = s.Close()
	})
	return &runBench{rt: rt, store: cs}
}

// run creates a session and drives one run of the 10-step agent to its end.
func (rb *runBench) run(b *testing.B, recording bool) {
	ctx := context.Background()
	sess, err := rb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "bench", Version: "v1"}, Recording: &recording})
	if err != nil {
		b.Fatal(err)
	}
	run, _, err := rb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: json.RawMessage(`"go"`)})
	if err != nil {
		b.Fatal(err)
	}
	res, err := rb.rt.WaitRun(ctx, run.RunID, time.Minute)
	if err != nil || res.Status != hxruntime.StatusCompleted {
		b.Fatalf("run ended %v: %v", res, err)
	}
}

// rawDB is the baseline: a database with the store's pragmas where one
// commit inserts one row.
type rawDB struct{ db *sql.DB }

func newRawDB(b *testing.B) *rawDB {
	b.Helper()
	db, err := sql.Open("sqlite", writerDSN(filepath.Join(b.TempDir(), "raw.db")))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	return &rawDB{db: db}
}

// commits runs n single-row commits and returns the time they took.
func (r *rawDB) commits(b *testing.B, n int64) time.Duration {
	ctx := context.Background()
	start := time.Now()
	for range n {
		tx, err := r.db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, "x"); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkTenStepRun drives a 10-step scripted agent with a no-op tool,
// unrecorded and recorded, and reports per run: commits, commits per step
// (a step = one model call + one tool call) and x-raw, the run's time over
// the time of the same number of single-row commits. The baseline runs
// interleaved with the runs, so machine noise hits both alike.
func BenchmarkTenStepRun(b *testing.B) {
	for _, recorded := range []bool{false, true} {
		name := "unrecorded"
		if recorded {
			name = "recorded"
		}
		b.Run(name, func(b *testing.B) {
			rb := newRunBench(b)
			raw := newRawDB(b)
			rb.run(b, recorded) // warm up
			rb.store.n.Store(0)
			var runTime, rawTime time.Duration
			var commits int64
			for b.Loop() {
				start := time.Now()
				rb.run(b, recorded)
				runTime += time.Since(start)
				n := rb.store.n.Swap(0)
				commits += n
				b.StopTimer()
				rawTime += raw.commits(b, n)
				b.StartTimer()
			}
			perRun := float64(commits) / float64(b.N)
			b.ReportMetric(perRun, "commits/run")
			b.ReportMetric(perRun/float64(benchSteps+1), "commits/step")
			b.ReportMetric(float64(rawTime.Microseconds())/float64(commits), "raw-µs/commit")
			b.ReportMetric(float64(runTime)/float64(rawTime), "x-raw")
		})
	}
}
