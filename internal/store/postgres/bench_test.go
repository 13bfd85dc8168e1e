package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/postgres"
)

// benchWorker is one run committing boundaries under its lease.
type benchWorker struct {
	sessionID, runID string
	lease            rtstore.Lease
	state            json.RawMessage
}

// boundary is a typical recorded boundary: ~2 KB state, a step, three
// records (boundary, boundary, checkpoint) and two events with records.
// Record and event ids are UUIDv7, as the runtime makes them.
func (w *benchWorker) boundary() *rtstore.Commit {
	rec := func(kind journal.Kind, payload string) journal.Record {
		return journal.Record{
			Version: 1, ID: benchID(), Kind: kind, RecordedAt: journal.Timestamp(time.Now()),
			SessionID: w.sessionID, RunID: w.runID, StepID: "3", AttemptID: "1", Payload: json.RawMessage(payload),
		}
	}
	ev := func(typ string) rtstore.PendingEvent {
		r := rec(journal.KindEvent, "")
		return rtstore.PendingEvent{
			Event: rtstore.RunEvent{
				Type: typ, Data: json.RawMessage(`{"text":"The invoice total is 42.00 EUR."}`),
				SessionID: w.sessionID, RunID: w.runID, StepID: "3", AttemptID: "1", EventID: benchID(),
			},
			Record: &r,
		}
	}
	return &rtstore.Commit{
		SessionID: w.sessionID, RunID: w.runID, Lease: w.lease,
		Status: rtstore.StatusRunning, Phase: "prepare_model", State: w.state,
		StepID: "3", Step: json.RawMessage(`{"iteration":3,"attempt":1,"usage":{"input_tokens":812,"output_tokens":64}}`),
		Records: []journal.Record{
			rec(journal.KindModelResponse, `{"raw":{"id":"msg_1","content":[{"type":"text","text":"The invoice total is 42.00 EUR."}]}}`),
			rec(journal.KindModelCompleted, `{"usage":{"input_tokens":812,"output_tokens":64},"stop_reason":"end_turn"}`),
			rec(journal.KindCheckpoint, `{"phase":"prepare_model","iterations":3}`),
		},
		Events: []rtstore.PendingEvent{ev("text_complete"), ev("turn_complete")},
	}
}

// benchWorkers creates n sessions, each with a lease and a running run.
func benchWorkers(b *testing.B, ctx context.Context, st *postgres.Store, n int) []*benchWorker {
	b.Helper()
	out := make([]*benchWorker, n)
	for i := range out {
		w := &benchWorker{sessionID: "ses-" + uuid.NewString(), runID: "run-" + uuid.NewString()}
		state, err := json.Marshal(map[string]any{
			"run_id": w.runID, "session_id": w.sessionID, "iterations": 3, "phase": "prepare_model",
			"messages": []map[string]string{{"role": "user", "text": strings.Repeat("lorem ipsum ", 160)}},
		})
		if err != nil {
			b.Fatal(err)
		}
		w.state = state
		if err := st.SessionInsert(ctx, &rtstore.SessionRow{ID: w.sessionID, Principal: "bench", Recording: true}); err != nil {
			b.Fatal(err)
		}
		if w.lease, err = st.SessionLock(ctx, w.sessionID); err != nil {
			b.Fatal(err)
		}
		if _, _, err := st.RunInsert(ctx, &rtstore.RunInsertParams{
			Run:    rtstore.RunRow{ID: w.runID, SessionID: w.sessionID, RequestID: "r", MessageDigest: "d", Phase: "start"},
			Commit: &rtstore.Commit{SessionID: w.sessionID, RunID: w.runID, Lease: w.lease, Status: rtstore.StatusRunning, Phase: "start"},
		}); err != nil {
			b.Fatal(err)
		}
		out[i] = w
	}
	return out
}

