//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"hxd/internal/hxtest"
)

// do sends one request to the child and returns the response (body read)
// with its JSON body.
func (c *hxdChild) do(method, path string, body any) (*http.Response, map[string]any) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(c.t, err)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	require.NoError(c.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	require.NoError(c.t, err, "%s %s", method, path)
	defer hxtest.Close(c.t, resp.Body)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	var m map[string]any
	require.NoError(c.t, json.Unmarshal(raw, &m), "%s %s: %s", method, path, raw)
	return resp, m
}

// requireUnavailable checks a 503 unavailable problem with Retry-After.
func requireUnavailable(t *testing.T, resp *http.Response, body map[string]any) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%v", body)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.Equal(t, "unavailable", body["code"])
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
	require.Positive(t, secs)
}

// TestNoFileDescriptorsLeft (issue 18 item 3): hxd serve runs out of file
// descriptors (EMFILE: its limit lowered, with prlimit, below the ones it
// holds) while runs are in flight. Nothing answers 500: /readyz, and a
// request that needs a new descriptor, answer 503 unavailable with
// Retry-After, and the runs in flight complete. With descriptors back,
// /readyz is ready again and a submit goes through, without a restart.
func TestNoFileDescriptorsLeft(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agents := filepath.Join(dir, "agents")
	require.NoError(t, os.MkdirAll(agents, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(agents, "sleeper.yaml"), []byte(sleeperAgent), 0o600))
	c := startHxd(t, "nofile", filepath.Join(dir, "hxd.db"), agents)
	// One connection, kept alive: hxd cannot accept another meanwhile.
	c.client.Transport.(*http.Transport).MaxConnsPerHost = 1

	runs := make([]string, 5)
	for i := range runs {
		sid := c.createSession("sleeper")
		resp, m := c.do(http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "nap"})
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%v", m)
		runs[i] = m["run_id"].(string)
	}
	spare := c.createSession("sleeper")

	pid := c.cmd.Process.Pid
	var limit unix.Rlimit
	require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &limit))
	// Below every descriptor hxd holds (standard streams, the poller, the
	// listener, the database's files), so none is free.
	low := unix.Rlimit{Cur: 8, Max: limit.Max}
	require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_NOFILE, &low, nil))

	resp, m := c.do(http.MethodGet, "/readyz", nil)
	requireUnavailable(t, resp, m)
	resp, m = c.do(http.MethodPost, "/sessions/"+spare+"/runs", map[string]any{"message": "nap"})
	submitted := resp.StatusCode == http.StatusAccepted
	if !submitted { // a session lock may need a descriptor
		requireUnavailable(t, resp, m)
	}
	t.Logf("submit without descriptors: %d %v", resp.StatusCode, m["code"])
	for _, id := range runs {
		require.Eventually(t, func() bool {
			resp, m := c.do(http.MethodGet, "/runs/"+id, nil)
			if resp.StatusCode != http.StatusOK {
				requireUnavailable(t, resp, m) // a read may need a new connection
				return false
			}
			require.NotEqual(t, "failed", m["status"], "%v", m["error"])
			return m["status"] == "completed"
		}, 30*time.Second, 50*time.Millisecond, "run %s completes", id)
	}

	require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_NOFILE, &limit, nil))
	require.Eventually(t, func() bool {
		resp, _ := c.do(http.MethodGet, "/readyz", nil)
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond)
	if !submitted {
		resp, m = c.do(http.MethodPost, "/sessions/"+spare+"/runs", map[string]any{"message": "nap"})
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%v", m)
	}
	require.Equal(t, "completed", c.settle(c.latestRunID(spare))["status"])
}
