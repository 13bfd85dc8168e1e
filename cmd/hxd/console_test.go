package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

// TestServeConsole: `hxd serve` serves the console at /ui/ (deep links
// too) and says where at start-up: a plain `console:` line with the text
// log, the log line's console attribute with either format.
func TestServeConsole(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			var stderr lockedBuffer
			addrCh := make(chan string, 1)
			errCh := make(chan error, 1)
			go func() {
				errCh <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--db", t.TempDir() + "/hxd.db",
					"--log-format", format, "--shutdown-timeout", "200ms"}, env{
					getenv: func(string) string { return "" }, stdout: io.Discard, stderr: &stderr,
					onListen: func(addr string) { addrCh <- addr },
				})
			}()
			var addr string
			select {
			case addr = <-addrCh:
			case err := <-errCh:
				cancel()
				t.Fatalf("hxd serve exited: %v", err)
			case <-time.After(20 * time.Second):
				cancel()
				t.Fatal("hxd serve did not start")
			}
			t.Cleanup(func() { cancel(); require.NoError(t, <-errCh) })

			url := "http://" + addr + "/ui/"
			out := stderr.String()
			if format == "text" {
				require.Contains(t, out, "\nconsole: "+url+"\n")
			} else {
				require.NotContains(t, out, "console: ")
				for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
					var rec map[string]any
					require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
					if rec["msg"] == "hxd listening" {
						require.Equal(t, url, rec["console"])
					}
				}
			}

			for path, ctype := range map[string]string{
				"/ui/runs/0194a3b0-7c1d-7e4f-8a2b-3c4d5e6f7a8b": "text/html; charset=utf-8",
				"/ui/assets/app.js":                             "text/javascript; charset=utf-8",
			} {
				resp, err := http.Get("http://" + addr + path)
				require.NoError(t, err)
				body, err := io.ReadAll(resp.Body)
				hxtest.Close(t, resp.Body)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode, path)
				require.Equal(t, ctype, resp.Header.Get("Content-Type"), path)
				require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
				require.NotEmpty(t, body)
			}
		})
	}
}