// inParallel runs n workers doing per operations each and returns the
// wall time.
func inParallel(b *testing.B, n, per int, op func(worker int) error) time.Duration {
	b.Helper()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range n {
		wg.Go(func() {
			for range per {
				if err := op(w); err != nil {
					errs <- err
					return
				}
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

// conns is the pool of the hxd side of BenchmarkBoundaryThroughput for n
// concurrent runs: one connection per run, at most 16 (group commit needs
// few; the raw side's n connections and whatever else runs must fit
// PostgreSQL's default max_connections of 100).
func conns(n int) int { return max(2, min(n, 16)) }

// rawCommitters opens n connections on schema, each one a raw committer
// doing single-row autocommit INSERTs into raw_commits (created here).
func rawCommitters(b *testing.B, ctx context.Context, url, schema string, n int) []*pgx.Conn {
	b.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	out := make([]*pgx.Conn, n)
	for i := range out {
		if out[i], err = pgx.ConnectConfig(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		for _, c := range out {
			_ = c.Close(context.Background())
		}
	})
	if _, err := out[0].Exec(ctx, `CREATE TABLE raw_commits (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkBoundaryThroughput compares hxd's boundary commits with the raw
// commit rate of the same database, in the same run, at the same
// concurrency: n = 1, 8 and 64 concurrent runs each commit typical
// recorded boundaries (~2 KB state, a step, 5 journal records, 2 events:
// 9 rows in 6 tables) under their lease, and, interleaved with them, n
// concurrent raw committers — each on its own connection, so n commits
// are really in flight — commit single-row INSERTs (the cheapest possible
// durable commit). Metrics: boundaries/s, raw-commits/s, x-raw =
// boundaries/s ÷ raw-commits/s (the target is >= 0.8 at 64 runs), the
// average group size (boundaries/group) and the share of one-round-trip
// commits that had to be redone (fast-miss). HXD_BENCH_COMMIT_GROUPS
// overrides Config.CommitGroups.
func BenchmarkBoundaryThroughput(b *testing.B) {
	for _, n := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			cfg := testConfig(b)
			cfg.PoolSize = conns(n)
			cfg.Logger = nil
			if g, err := strconv.Atoi(os.Getenv("HXD_BENCH_COMMIT_GROUPS")); err == nil {
				cfg.CommitGroups = g
			}
			st := openStore(b, cfg)
			workers := benchWorkers(b, ctx, st, n)
			raw := rawCommitters(b, ctx, cfg.URL, cfg.Schema, n)
			rawInsert := func(w int) error {
				_, err := raw[w].Exec(ctx, `INSERT INTO raw_commits (v) VALUES ($1)`, "x")
				return err
			}
			commit := func(w int) error { return st.Commit(ctx, workers[w].boundary()) }

			const per = 20
			inParallel(b, n, 2, commit) // warm up: prepare statements on every connection
			inParallel(b, n, 2, rawInsert)
			groups0, boundaries0 := st.GroupCommitStats()
			misses0 := st.FastMisses()
			againstRaw(b, n, per, commit, rawInsert)
			groups, grouped := st.GroupCommitStats()
			b.ReportMetric(float64(grouped-boundaries0)/float64(groups-groups0), "boundaries/group")
			b.ReportMetric(float64(st.FastMisses()-misses0)/float64(groups-groups0), "fast-miss")
		})
	}
}

// againstRaw times n workers doing per commits each, interleaved with n
// raw committers doing as many single-row commits (only the commits are
// timed), for b.N rounds, and reports boundaries/s, raw-commits/s and
// their ratio x-raw.
func againstRaw(b *testing.B, n, per int, commit, rawInsert func(worker int) error) {
	var commitTime, rawTime time.Duration
	var total int
	for b.Loop() {
		commitTime += inParallel(b, n, per, commit)
		b.StopTimer()
		rawTime += inParallel(b, n, per, rawInsert)
		b.StartTimer()
		total += n * per
	}
	boundaries := float64(total) / commitTime.Seconds()
	raws := float64(total) / rawTime.Seconds()
	b.ReportMetric(boundaries, "boundaries/s")
	b.ReportMetric(raws, "raw-commits/s")
	b.ReportMetric(boundaries/raws, "x-raw")
}

// benchID is a new UUIDv7 string (runtime.Config's default NewIDFunc).
func benchID() string { return uuid.Must(uuid.NewV7()).String() }
