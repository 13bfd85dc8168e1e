package hxbundle

import (
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

// The benchmark bundles: ~59 MiB, a complete run of ~10,000 records with
// ~4 KiB payloads (31 MiB of records.jsonl; the member limit is 32 MiB)
// and one 28 MiB artifact, written STORED to a temporary file.
const (
	benchRecordsBytes  = 31 << 20
	benchArtifactBytes = 28 << 20
)

var benchDir = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "hxbundle-bench-") })

// benchBundles are the benchmark bundles' paths, built once per process.
var benchBundles sync.Map // "typical" or "dense" → func() (string, error)

func benchBundle(kind string) (string, error) {
	f, _ := benchBundles.LoadOrStore(kind, sync.OnceValues(func() (string, error) {
		dir, err := benchDir()
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, kind+".hx")
		records, artifact := benchRecordsBytes, benchArtifactBytes
		if kind == "quarter" {
			records, artifact = records/4, artifact/4
		}
		data := buildBenchBundle(records, artifact, kind == "dense")
		return path, os.WriteFile(path, data, 0o600)
	}))
	return f.(func() (string, error))()
}

// benchText is ~4 KiB of text. Typical text is prose with a line break
// every ~100 bytes, a quotation every ~300 and an occasional non-ASCII
// character; dense text has an escape every ~20 bytes and non-ASCII every
// ~40 (JSON or code inside strings).
func benchText(rng *rand.Rand, dense bool) string {
	words := []string{"invoice", "overdue", "balance", "ACME-42", "the", "customer", "reminder", "of", "42.50", "payment", "and", "terms"}
	if dense {
		words = append(words, "\"quoted\"", "line\nbreak", "tab\there", "é", "→", "{\"k\":1}")
	}
	var b strings.Builder
	for n := 0; b.Len() < 4000; n++ {
		b.WriteString(words[rng.IntN(len(words))])
		switch {
		case n%16 == 15:
			b.WriteByte('\n')
		case n%48 == 47:
			b.WriteString(` "as agreed" `)
		case n%64 == 63:
			b.WriteString(" café ")
		default:
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func buildBenchBundle(recordsBytes, artifactBytes int, dense bool) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	artifact := make([]byte, artifactBytes)
	for i := range artifact {
		artifact[i] = byte(rng.Uint32())
	}
	key := sha(artifact)
	var records []map[string]any
	add := func(kind, step, attempt string, ek any, payload any) {
		records = append(records, rec(len(records)+1, kind, step, attempt, ek, payload))
	}
	add("run.started", "0", "0", nil, map[string]any{"message": "go", "initial_messages": []any{}})
	size := 0
	benchText := func(rng *rand.Rand) string { return benchText(rng, dense) }
	for step := 1; size < recordsBytes; step++ {
		s := fmt.Sprint(step)
		resp := map[string]any{"text": benchText(rng), "tool_calls": []any{}, "stop_reason": "tool_use", "usage": usage()}
		add("model.started", s, "1", nil, map[string]any{"messages": []any{benchText(rng)}})
		add("model.response", s, "1", nil, resp)
		add("model.processed", s, "1", nil, resp)
		add("model.completed", s, "1", nil, resp)
		add("event", s, "1", nil, event("text_delta", benchText(rng), step))
		ek := fmt.Sprintf("%s:%d:call_%d", tRunID, step, step)
		content := benchText(rng)
		if step == 1 {
			content += " artifact://" + key
		}
		result := map[string]any{"tool_call_id": "c", "content": content, "is_error": false}
		add("tool.started", s, "1", ek, map[string]any{"call": map[string]any{"id": "c", "name": "t", "input": map[string]any{}}, "replay_policy": "safe"})
		add("tool.dispatched", s, "1", ek, map[string]any{"call": map[string]any{"id": "c", "name": "t", "input": map[string]any{}}})
		add("tool.returned", s, "1", ek, result)
		add("tool.processed", s, "1", ek, result)
		add("checkpoint", s, "1", nil, map[string]any{"phase": "prepare_model", "status": "running", "error": nil, "extensions": map[string]any{}, "tools": []any{}})
		for _, r := range records[len(records)-10:] {
			size += len(marshal(nil, r)) + 1
		}
	}
	add("checkpoint", "0", "0", nil, map[string]any{"phase": "result", "status": "completed", "error": nil, "extensions": map[string]any{}, "tools": []any{}})
	b := baseBundle()
	b.records = records
	b.renumber()
	b.artifacts = map[string][]byte{key: artifact}
	b.manifest["artifacts"] = map[string]any{key: map[string]any{"status": "included", "path": artifactPrefix + key}}
	return b.build(nopTB{})
}

// nopTB lets the test helpers run outside a test (they panic on error).
type nopTB struct{ testing.TB }

func (nopTB) Helper()                   {}
func (nopTB) Errorf(string, ...any)     { panic("build failed") }
func (nopTB) FailNow()                  { panic("build failed") }
func (nopTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func openBench(b *testing.B, kind string) (*os.File, int64) {
	path, err := benchBundle(kind)
	require.NoError(b, err)
	f, err := os.Open(path)
	require.NoError(b, err)
	b.Cleanup(func() { hxtest.Close(b, f) })
	st, err := f.Stat()
	require.NoError(b, err)
	return f, st.Size()
}

// benchKinds are the benchmark bundles: typical payload text, text with
// an escape every ~20 bytes, and typical text at a quarter of the size
// (to show that memory does not grow with the archive).
var benchKinds = []string{"typical", "dense", "quarter"}

// BenchmarkVerify verifies the ~60 MiB bundles. alloc-B/verify is what
// one Verify allocates in total (runtime.MemStats.TotalAlloc);
// peak-heap-B is how far the heap grew during one Verify; x-baseline is
// Verify's throughput relative to BenchmarkVerifyBaseline's, measured in
// alternation.
func BenchmarkVerify(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) { benchVerify(b, kind) })
	}
}

