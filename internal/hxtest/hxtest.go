package hxtest

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// WrapTestMain runs the package's tests and fails on leaked goroutines;
// cleanups run before the process exits (os.Exit skips deferred calls).
func WrapTestMain(m *testing.M, cleanups ...func()) {
	WrapTestMainIgnoring(m, nil, cleanups...)
}

// WrapTestMainIgnoring is WrapTestMain that also ignores the goroutines
// ignore names (goleak options), for a package whose tests run a peer in
// process that keeps goroutines of its own.
func WrapTestMainIgnoring(m *testing.M, ignore []goleak.Option, cleanups ...func()) {
	opts := append([]goleak.Option{
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		// The MCP stdio children starter lives as long as the process (mcp/start_linux.go).
		goleak.IgnoreTopFunction("hxd/internal/mcp.startLoop"),
		goleak.IgnoreAnyFunction("internal/poll.runtime_pollWait"),
		goleak.Cleanup(func(code int) {
			for _, f := range cleanups {
				f()
			}
			os.Exit(code)
		}),
	}, ignore...)
	goleak.VerifyTestMain(m, opts...)
}

// Logger returns a slog.Logger writing to t.Log.
func Logger(t testing.TB) *slog.Logger {
	t.Helper()
	return slog.New(slog.NewTextHandler(&tWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct {
	mu sync.Mutex
	t  testing.TB
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if os.Getenv("HXD_TEST_LOG") != "" {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

// Close closes c, typically deferred (`defer hxtest.Close(t, resp.Body)`),
// and marks t failed, without stopping it, if that fails.
func Close(t testing.TB, c io.Closer) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Errorf("close %T: %v", c, err)
	}
}
