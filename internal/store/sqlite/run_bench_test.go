package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
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

// session creates a session of the 10-step agent.
func (rb *runBench) session(b *testing.B, recording bool) string {
	sess, err := rb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "bench", Version: "v1"}, Recording: &recording})
	if err != nil {
		b.Fatal(err)
	}
	return sess.ID
}

// run drives one run of the 10-step agent on a new session to its end.
func (rb *runBench) run(b *testing.B, sessionID string) {
	ctx := context.Background()
	run, _, err := rb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sessionID, Message: json.RawMessage(`"go"`)})
	if err != nil {
		b.Fatal(err)
	}
	res, err := rb.rt.WaitRun(ctx, run.RunID, time.Minute)
	if err != nil || res.Status != hxruntime.StatusCompleted {
		b.Fatalf("run ended %v: %v", res, err)
	}
}

// warmRestarts is how many times a benchmark's WAL starts over before
// measuring. Until its first RESTART checkpoint a WAL file only grows, and
// an fsync that also makes the file's new size durable costs more (about
// 300 µs against 190 µs a commit here), so a fresh database's first
// commits are not what a running server pays. Both sides warm up by WAL
// restarts, not by a count of commits, as they write different numbers of
// pages per commit.
const warmRestarts = 2

// warmUntil calls step until the checkpointer c has restarted the WAL
// warmRestarts times.
func warmUntil(b *testing.B, c *checkpointer, step func()) {
	b.Helper()
	for i := 0; c.restarts.Load() < warmRestarts; i++ {
		if i == 100_000 {
			b.Fatal("the WAL never started over")
		}
		step()
	}
}

// warm runs the benchmark agent until the store's WAL is in its steady
// state (at least one run).
func (rb *runBench) warm(b *testing.B, recording bool) {
	warmUntil(b, rb.db.ckpt, func() { rb.run(b, rb.session(b, recording)) })
}

