package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"modernc.org/sqlite"

	"hxd/internal/agent"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/storetest"
	"hxd/internal/tool"
)

// benchSteps is the number of tool steps of the benchmark agent.
const benchSteps = 10

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
	store *storetest.CountingStore
	db    *Store
}

func newRunBench(b *testing.B) *runBench {
	b.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(b.TempDir(), "hxd.db"), AutoMigrate: true})
	if err != nil {
		b.Fatal(err)
	}
	cs := &storetest.CountingStore{Store: s}
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
	return &runBench{rt: rt, store: cs, db: s}
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
// commit inserts one row, checkpointed in the background like the store's
// (the writer's DSN turns automatic checkpoints off; without checkpoints
// its WAL would only grow, and appending to a growing file costs more).
type rawDB struct {
	db   *sql.DB
	ckpt *checkpointer
}

func newRawDB(b *testing.B) *rawDB {
	b.Helper()
	path := filepath.Join(b.TempDir(), "raw.db")
	db, err := sql.Open("sqlite", rawDSN(path))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	hold := func(ctx context.Context) (func(), error) {
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		return func() { _ = conn.Close() }, nil
	}
	c, err := startCheckpointer(context.Background(), path, defaultCheckpointConfig(), slog.New(slog.DiscardHandler), hold)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.close() })
	return &rawDB{db: db, ckpt: c}
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
		r.ckpt.committed()
	}
	return time.Since(start)
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pagesWritten is the number of pages db's (single) connection has written
// to the WAL so far (SQLITE_DBSTATUS_CACHE_WRITE).
func pagesWritten(b *testing.B, db *sql.DB) int64 {
	b.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	var n int
	if err := conn.Raw(func(dc any) error {
		var err error
		n, _, err = dc.(sqlite.DBStatus).Status(sqlite.DBStatusCacheWrite, false)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	return int64(n)
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
			rb.store.Commits.Store(0)
			rb.store.Elapsed.Store(0)
			var runTime, rawTime, runCPU, rawCPU time.Duration
			var commits, runPages, rawPages int64
			for b.Loop() {
				p0 := pagesWritten(b, rb.db.w)
				c0 := cpuTime()
				start := time.Now()
				rb.run(b, recorded)
				runTime += time.Since(start)
				runCPU += cpuTime() - c0
				n := rb.store.Commits.Swap(0)
				commits += n
				b.StopTimer()
				runPages += pagesWritten(b, rb.db.w) - p0
				p0 = pagesWritten(b, raw.db)
				c0 = cpuTime()
				rawTime += raw.commits(b, n)
				rawCPU += cpuTime() - c0
				rawPages += pagesWritten(b, raw.db) - p0
				b.StartTimer()
			}
			perRun := float64(commits) / float64(b.N)
			b.ReportMetric(perRun, "commits/run")
			b.ReportMetric(perRun/float64(benchSteps+1), "commits/step")
			b.ReportMetric(float64(rawTime.Microseconds())/float64(commits), "raw-µs/commit")
			b.ReportMetric(float64(runTime)/float64(rawTime), "x-raw")
			b.ReportMetric(float64(rb.store.Elapsed.Load())/float64(rawTime), "store-x-raw")
			b.ReportMetric(float64(runCPU.Microseconds())/float64(commits), "cpu-µs/commit")
			b.ReportMetric(float64(rawCPU.Microseconds())/float64(commits), "raw-cpu-µs/commit")
			b.ReportMetric(float64(runPages)/float64(commits), "pages/commit")
			b.ReportMetric(float64(rawPages)/float64(commits), "raw-pages/commit")
		})
	}
}

// rawDSN is the baseline's DSN: the writer's pragmas.
func rawDSN(path string) string { return writerDSN(path) }