func benchVerify(b *testing.B, kind string) {
	f, size := openBench(b, kind)
	r := Verify(f, size, DefaultLimits)
	require.True(b, r.Valid, "%+v", r)
	require.True(b, r.Complete, "%+v", r.Details)
	b.Logf("%d records, %d bytes", r.RecordCount, size)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	Verify(f, size, DefaultLimits)
	runtime.ReadMemStats(&after)
	peak := peakHeap(func() { Verify(f, size, DefaultLimits) })

	// The throughput ratio to the baseline, from alternating passes so that
	// both see the same machine load: the median of 7 pairs.
	var ratios []float64
	buf := make([]byte, 256<<10)
	for range 7 {
		start := time.Now()
		Verify(f, size, DefaultLimits)
		tv := time.Since(start)
		start = time.Now()
		hashFile(b, f, size, buf)
		ratios = append(ratios, float64(time.Since(start))/float64(tv))
	}
	slices.Sort(ratios)

	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		Verify(f, size, DefaultLimits)
	}
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc), "alloc-B/verify")
	b.ReportMetric(float64(peak), "peak-heap-B")
	b.ReportMetric(ratios[len(ratios)/2], "x-baseline")
}

// hashFile is the baseline: read the file and compute SHA-256 and CRC-32
// over all of it.
func hashFile(b *testing.B, f *os.File, size int64, buf []byte) {
	h := sha256.New()
	c := crc32.NewIEEE()
	r := io.NewSectionReader(f, 0, size)
	for {
		n, err := r.Read(buf)
		h.Write(buf[:n])
		c.Write(buf[:n])
		if err == io.EOF {
			break
		}
		require.NoError(b, err)
	}
	_ = h.Sum(nil)
}

// peakHeap runs fn and returns by how much the heap (live and not yet
// collected objects, HeapAlloc) grew at most meanwhile, sampled every
// 100µs after a collection.
func peakHeap(fn func()) uint64 {
	const metric = "/memory/classes/heap/objects:bytes"
	read := func() uint64 {
		s := []metrics.Sample{{Name: metric}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	runtime.GC()
	base := read()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if v := read(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	fn()
	close(stop)
	<-done
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	if peak.Load() < base {
		return 0
	}
	return peak.Load() - base
}

// BenchmarkVerifyBaseline reads the same file the same way and computes
// only SHA-256 and CRC-32 over its bytes: the floor any verifier pays.
func BenchmarkVerifyBaseline(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) { benchBaseline(b, kind) })
	}
}

func benchBaseline(b *testing.B, kind string) {
	f, size := openBench(b, kind)
	buf := make([]byte, 256<<10)
	b.SetBytes(size)
	for b.Loop() {
		hashFile(b, f, size, buf)
	}
}
