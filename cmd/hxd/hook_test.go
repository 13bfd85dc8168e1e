package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	hxruntime "hxd/internal/runtime"
)

// cpReceiver is an operator endpoint for --checkpoint-hook tests: it
// answers each well-formed POST with answer(r, cp, n) (n counts attempts
// from 1; nil answers 204) and records the accepted notifications.
type cpReceiver struct {
	srv    *httptest.Server
	answer func(r *http.Request, cp checkpoint, n int) int

	mu       sync.Mutex
	attempts int
	got      []checkpoint
}

// newCPReceiver starts a receiver closed at the end of the test.
func newCPReceiver(t *testing.T, answer func(r *http.Request, cp checkpoint, n int) int) *cpReceiver {
	t.Helper()
	rc := &cpReceiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

// serve handles one POST.
func (rc *cpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	var cp checkpoint
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || dec.Decode(&cp) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.attempts++
	n := rc.attempts
	rc.mu.Unlock()
	code := http.StatusNoContent
	if rc.answer != nil {
		code = rc.answer(r, cp, n)
	}
	if code >= 200 && code < 300 {
		rc.mu.Lock()
		rc.got = append(rc.got, cp)
		rc.mu.Unlock()
	}
	w.WriteHeader(code)
}

// received returns a copy of the accepted notifications.
func (rc *cpReceiver) received() []checkpoint {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]checkpoint(nil), rc.got...)
}

// attemptCount returns how many POSTs arrived.
func (rc *cpReceiver) attemptCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.attempts
}

// fastHook returns a started hook with millisecond backoff, stopped at the
// end of the test.
func fastHook(t *testing.T, url string, mod func(*hookConfig)) *checkpointHook {
	t.Helper()
	cfg := hookConfig{URL: url, Logger: hxtest.Logger(t), MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	h := newCheckpointHook(cfg)
	require.NoError(t, h.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = h.Stop(ctx)
	})
	return h
}

func TestCheckpointHookURLValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		url  string
		ok   bool
	}{
		{name: "http", url: "http://127.0.0.1:9000/hook", ok: true},
		{name: "https with query", url: "https://ops.example.com/hxd?token=x", ok: true},
		{name: "relative", url: "/hook"},
		{name: "no scheme", url: "localhost:9000/hook"},
		{name: "other scheme", url: "ftp://example.com/hook"},
		{name: "no host", url: "http:///hook"},
		{name: "unparsable", url: "http://[::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := validateHookURL(tt.url)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), "--checkpoint-hook")
		})
	}
}

func TestCheckpointHookFlag(t *testing.T) {
	t.Parallel()
	stderr := &strings.Builder{}
	e := env{getenv: func(k string) string {
		if k == "HXD_CHECKPOINT_HOOK" {
			return "http://127.0.0.1:1/from-env"
		}
		return ""
	}, stdout: io.Discard, stderr: stderr}
	cfg, err := parseServeFlags(nil, e)
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:1/from-env", cfg.CheckpointHook)
	cfg, err = parseServeFlags([]string{"--checkpoint-hook", "https://127.0.0.1/flag"}, e)
	require.NoError(t, err)
	require.Equal(t, "https://127.0.0.1/flag", cfg.CheckpointHook, "the flag wins over the environment")

	_, err = parseServeFlags([]string{"--checkpoint-hook", "ftp://user:secret@example.com/x"}, e)
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.code)
	require.Contains(t, err.Error(), "--checkpoint-hook")
	require.NotContains(t, err.Error(), "secret", "the error must not echo credentials")
}

// TestCheckpointHookRetriesUntilAccepted: a receiver failing the first two
// attempts still gets every notification, in the order of the checkpoints.
func TestCheckpointHookRetriesUntilAccepted(t *testing.T) {
	t.Parallel()
	rc := newCPReceiver(t, func(_ *http.Request, _ checkpoint, n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	h := fastHook(t, rc.srv.URL, nil)
	want := []checkpoint{
		{SessionID: "s1", RunID: "r1", Status: hxruntime.StatusRunning, Phase: hxruntime.PhaseStart},
		{SessionID: "s1", RunID: "r1", Status: hxruntime.StatusRunning, Phase: hxruntime.PhaseModel},
		{SessionID: "s2", RunID: "r2", Status: hxruntime.StatusRunning, Phase: hxruntime.PhaseStart},
		{SessionID: "s1", RunID: "r1", Status: hxruntime.StatusCompleted, Phase: hxruntime.PhaseResult},
	}
	for _, cp := range want {
		h.Notify(cp.SessionID, cp.RunID, cp.Status, cp.Phase)
	}
	require.Eventually(t, func() bool { return len(rc.received()) == len(want) }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, want, rc.received())
	require.Equal(t, len(want)+2, rc.attemptCount())
}

// TestCheckpointHookNeverBlocks: while the receiver hangs, CheckpointFunc
// calls return at once; Stop then cancels the hanging request and returns.
func TestCheckpointHookNeverBlocks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	rc := newCPReceiver(t, func(r *http.Request, _ checkpoint, _ int) int {
		select {
		case <-release:
			return http.StatusOK
		case <-r.Context().Done(): // the hook gave up on this request
			return http.StatusServiceUnavailable
		}
	})
	// Registered after the receiver's Close, so it runs first.
	t.Cleanup(func() { close(release) })
	h := newCheckpointHook(hookConfig{URL: rc.srv.URL, Logger: hxtest.Logger(t), RequestTimeout: time.Minute})
	require.NoError(t, h.Start(context.Background()))
	notify := hxruntime.Config{CheckpointFunc: h.Notify}.CheckpointFunc // h.Notify is a runtime CheckpointFunc

	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			notify("s", "r", hxruntime.StatusRunning, hxruntime.PhaseTools)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("CheckpointFunc blocked while the receiver hangs")
	}
	require.Eventually(t, func() bool { return rc.attemptCount() == 1 }, 10*time.Second, 5*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- h.Stop(ctx) }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return while the receiver hangs")
	}
	require.Empty(t, rc.received())
	// After Stop, notifications are dropped without blocking.
	notify("s", "r", hxruntime.StatusCompleted, hxruntime.PhaseResult)
	require.Equal(t, 1, rc.attemptCount())
}

