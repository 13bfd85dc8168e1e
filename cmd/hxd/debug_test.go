package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

// TestServeDebugAddr: with --debug-addr, a listener of its own serves the
// profiler and nothing else, and the API's listener does not serve it.
func TestServeDebugAddr(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	apiCh, dbgCh := make(chan string, 1), make(chan string, 1)
	errCh := make(chan error, 1)
	go func() {
		errCh <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--debug-addr", "127.0.0.1:0",
			"--db", filepath.Join(t.TempDir(), "hxd.db"), "--demo", "--shutdown-timeout", "200ms"}, env{
			getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard,
			onListen:      func(addr string) { apiCh <- addr },
			onDebugListen: func(addr string) { dbgCh <- addr },
		})
	}()
	var api, dbg string
	for api == "" || dbg == "" {
		select {
		case api = <-apiCh:
		case dbg = <-dbgCh:
		case err := <-errCh:
			cancel()
			t.Fatalf("hxd serve exited: %v", err)
		case <-time.After(20 * time.Second):
			cancel()
			t.Fatal("hxd serve did not start")
		}
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer hxtest.Close(t, resp.Body)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("http://" + dbg + "/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine")
	code, body = get("http://" + dbg + "/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine profile:")
	code, _ = get("http://" + dbg + "/debug/pprof/profile?seconds=1")
	require.Equal(t, http.StatusOK, code)
	// Only the profiler: the API is not on the debug listener…
	code, _ = get("http://" + dbg + "/healthz")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = get("http://" + dbg + "/sessions")
	require.Equal(t, http.StatusNotFound, code)
	// …and the profiler is not on the API's.
	code, _ = get("http://" + api + "/debug/pprof/")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = get("http://" + api + "/healthz")
	require.Equal(t, http.StatusOK, code)

	cancel()
	require.NoError(t, <-errCh)
	// Stopping serve closes the debug listener too.
	_, err := http.Get("http://" + dbg + "/debug/pprof/")
	require.Error(t, err)
}

// TestServeNoDebugAddrByDefault: without --debug-addr no listener starts
// and the API does not serve the profiler.
func TestServeNoDebugAddrByDefault(t *testing.T) {
	t.Parallel()
	cfg, err := parseServeFlags(nil, env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard})
	require.NoError(t, err)
	require.Empty(t, cfg.Debug.Addr)
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"))
	resp, err := http.Get(d.base + "/debug/pprof/")
	require.NoError(t, err)
	hxtest.Close(t, resp.Body)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestDebugAddrFlag: serve and worker take --debug-addr and its variable
// HXD_DEBUG_ADDR (the flag wins), and refuse a non-loopback address.
func TestDebugAddrFlag(t *testing.T) {
	t.Parallel()
	workerArgs := []string{"--temporal-address", "127.0.0.1:7233", "--s3-endpoint", "http://127.0.0.1:9000", "--s3-bucket", "b"}
	parsers := map[string]func(args []string, e env) (string, error){
		"serve": func(args []string, e env) (string, error) {
			c, err := parseServeFlags(args, e)
			if err != nil {
				return "", err
			}
			return c.Debug.Addr, nil
		},
		"worker": func(args []string, e env) (string, error) {
			c, err := parseWorkerFlags(append(workerArgs[:len(workerArgs):len(workerArgs)], args...), e)
			if err != nil {
				return "", err
			}
			return c.Debug.Addr, nil
		},
	}
	tests := []struct {
		name    string
		args    []string
		envAddr string
		want    string
		wantErr string
	}{
		{name: "off by default"},
		{name: "flag", args: []string{"--debug-addr", "127.0.0.1:6060"}, want: "127.0.0.1:6060"},
		{name: "variable", envAddr: "localhost:6061", want: "localhost:6061"},
		{name: "flag wins", args: []string{"--debug-addr", "[::1]:6062"}, envAddr: "127.0.0.1:6061", want: "[::1]:6062"},
		{name: "not loopback", args: []string{"--debug-addr", "0.0.0.0:6060"}, wantErr: "loopback"},
		{name: "variable not loopback", envAddr: "192.0.2.1:6060", wantErr: "loopback"},
		{name: "no port", args: []string{"--debug-addr", "127.0.0.1"}, wantErr: "--debug-addr"},
	}
	for cmd, parse := range parsers {
		for _, tt := range tests {
			t.Run(cmd+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				vars := map[string]string{"HXD_DEBUG_ADDR": tt.envAddr, "HXD_S3_ACCESS_KEY": "k", "HXD_S3_SECRET_KEY": "s"}
				got, err := parse(tt.args, env{getenv: func(k string) string { return vars[k] }, stdout: io.Discard, stderr: io.Discard})
				if tt.wantErr != "" {
					var ee *exitError
					require.ErrorAs(t, err, &ee)
					require.Equal(t, 2, ee.code)
					require.True(t, strings.Contains(err.Error(), tt.wantErr), "%v", err)
					return
				}
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
			})
		}
	}
}