// warm commits until the baseline's WAL is in its steady state.
func (r *rawDB) warm(b *testing.B) {
	warmUntil(b, r.ckpt, func() { r.commits(b, 64) })
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
// (a step = one model call + one tool call) and three ratios to the time
// of the same number of single-row commits: x-raw, the run's time (from
// its submission on a new session to its end); step-x-raw, the time of
// its steps (from the end of its first commit, run.started, to the end of
// its last, against one raw commit fewer), which leaves out what a run
// costs once: taking the session's lock, starting the driver, releasing
// the lease and waking the waiter; and store-x-raw, the time spent inside
// boundary commits. The same three against the same number of minimal
// boundaries (BenchmarkMinimalBoundary), on a database of their own:
// x-minimal, step-x-minimal and store-x-minimal. The baselines run
// interleaved with the runs, so machine noise hits all alike.
func BenchmarkTenStepRun(b *testing.B) {
	for _, recorded := range []bool{false, true} {
		name := "unrecorded"
		if recorded {
			name = "recorded"
		}
		b.Run(name, func(b *testing.B) {
			rb := newRunBench(b)
			raw := newRawDB(b)
			minimal := newMinimalDB(b)
			rb.warm(b, recorded)
			raw.warm(b)
			minimal.warm(b)
			rb.store.Reset()
			var runTime, storeTime, stepTime, rawTime, rawStepTime, minTime, minStepTime, runCPU, rawCPU time.Duration
			var commits, runPages, rawPages int64
			for b.Loop() {
				// The session is made outside the measured time: a step
				// does not include it.
				b.StopTimer()
				sessionID := rb.session(b, recorded)
				b.StartTimer()
				p0 := pagesWritten(b, rb.db.w)
				c0 := cpuTime()
				start := time.Now()
				rb.run(b, sessionID)
				runTime += time.Since(start)
				runCPU += cpuTime() - c0
				b.StopTimer()
				storeTime += time.Duration(rb.store.Elapsed.Load())
				stepTime += time.Duration(rb.store.LastEnd.Load() - rb.store.FirstEnd.Load())
				n := rb.store.Reset()
				commits += n
				runPages += pagesWritten(b, rb.db.w) - p0
				p0 = pagesWritten(b, raw.db)
				c0 = cpuTime()
				r := raw.commits(b, n)
				rawTime += r
				rawStepTime += r * time.Duration(n-1) / time.Duration(n)
				rawCPU += cpuTime() - c0
				rawPages += pagesWritten(b, raw.db) - p0
				m := minimal.boundaries(b, n)
				minTime += m
				minStepTime += m * time.Duration(n-1) / time.Duration(n)
				b.StartTimer()
			}
			perRun := float64(commits) / float64(b.N)
			b.ReportMetric(perRun, "commits/run")
			b.ReportMetric(perRun/float64(benchSteps+1), "commits/step")
			b.ReportMetric(float64(rawTime.Microseconds())/float64(commits), "raw-µs/commit")
			b.ReportMetric(float64(runTime)/float64(rawTime), "x-raw")
			b.ReportMetric(float64(stepTime)/float64(rawStepTime), "step-x-raw")
			b.ReportMetric(float64(storeTime)/float64(rawTime), "store-x-raw")
			b.ReportMetric(float64(runTime)/float64(minTime), "x-minimal")
			b.ReportMetric(float64(stepTime)/float64(minStepTime), "step-x-minimal")
			b.ReportMetric(float64(storeTime)/float64(minTime), "store-x-minimal")
			b.ReportMetric(float64(runCPU.Microseconds())/float64(commits), "cpu-µs/commit")
			b.ReportMetric(float64(rawCPU.Microseconds())/float64(commits), "raw-cpu-µs/commit")
			b.ReportMetric(float64(runPages)/float64(commits), "pages/commit")
			b.ReportMetric(float64(rawPages)/float64(commits), "raw-pages/commit")
		})
	}
}

// rawDSN is the baseline's DSN: the writer's pragmas.
func rawDSN(path string) string { return writerDSN(path) }

// BenchmarkPageFloor is the floor of a boundary's layout: a commit that
// changes one row in each of k tables (one page each) against a commit
// that changes one row of one table, interleaved on one database in the
// WAL's steady state. A recorded boundary writes about 12 pages (the run,
// its step, tool rows, events, journal records and their ids, and the
// database header page when the file grows), so x-one-page at k=12 is
// what such a boundary costs before any encoding or runtime work.
func BenchmarkPageFloor(b *testing.B) {
	for _, k := range []int{4, 8, 12} {
		b.Run("pages="+strconv.Itoa(k), func(b *testing.B) {
			ctx := context.Background()
			raw := newRawDB(b)
			for i := range k {
				if _, err := raw.db.ExecContext(ctx, `CREATE TABLE p`+strconv.Itoa(i)+` (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
					b.Fatal(err)
				}
				if _, err := raw.db.ExecContext(ctx, `INSERT INTO p`+strconv.Itoa(i)+` (id, v) VALUES (1, '')`); err != nil {
					b.Fatal(err)
				}
			}
			n := 0
			commit := func(tables int) time.Duration {
				start := time.Now()
				tx, err := raw.db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				for i := range tables {
					n++ // a new value, so the page changes
					if _, err := tx.ExecContext(ctx, `UPDATE p`+strconv.Itoa(i)+` SET v = ? WHERE id = 1`, strconv.Itoa(n)); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				raw.ckpt.committed()
				return time.Since(start)
			}
			warmUntil(b, raw.ckpt, func() { commit(k) })
			var one, many time.Duration
			var onePages, manyPages int64
			for b.Loop() {
				p0 := pagesWritten(b, raw.db)
				one += commit(1)
				p1 := pagesWritten(b, raw.db)
				many += commit(k)
				onePages += p1 - p0
				manyPages += pagesWritten(b, raw.db) - p1
			}
			b.ReportMetric(float64(many)/float64(one), "x-one-page")
			b.ReportMetric(float64(manyPages)/float64(b.N), "pages/commit")
			b.ReportMetric(float64(onePages)/float64(b.N), "one-pages/commit")
		})
	}
}

// minimalDB commits minimal boundaries (BenchmarkMinimalBoundary) on a
// database of its own with the store's pragmas, checkpointed like the
// store's, and single-row commits on the same database (raw).
type minimalDB struct {
	*rawDB
	seq                     int64
	state, record, checkpnt string
}

func newMinimalDB(b *testing.B) *minimalDB {
	b.Helper()
	ctx := context.Background()
	m := &minimalDB{
		rawDB:    newRawDB(b),
		state:    `{"messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 160) + `"}],"iterations":`,
		record:   `{"version":1,"kind":"tool.returned","payload":{"tool_call_id":"c1","content":"` + strings.Repeat("x", 300) + `","is_error":false}}`,
		checkpnt: `{"version":1,"kind":"checkpoint","payload":{"phase":"tools","status":"running","error":null,"extensions":{},"tools":[]}}`,
	}
	for _, q := range []string{
		`CREATE TABLE m_runs (id INTEGER PRIMARY KEY, state TEXT NOT NULL)`,
		`CREATE TABLE m_journal (k INTEGER PRIMARY KEY, id TEXT NOT NULL, payload TEXT NOT NULL)`,
		`CREATE TABLE m_ids (id TEXT PRIMARY KEY, k INTEGER NOT NULL) WITHOUT ROWID`,
		`INSERT INTO m_runs (id, state) VALUES (1, '')`,
	} {
		if _, err := m.db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	return m
}

// boundary commits one minimal boundary and returns the time it took.
func (m *minimalDB) boundary(b *testing.B) time.Duration {
	ctx := context.Background()
	id1, id2 := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	start := time.Now()
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	m.seq += 2
	seq := m.seq
	for _, st := range []struct {
		q    string
		args []any
	}{
		{`UPDATE m_runs SET state = ? WHERE id = 1`, []any{m.state + strconv.FormatInt(seq, 10) + "}"}},
		{`INSERT INTO m_journal (k, id, payload) VALUES (?, ?, ?), (?, ?, ?)`, []any{seq - 1, id1, m.record, seq, id2, m.checkpnt}},
		{`INSERT INTO m_ids (id, k) VALUES (?, ?), (?, ?)`, []any{id1, seq - 1, id2, seq}},
	} {
		if _, err := tx.ExecContext(ctx, st.q, st.args...); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	m.ckpt.committed()
	return time.Since(start)
}

// boundaries commits n minimal boundaries and returns the time they took.
func (m *minimalDB) boundaries(b *testing.B, n int64) time.Duration {
	var d time.Duration
	for range n {
		d += m.boundary(b)
	}
	return d
}

// warm commits minimal boundaries until the WAL is in its steady state.
func (m *minimalDB) warm(b *testing.B) {
	warmUntil(b, m.ckpt, func() { m.boundary(b) })
}

// BenchmarkMinimalBoundary is the floor of any recorded boundary, whatever
// the layout: the fewest writes REFERENCE §2.2 and §3.3 allow for one, in
// one transaction: the run's ~2 KB state updated in place, two journal
// records appended (a boundary record and its checkpoint, keyed by run and
// seq) and their ids inserted into a unique index (record ids are unique
// across runs), with no events, step or tool rows and no encoding work.
// It runs interleaved with single-row commits on the same database in the
// WAL's steady state; x-raw is its time over theirs.
func BenchmarkMinimalBoundary(b *testing.B) {
	m := newMinimalDB(b)
	m.warm(b)
	var one, many time.Duration
	var onePages, manyPages int64
	for b.Loop() {
		p0 := pagesWritten(b, m.db)
		one += m.commits(b, 1)
		p1 := pagesWritten(b, m.db)
		many += m.boundary(b)
		onePages += p1 - p0
		manyPages += pagesWritten(b, m.db) - p1
	}
	b.ReportMetric(float64(many)/float64(one), "x-raw")
	b.ReportMetric(float64(manyPages)/float64(b.N), "pages/commit")
	b.ReportMetric(float64(onePages)/float64(b.N), "raw-pages/commit")
}