// TestCheckpointHookQueueBound: beyond MaxQueue the oldest notifications
// are dropped, never the caller blocked.
func TestCheckpointHookQueueBound(t *testing.T) {
	t.Parallel()
	// Not started: nothing leaves the queue.
	h := newCheckpointHook(hookConfig{URL: "http://127.0.0.1:1/", Logger: hxtest.Logger(t), MaxQueue: 5})
	for i := range 100 {
		h.Notify("s", "r"+string(rune('a'+i%26)), hxruntime.StatusRunning, hxruntime.PhaseModel)
	}
	h.mu.Lock()
	q := append([]checkpoint(nil), h.queue...)
	h.mu.Unlock()
	require.Len(t, q, 5)
	require.Equal(t, "r"+string(rune('a'+99%26)), q[4].RunID, "the newest is kept")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, h.Stop(ctx))
}

// TestCheckpointHookGivesUp: a notification the receiver keeps refusing is
// dropped after MaxElapsed and the next one is sent.
func TestCheckpointHookGivesUp(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	refused := 0
	rc := newCPReceiver(t, func(_ *http.Request, cp checkpoint, _ int) int {
		if cp.RunID != "doomed" {
			return http.StatusOK
		}
		mu.Lock()
		refused++
		mu.Unlock()
		return http.StatusServiceUnavailable
	})
	h := fastHook(t, rc.srv.URL, func(c *hookConfig) { c.MaxElapsed = 30 * time.Millisecond })
	h.Notify("s", "doomed", hxruntime.StatusRunning, hxruntime.PhaseStart)
	h.Notify("s", "fine", hxruntime.StatusCompleted, hxruntime.PhaseResult)
	require.Eventually(t, func() bool { return len(rc.received()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, "fine", rc.received()[0].RunID)
	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, refused, 1, "the refused notification was retried before it was dropped")
}

// TestCheckpointHookStopFlushes: Stop delivers what is queued before it
// returns, and a hook stopped without Start does not hang.
func TestCheckpointHookStopFlushes(t *testing.T) {
	t.Parallel()
	rc := newCPReceiver(t, nil)
	h := newCheckpointHook(hookConfig{URL: rc.srv.URL, Logger: hxtest.Logger(t)})
	for range 50 { // queued before Start, like start-up recovery's commits
		h.Notify("s", "r", hxruntime.StatusRunning, hxruntime.PhaseModel)
	}
	require.NoError(t, h.Start(context.Background()))
	h.Notify("s", "r", hxruntime.StatusCompleted, hxruntime.PhaseResult)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, h.Stop(ctx))
	got := rc.received()
	require.Len(t, got, 51)
	require.Equal(t, hxruntime.StatusCompleted, got[50].Status)
	require.NoError(t, h.Stop(ctx), "Stop is idempotent")
	require.Error(t, h.Start(context.Background()), "a stopped hook does not restart")

	never := newCheckpointHook(hookConfig{URL: rc.srv.URL})
	never.Notify("s", "r", hxruntime.StatusRunning, hxruntime.PhaseStart)
	require.NoError(t, never.Stop(ctx))
}

// TestCheckpointHookServeEndToEnd: `serve --checkpoint-hook` notifies the
// receiver of the demo invoice run's checkpoints, ending with
// completed/result.
func TestCheckpointHookServeEndToEnd(t *testing.T) {
	t.Parallel()
	rc := newCPReceiver(t, nil)
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), "--checkpoint-hook", rc.srv.URL+"/checkpoints")

	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{
		"agent": map[string]string{"name": "invoice-analyst", "version": "v1"},
	})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sid := decode(t, body)["session_id"].(string)
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs?wait=20", map[string]any{"message": "x"})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	run := decode(t, body)
	require.Equal(t, "completed", run["status"], string(body))
	rid := run["run_id"].(string)

	final := checkpoint{SessionID: sid, RunID: rid, Status: hxruntime.StatusCompleted, Phase: hxruntime.PhaseResult}
	require.Eventually(t, func() bool {
		got := rc.received()
		return len(got) > 0 && got[len(got)-1] == final
	}, 10*time.Second, 10*time.Millisecond)
	d.stop()
	got := rc.received()
	require.Greater(t, len(got), 2, "every checkpoint is notified")
	require.Equal(t, final, got[len(got)-1])
	for _, cp := range got[:len(got)-1] {
		require.Equal(t, sid, cp.SessionID)
		require.Equal(t, rid, cp.RunID)
		require.Equal(t, hxruntime.StatusRunning, cp.Status, "checkpoints arrive in commit order")
	}
}
