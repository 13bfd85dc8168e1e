package runtime_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/agent"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/store/sqlite"
	"hxd/internal/tool"
)

// BenchmarkTracing is a recorded 10-step run (11 model calls, 10 tool
// calls, 32 commits on SQLite) with tracing off (no TracerProvider), on
// (every span sampled, exported through a batch processor to an exporter
// that drops them) and on with a 0 % sampler, in the same run: compare
// the sub-benchmarks' ns/op and allocs/op (issue 24: off costs nothing,
// on costs little).
func BenchmarkTracing(b *testing.B) {
	noop := tracetest.NewNoopExporter()
	for _, bc := range []struct {
		name string
		tp   func() *sdktrace.TracerProvider
	}{
		{"off", nil},
		{"on", func() *sdktrace.TracerProvider {
			return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(noop))
		}},
		{"sampled-0", func() *sdktrace.TracerProvider {
			return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.TraceIDRatioBased(0)), sdktrace.WithBatcher(noop))
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var tp trace.TracerProvider
			if bc.tp != nil {
				p := bc.tp()
				defer func() { _ = p.Shutdown(context.Background()) }()
				tp = p
			}
			benchTenSteps(b, tp)
		})
	}
}

// benchDir is a temporary folder in memory (/dev/shm) where there is one,
// so that the runs' fsyncs do not drown what tracing costs; else on disk.
func benchDir(b *testing.B) string {
	dir, err := os.MkdirTemp("/dev/shm", "hxd-bench-")
	if err != nil {
		return b.TempDir()
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// benchTenSteps runs tenStepAgent's recorded run once per iteration, each
// in a session of its own, on a runtime traced by tp.
func benchTenSteps(b *testing.B, tp trace.TracerProvider) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(benchDir(b), "hxd.db"), AutoMigrate: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	reg := agent.NewRegistry("count")
	if err := reg.Register(tenStepAgent("ten")); err != nil {
		b.Fatal(err)
	}
	rt, err := hxruntime.New(hxruntime.Config{
		Store: st, Agents: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TracerProvider: tp,
		ToolOptions: tool.Options{WorkDir: b.TempDir(), Builtins: map[string]tool.BuiltinFunc{
			"count": func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
				return tool.Outcome{Result: model.ToolResult{Content: inv.Call.Input}}, nil
			},
		}},
		SleepFunc: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = rt.Stop(context.Background()) }()
	rec := true
	msg := jsonString("go")
	b.ReportAllocs()
	for b.Loop() {
		sess, err := rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "ten", Version: "v1"}, Recording: &rec})
		if err != nil {
			b.Fatal(err)
		}
		run, _, err := rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: msg})
		if err != nil {
			b.Fatal(err)
		}
		res, err := rt.WaitRun(ctx, run.RunID, time.Minute)
		if err != nil || res.Status != hxruntime.StatusCompleted {
			b.Fatalf("run: %v %+v", err, res)
		}
	}
}
