package mcp

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordHandler keeps the messages and "line" attributes it handles.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func TestStderrIsLoggedBounded(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	h := &recordHandler{}
	clock := time.Unix(1000, 0)
	ch := &child{stderr: r, log: slog.New(h), nowFunc: func() time.Time { return clock }, stderrDone: make(chan struct{})}
	go ch.logStderr()

	var b strings.Builder
	b.WriteString("first line\r\n")
	b.WriteString(strings.Repeat("z", 5000) + "\n") // cut at stderrLineBytes
	for range 150 {
		b.WriteString("noise\n")
	}
	b.WriteString("no newline at the end")
	_, err = w.WriteString(b.String())
	require.NoError(t, err)
	require.NoError(t, w.Close())
	<-ch.stderrDone
	require.NoError(t, r.Close())

	var lines []string
	var dropped int64
	for _, rec := range h.records {
		require.Equal(t, slog.LevelDebug, rec.Level)
		rec.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "line":
				lines = append(lines, a.Value.String())
			case "lines":
				dropped = a.Value.Int64()
			}
			return true
		})
	}
	require.Len(t, lines, stderrWindowLines)
	require.Equal(t, "first line", lines[0])
	require.Len(t, lines[1], stderrLineBytes)
	require.Equal(t, int64(153-stderrWindowLines), dropped) // 2 + 150 + 1 lines written
}
