package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTemporalRunWithoutWorker (issue 18, item 10): with serve and one
// worker, a run is started; the worker is SIGKILLed; `GET /runs/{id}` then
// answers 503 `unavailable` with Retry-After (never 500), and within a minute or two with
// the problem detail that no worker is polling the task queue: Temporal
// answers the get_run query with a FailedPrecondition once no poller was
// seen for 20 s, or, while a workflow task is pending, lets it time out
// until the dead worker's pollers are silent for over a minute. The next
// GET says the same at once; once a new worker polls, the run answers 200
// again. Needs HXD_TEST_TEMPORAL=1 (make test-temporal).
func TestTemporalRunWithoutWorker(t *testing.T) {
	te := newTemporalEnv(t)
	agents := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(agents, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(agents, "quick.yaml"), []byte(apAgents["quick.yaml"]), 0o600))
	d := te.serve(t, agents)
	w1 := te.worker(t, "worker-1", agents)

	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]any{"name": "quick", "version": "v1"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sid := decode(t, body)["session_id"].(string)
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs?wait=30", map[string]any{"message": "go"})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s\nworker log:\n%s", body, w1.log())
	rid := decode(t, body)["run_id"].(string)
	run := waitRunDone(t, d, rid, 2*time.Minute)
	require.Equal(t, "completed", run["status"])

	w1.kill()
	// Until then a query waits out its deadline: 503 without detail.
	killed := time.Now()
	noWorker := func() (bool, string) {
		t.Helper()
		start := time.Now()
		resp, body := d.do(t, http.MethodGet, "/runs/"+rid, nil)
		t.Logf("GET /runs/%s %s after the kill: %d in %s: %s", rid, start.Sub(killed).Round(time.Second),
			resp.StatusCode, time.Since(start).Round(10*time.Millisecond), body)
		requireProblem(t, resp, body, http.StatusServiceUnavailable, "unavailable")
		require.NotEmpty(t, resp.Header.Get("Retry-After"), "a 503 says when to retry")
		detail, _ := decode(t, body)["detail"].(string)
		return detail != "", detail
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ok, detail := noWorker()
		if ok {
			require.Contains(t, detail, "No worker is polling the task queue")
			break
		}
		require.True(t, time.Now().Before(deadline), "GET /runs/%s never said that no worker polls", rid)
	}
	ok, detail := noWorker()
	require.True(t, ok, "still no worker")
	require.Contains(t, detail, "No worker is polling the task queue")

	w2 := te.worker(t, "worker-2", agents)
	deadline = time.Now().Add(2 * time.Minute)
	for {
		resp, body := d.do(t, http.MethodGet, "/runs/"+rid, nil)
		if resp.StatusCode == http.StatusOK {
			require.Equal(t, "completed", decode(t, body)["status"])
			break
		}
		requireProblem(t, resp, body, http.StatusServiceUnavailable, "unavailable")
		require.True(t, time.Now().Before(deadline), "GET /runs/%s never answered with worker-2 up; its log:\n%s", rid, w2.log())
		time.Sleep(200 * time.Millisecond)
	}
}
