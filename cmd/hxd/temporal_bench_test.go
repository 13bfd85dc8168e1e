package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hxd/internal/hxtest"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/temporal"
)

// benchSteps is the number of tool steps of the benchmark agent.
const benchSteps = 10

// writeBenchAgent writes agent bench@v1: a scripted model whose first 10
// steps each call the no-op builtin tool echo, then answers "done".
func writeBenchAgent(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: bench\nversion: v1\nmodel:\n  provider: scripted\n  script:\n")
	for i := 1; i <= benchSteps; i++ {
		fmt.Fprintf(&b, "    - tool_calls: [{id: t%d, name: echo, input: {text: step%d}}]\n", i, i)
	}
	b.WriteString("    - text: done\n")
	b.WriteString("tools:\n  - name: echo\n    kind: builtin\n    replay_policy: safe\n")
	b.WriteString("    input_schema: {type: object, properties: {text: {type: string}}}\n")
	dir := filepath.Join(t.TempDir(), "agents")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// benchRun creates a session of agent bench@v1 and submits one run with
// ?wait=60; it fails unless the run completed.
func benchRun(b *testing.B, client *http.Client, base string) string {
	post := func(path string, body any) map[string]any {
		raw, _ := json.Marshal(body)
		resp, err := client.Post(base+path, "application/json", bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		defer hxtest.Close(b, resp.Body)
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			b.Fatalf("POST %s: %d %s", path, resp.StatusCode, out)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			b.Fatal(err)
		}
		return m
	}
	s := post("/sessions", map[string]any{"agent": map[string]any{"name": "bench", "version": "v1"}})
	sid := s["session_id"].(string)
	run := post("/sessions/"+sid+"/runs?wait=60", map[string]any{"message": "go"})
	if run["status"] != "completed" {
		b.Fatalf("run %v not completed: %v", run["run_id"], run)
	}
	return sid
}

// BenchmarkTemporalEngine runs the same 10-step agent with a no-op tool
// (one session and one run per op, over HTTP, until completed) on the
// Temporal engine and on the SQLite engine, and a bare Temporal workflow
// doing as many no-op activities as the hxd run scheduled, in one run.
// It reports each one's time per run and the ratios (x_bare: Temporal
// engine ÷ bare workflow; x_sqlite: Temporal engine ÷ SQLite engine).
// Needs HXD_TEST_TEMPORAL=1 (make bench sets it).
func BenchmarkTemporalEngine(b *testing.B) {
	te := newTemporalEnv(b)
	agents := writeBenchAgent(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// hxd serve --engine temporal and one hxd worker, both in-process.
	d := te.serve(b, agents)
	workerErr := make(chan error, 1)
	go func() {
		workerErr <- run(ctx, append([]string{"worker", "--agents", agents, "--workdir", b.TempDir()}, te.flags...),
			env{getenv: te.getenv, stdout: io.Discard, stderr: testWriter{b}})
	}()
	b.Cleanup(func() {
		cancel()
		if err := <-workerErr; err != nil {
			b.Errorf("worker: %v", err)
		}
	})
	// The SQLite engine.
	local := serveInProcess(b, func(string) string { return "" }, []string{"serve", "--addr", "127.0.0.1:0",
		"--db", filepath.Join(b.TempDir(), "bench.db"), "--agents", agents, "--workdir", b.TempDir(), "--shutdown-timeout", "500ms"})
	// The bare workflow's worker, on its own task queue.
	c, err := temporal.Dial(ctx, temporal.DialOptions{Address: te.temporal.Address, Namespace: te.temporal.Namespace})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	bareQueue := te.taskQueue + "-bare"
	bw := temporal.NewBareWorker(c, bareQueue)
	if err := bw.Start(); err != nil {
		b.Fatal(err)
	}
	defer bw.Stop()

	client := &http.Client{Timeout: 2 * time.Minute}
	// Warm up every path once; count the activities of one hxd run.
	sid := benchRun(b, client, d.base)
	activities, err := temporal.CountActivities(ctx, c, hxruntime.LocalPrincipal, sid)
	if err != nil {
		b.Fatal(err)
	}
	benchRun(b, client, local.base)
	if err := temporal.RunBare(ctx, c, bareQueue, activities); err != nil {
		b.Fatal(err)
	}
	b.Logf("one hxd run of %d tool steps scheduled %d activities; the bare workflow runs as many", benchSteps, activities)

	ns := map[string]float64{}
	perOp := func(sb *testing.B) float64 { return float64(sb.Elapsed().Nanoseconds()) / float64(sb.N) }
	b.Run("bare", func(sb *testing.B) {
		for sb.Loop() {
			if err := temporal.RunBare(ctx, c, bareQueue, activities); err != nil {
				sb.Fatal(err)
			}
		}
		ns["bare"] = perOp(sb)
	})
	b.Run("temporal", func(sb *testing.B) {
		for sb.Loop() {
			benchRun(sb, client, d.base)
		}
		ns["temporal"] = perOp(sb)
		if ns["bare"] > 0 {
			sb.ReportMetric(ns["temporal"]/ns["bare"], "x_bare")
		}
	})
	b.Run("sqlite", func(sb *testing.B) {
		for sb.Loop() {
			benchRun(sb, client, local.base)
		}
		ns["sqlite"] = perOp(sb)
	})
	if ns["bare"] > 0 && ns["sqlite"] > 0 {
		b.Logf("per run: bare %.1f ms, temporal engine %.1f ms, sqlite engine %.1f ms; temporal/bare = %.2fx (target <= 1.1x), temporal/sqlite = %.2fx",
			ns["bare"]/1e6, ns["temporal"]/1e6, ns["sqlite"]/1e6, ns["temporal"]/ns["bare"], ns["temporal"]/ns["sqlite"])
	}
}
