package main

// Retention on the Temporal engine (issue 23): `hxd serve --engine
// temporal` sweeps finished sessions per agent retention. Needs
// HXD_TEST_TEMPORAL=1 (make test-temporal), like temporal_e2e_test.go.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/temporal/events"
)

// TestTemporalRetention: a session of an agent kept 1s is deleted once
// its run completed: its owner gets 410 gone for it, its run, a re-sent
// request id and its id when creating a session again, anyone else 404;
// its event stream, run-index entry and its own artifact are deleted, an
// artifact another session references survives. A session awaiting an
// approval, one whose run is running, and one without a run are never
// touched; the running one is deleted once it finished.
func TestTemporalRetention(t *testing.T) {
	te := newTemporalEnv(t)
	release := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Input map[string]any `json:"input"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		what, _ := body.Input["what"].(string)
		if what == "block" {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"content":   "file of " + what,
			"artifacts": []map[string]any{{"media_type": "text/plain", "base64": base64.StdEncoding.EncodeToString([]byte("bytes of " + what))}},
		})
	}))
	t.Cleanup(hook.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	agent := func(name, retention, permission string, what ...string) string {
		var calls []string
		for i, w := range what {
			calls = append(calls, fmt.Sprintf("{id: c%d, name: hook, input: {what: %s}}", i, w))
		}
		y := fmt.Sprintf(`name: %s
version: v1
model:
  provider: scripted
  script:
    - tool_calls: [%s]
    - text: done
tools:
  - name: hook
    kind: webhook
    url: %s
    replay_policy: idempotent
    permission: %s
    timeout_seconds: 120
    input_schema: {type: object, properties: {what: {type: string}}}
`, name, strings.Join(calls, ", "), hook.URL, permission)
		if retention != "" {
			y += "retention: {finished_for: " + retention + "}\n"
		}
		return y
	}
	agents := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(agents, 0o700))
	for name, y := range map[string]string{
		"brief":   agent("brief", "1s", "allow", "shared", "solo"),
		"keeper":  agent("keeper", "", "allow", "shared"),
		"asker":   agent("asker", "1s", "ask", "asked"),
		"blocker": agent("blocker", "1s", "allow", "block"),
	} {
		require.NoError(t, os.WriteFile(filepath.Join(agents, name+".yaml"), []byte(y), 0o600))
	}

	iss := hxtest.NewIssuer(t)
	d := serveInProcess(t, te.getenv, append([]string{"serve", "--engine", "temporal", "--addr", "127.0.0.1:0",
		"--agents", agents, "--shutdown-timeout", "500ms",
		"--auth", "oidc", "--oidc-issuer", iss.URL, "--oidc-audience", hxtest.IssuerAudience,
		"--gc-interval", "200ms", "--tombstone-for", "1h",
		"--bundle-signing-key", testSigningKey(t)}, te.flags...))
	w := te.worker(t, "worker", agents)
	alice := bearerHdr(iss.Token(t, "alice", nil))
	bob := bearerHdr(iss.Token(t, "bob", nil))

	create := func(agentName string) string {
		t.Helper()
		resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]any{"name": agentName, "version": "v1"}}, alice...)
		require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
		return decode(t, body)["session_id"].(string)
	}
	submit := func(sid, requestID string) string {
		t.Helper()
		resp, body := d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "go", "request_id": requestID}, alice...)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
		return decode(t, body)["run_id"].(string)
	}
	status := func(runID string) (int, string) {
		resp, body := d.do(t, http.MethodGet, "/runs/"+runID, nil, alice...)
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, ""
		}
		s, _ := decode(t, body)["status"].(string)
		return resp.StatusCode, s
	}

	// The kept session first, so the shared artifact is referenced twice.
	kept := create("keeper")
	keptRun := submit(kept, "req-kept")
	require.Eventually(t, func() bool { _, s := status(keptRun); return s == "completed" }, 2*time.Minute, 100*time.Millisecond,
		"worker log:\n%s", w.log())
	asking := create("asker")
	askRun := submit(asking, "req-ask")
	require.Eventually(t, func() bool { _, s := status(askRun); return s == "awaiting_input" }, time.Minute, 100*time.Millisecond)
	blocking := create("blocker")
	blockRun := submit(blocking, "req-block")
	idle := create("brief") // no run: never deleted

	brief := create("brief")
	briefRun := submit(brief, "req-brief")
	require.Eventually(t, func() bool {
		code, _ := status(briefRun)
		return code == http.StatusGone
	}, 2*time.Minute, 100*time.Millisecond, "the brief session is deleted once its run completed; worker log:\n%s", w.log())

	// 410 to the owner, 404 to anyone else.
	resp, body := d.do(t, http.MethodGet, "/sessions/"+brief, nil, alice...)
	requireProblem(t, resp, body, http.StatusGone, "gone")
	resp, body = d.do(t, http.MethodGet, "/runs/"+briefRun, nil, alice...)
	requireProblem(t, resp, body, http.StatusGone, "gone")
	resp, body = d.do(t, http.MethodPost, "/sessions/"+brief+"/runs", map[string]any{"message": "go", "request_id": "req-brief"}, alice...)
	requireProblem(t, resp, body, http.StatusGone, "gone")
	resp, body = d.do(t, http.MethodPost, "/sessions", map[string]any{"session_id": brief, "agent": map[string]any{"name": "brief", "version": "v1"}}, alice...)
	requireProblem(t, resp, body, http.StatusGone, "gone")
	resp, body = d.do(t, http.MethodGet, "/sessions/"+brief, nil, bob...)
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	resp, body = d.do(t, http.MethodGet, "/runs/"+briefRun, nil, bob...)
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")

	// Listing the owner's sessions skips it (visibility may still list
	// its workflow for a while).
	resp, body = d.do(t, http.MethodGet, "/sessions?limit=100", nil, alice...)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.NotContains(t, string(body), brief)

	// What it left is gone; the shared artifact is not.
	shared, solo := sha256Hex("bytes of shared"), sha256Hex("bytes of solo")
	require.Eventually(t, func() bool {
		objs := s3Objects(t, te.s3)
		return !objs["harness-x/"+solo] && !objs["harness-x/runs/"+briefRun]
	}, 10*time.Second, 100*time.Millisecond)
	objs := s3Objects(t, te.s3)
	require.True(t, objs["harness-x/"+shared], "the artifact the kept session references survives")
	resp, body = d.do(t, http.MethodGet, "/artifacts/"+shared, nil, alice...)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "bytes of shared", string(body))
	resp, body = d.do(t, http.MethodGet, "/artifacts/"+solo, nil, alice...)
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	rdb := redis.NewClient(&redis.Options{Addr: te.redisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	n, err := rdb.Exists(context.Background(), events.DefaultKeyPrefix+briefRun, events.DefaultKeyPrefix+keptRun).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the deleted run's event stream is gone, the kept run's is not")

	// The sweep that deleted it took none of the others.
	for _, sid := range []string{kept, asking, blocking, idle} {
		resp, body := d.do(t, http.MethodGet, "/sessions/"+sid, nil, alice...)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", sid, body)
	}
	_, s := status(askRun)
	require.Equal(t, "awaiting_input", s)
	_, s = status(blockRun)
	require.Equal(t, "running", s)

	// Once it finished, the blocked session goes too.
	close(release)
	require.Eventually(t, func() bool {
		code, _ := status(blockRun)
		return code == http.StatusGone
	}, 2*time.Minute, 100*time.Millisecond, "worker log:\n%s", w.log())
	// Sweeps after the running session was found unfinished: the others
	// are still whole, and the metrics count both deletions.
	for _, sid := range []string{kept, asking, idle} {
		resp, body := d.do(t, http.MethodGet, "/sessions/"+sid, nil, alice...)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", sid, body)
	}
	_, s = status(askRun)
	require.Equal(t, "awaiting_input", s)
	var metrics string
	require.Eventually(t, func() bool {
		resp, body := d.do(t, http.MethodGet, "/metrics", nil, alice...)
		metrics = string(body)
		return resp.StatusCode == http.StatusOK && strings.Contains(metrics, "hxd_gc_deleted_sessions_total 2\n") &&
			strings.Contains(metrics, "hxd_gc_tombstones 4\n") // a session and a run tombstone each
	}, 10*time.Second, 100*time.Millisecond, "metrics:\n%s", func() string {
		var gc []string
		for _, l := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(l, "hxd_gc") {
				gc = append(gc, l)
			}
		}
		return strings.Join(gc, "\n")
	}())
	w.stop()
}
