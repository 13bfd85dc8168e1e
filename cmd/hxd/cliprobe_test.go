package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A named pipe given to verify or playback is refused at once: opening it
// for reading would block until some writer appears.
func TestVerifyPlaybackRefuseFIFO(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "pipe.hx")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, cmd := range []string{"verify", "playback"} {
		done := make(chan cliResult, 1)
		go func() { done <- runCLI(t, cmd, fifo) }()
		select {
		case res := <-done:
			require.Equal(t, 2, res.code, res.stderr)
			require.Contains(t, res.stderr, "not a regular file")
		case <-time.After(5 * time.Second):
			t.Fatalf("%s blocked on a named pipe", cmd)
		}
	}
}
