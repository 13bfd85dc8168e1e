package main

// Temporal engine end to end (issue 8): a real Temporal dev server
// (hxtest.StartTemporal), a real Redis (hxtest.RedisAddr) and a real
// S3-compatible server (s3test.StartS3); `hxd serve --engine temporal` runs
// in-process, `hxd worker` runs as child processes (this test binary
// re-executed, see main_test.go). A worker is SIGKILLed while webhook tool
// calls are in flight and a fresh one finishes every run; no tool whose
// result reached Temporal runs again.
//
// These tests need HXD_TEST_TEMPORAL=1 (`make test-temporal`): the first
// run builds the Temporal CLI and versitygw (minutes, cached).

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/hxtest/s3test"
	"hxd/internal/temporal"
)

// temporalEnv is one Temporal, Redis and S3 for a test, with the
// arguments every hxd process of the test shares.
type temporalEnv struct {
	temporal  *hxtest.TemporalServer
	s3        *s3test.S3Server
	redisAddr string
	taskQueue string
	// flags are the connection flags of serve and worker.
	flags []string
	// env are the S3 credentials (HXD_S3_*).
	env []string
}

// requireTemporalTests skips unless HXD_TEST_TEMPORAL=1.
func requireTemporalTests(t testing.TB) {
	t.Helper()
	if os.Getenv("HXD_TEST_TEMPORAL") != "1" {
		t.Skip("Temporal engine end-to-end tests: set HXD_TEST_TEMPORAL=1 (make test-temporal)")
	}
}

func newTemporalEnv(t testing.TB) *temporalEnv {
	t.Helper()
	requireTemporalTests(t)
	te := &temporalEnv{
		temporal: hxtest.StartTemporal(t, hxtest.TemporalOptions{
			SearchAttributes: map[string]string{temporal.OwnerSearchAttribute: "Keyword"},
		}),
		s3:        s3test.StartS3(t),
		redisAddr: hxtest.RedisAddr(t),
		taskQueue: "hxd-test-" + strconv.FormatInt(time.Now().UnixNano(), 36),
	}
	te.flags = []string{
		"--temporal-address", te.temporal.Address, "--namespace", te.temporal.Namespace,
		"--task-queue", te.taskQueue, "--redis-addr", te.redisAddr,
		"--s3-endpoint", "http://" + te.s3.Endpoint, "--s3-bucket", te.s3.Bucket, "--s3-region", te.s3.Region,
	}
	te.env = []string{"HXD_S3_ACCESS_KEY=" + te.s3.AccessKey, "HXD_S3_SECRET_KEY=" + te.s3.SecretKey}
	return te
}

func (te *temporalEnv) getenv(name string) string {
	for _, kv := range te.env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}

// serve runs `hxd serve --engine temporal` in-process on 127.0.0.1:0.
func (te *temporalEnv) serve(t testing.TB, agents string) *daemon {
	t.Helper()
	return serveInProcess(t, te.getenv, append([]string{"serve", "--engine", "temporal", "--addr", "127.0.0.1:0",
		"--agents", agents, "--shutdown-timeout", "500ms", "--bundle-signing-key", testSigningKey(t)}, te.flags...))
}

// serveInProcess runs hxd with args (a serve command) in-process until the
// test ends and returns it once it listens.
func serveInProcess(t testing.TB, getenv func(string) string, args []string) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrCh := make(chan string, 1)
	errCh := make(chan error, 1)
	go func() {
		errCh <- run(ctx, args, env{
			getenv: getenv, stdout: io.Discard, stderr: testWriter{t},
			onListen: func(addr string) { addrCh <- addr },
		})
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case err := <-errCh:
		cancel()
		t.Fatalf("hxd %v exited: %v", args, err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("hxd %v did not start", args)
	}
	d := &daemon{base: "http://" + addr}
	stopped := false
	d.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-errCh)
	}
	t.Cleanup(d.stop)
	return d
}

// worker starts `hxd worker` as a child process.
func (te *temporalEnv) worker(t *testing.T, name, agents string) *hxdChild {
	t.Helper()
	argv := append([]string{"worker", "--agents", agents, "--workdir", t.TempDir()}, te.flags...)
	return spawnHxdArgs(t, name, argv, te.env...)
}

// testWriter sends the in-process daemon's log to t.Log when HXD_TEST_LOG is set.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	if os.Getenv("HXD_TEST_LOG") != "" {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// freezeHook is a webhook tool server that counts calls per execution key
// and, once frozen, leaves every new call hanging until its client goes
// away (the killed worker's connection closes).
type freezeHook struct {
	srv   *httptest.Server
	delay time.Duration

	mu       sync.Mutex
	frozen   bool
	calls    []freezeCall
	arrivals chan string
}

type freezeCall struct {
	key      string
	answered bool
	at       time.Time // when it was answered
}

func newFreezeHook(t *testing.T, delay time.Duration) *freezeHook {
	t.Helper()
	h := &freezeHook{delay: delay, arrivals: make(chan string, 1000)}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *freezeHook) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ExecutionKey string `json:"execution_key"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	i := len(h.calls)
	h.calls = append(h.calls, freezeCall{key: body.ExecutionKey})
	frozen := h.frozen
	h.mu.Unlock()
	h.arrivals <- body.ExecutionKey
	if frozen {
		<-r.Context().Done() // never answered: the worker dies meanwhile
		return
	}
	select {
	case <-time.After(h.delay):
	case <-r.Context().Done():
		return
	}
	h.mu.Lock()
	h.calls[i].answered, h.calls[i].at = true, time.Now()
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"content": "ok " + body.ExecutionKey, "is_error": false})
}

func (h *freezeHook) setFrozen(v bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frozen = v
}

func (h *freezeHook) snapshot() []freezeCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// waitRun polls GET /runs/{id} until the run is not running.
func waitRunDone(t *testing.T, d *daemon, runID string, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]any
	for time.Now().Before(deadline) {
		resp, body := d.do(t, http.MethodGet, "/runs/"+runID+"", nil)
		if resp.StatusCode == http.StatusOK {
			last = decode(t, body)
			if last["status"] != "running" {
				return last
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("run %s still not done after %s: %v", runID, timeout, last)
	return nil
}

// TestTemporalEngineEndToEnd: runs through the HTTP API on the Temporal
// engine survive a SIGKILLed worker; tools whose result was recorded run
// exactly once; SSE streams the events; recording is refused; a payload
// over 64 KiB travels through S3; lost event history is a gap event.
func TestTemporalEngineEndToEnd(t *testing.T) {
	te := newTemporalEnv(t)
	const steps, runs = 3, 3
	hook := newFreezeHook(t, 150*time.Millisecond)
	agents := writeHookAgent(t, "hooker", hook.srv.URL, "idempotent", steps)
	d := te.serve(t, agents)

	t.Run("recording is unsupported", func(t *testing.T) {
		resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{
			"agent": map[string]any{"name": "hooker", "version": "v1"}, "recording": true,
		})
		requireProblem(t, resp, body, http.StatusUnprocessableEntity, "recording_unsupported")
	})
	t.Run("unknown agent and duplicate session", func(t *testing.T) {
		resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]any{"name": "nope", "version": "v1"}})
		requireProblem(t, resp, body, http.StatusUnprocessableEntity, "unknown_agent")
		req := map[string]any{"agent": map[string]any{"name": "hooker", "version": "v1"}, "session_id": "dup-" + te.taskQueue}
		resp, body = d.do(t, http.MethodPost, "/sessions", req)
		require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
		resp, body = d.do(t, http.MethodPost, "/sessions", req)
		requireProblem(t, resp, body, http.StatusConflict, "session_exists")
	})

	w1 := te.worker(t, "worker-1", agents)

	// Sessions and runs, submitted while worker-1 is up.
	type sub struct{ session, run string }
	var subs []sub
	for i := range runs {
		resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{
			"agent": map[string]any{"name": "hooker", "version": "v1"}, "metadata": map[string]any{"i": i},
		})
		require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
		sid := decode(t, body)["session_id"].(string)
		resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "go", "request_id": "req-" + sid})
		require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
		run := decode(t, body)
		require.Equal(t, "running", run["status"])
		subs = append(subs, sub{sid, run["run_id"].(string)})
		// The same request again: the same run, 200.
		resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "go", "request_id": "req-" + sid})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, run["run_id"], decode(t, body)["run_id"])
		// The same request id with another message: 409.
		resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "other", "request_id": "req-" + sid})
		requireProblem(t, resp, body, http.StatusConflict, "request_id_conflict")
		// A new request while the run is unfinished: 409 session_busy.
		resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "again"})
		requireProblem(t, resp, body, http.StatusConflict, "session_busy")
	}

	// A live SSE stream of the first run, across the crash.
	sseDone := make(chan []sseFrame, 1)
	go func() {
		sseDone <- readSSELong(t, d, "/runs/"+subs[0].run+"/events", 3*time.Minute)
	}()

	// Freeze the hook once a few tool calls went through: every call from
	// then on hangs; a second later (every answered result recorded),
	// SIGKILL worker-1 with calls in flight.
	for range runs + 1 {
		select {
		case <-hook.arrivals:
		case <-time.After(60 * time.Second):
			t.Fatalf("tool calls did not start; worker log:\n%s", w1.log())
		}
	}
	hook.setFrozen(true)
	time.Sleep(time.Second)
	killedAt := time.Now()
	w1.kill()
	hook.setFrozen(false)
	before := hook.snapshot()
	var hanging int
	for _, c := range before {
		if !c.answered {
			hanging++
		}
	}
	t.Logf("worker-1 killed with %d tool calls (%d answered, %d in flight)", len(before), len(before)-hanging, hanging)

	// The API still answers from the authoritative state with no worker?
	// Queries need a worker; start the replacement now.
	w2 := te.worker(t, "worker-2", agents)
	for _, s := range subs {
		run := waitRunDone(t, d, s.run, 3*time.Minute)
		require.Equal(t, "completed", run["status"], "run %s: %v\nworker-2 log:\n%s", s.run, run, w2.log())
		require.Equal(t, "done", run["output"])
	}

	// Exactly once for every recorded result: a key answered before the
	// kill has exactly one call; every key got exactly one answer.
	calls := hook.snapshot()
	byKey := map[string][]freezeCall{}
	for _, c := range calls {
		byKey[c.key] = append(byKey[c.key], c)
	}
	require.Len(t, byKey, runs*steps, "one execution key per tool call")
	for _, s := range subs {
		for i := 1; i <= steps; i++ {
			found := false
			for key := range byKey {
				if strings.HasPrefix(key, s.run+":") && strings.HasSuffix(key, ":w"+strconv.Itoa(i)) {
					found = true
				}
			}
			require.True(t, found, "run %s has no call of w%d", s.run, i)
		}
	}
	var retried int
	for key, cs := range byKey {
		answered := 0
		for _, c := range cs {
			if c.answered {
				answered++
				if c.at.Before(killedAt) {
					require.Len(t, cs, 1, "key %s was answered before the kill and must never run again", key)
				}
			}
		}
		require.Equal(t, 1, answered, "key %s: exactly one answered call", key)
		if len(cs) > 1 {
			retried++
		}
	}
	require.Equal(t, hanging, retried, "exactly the calls in flight at the kill ran again")

	t.Run("SSE across the crash", func(t *testing.T) {
		var frames []sseFrame
		select {
		case frames = <-sseDone:
		case <-time.After(3 * time.Minute):
			t.Fatal("SSE stream did not end")
		}
		require.NotEmpty(t, frames)
		last := frames[len(frames)-1]
		require.Equal(t, "run_result", last.event, "the stream ends with run_result")
		require.Equal(t, "completed", last.data["data"].(map[string]any)["status"])
		prev := int64(-1)
		types := []string{}
		for _, f := range frames {
			n, err := strconv.ParseInt(f.id, 10, 64)
			require.NoError(t, err)
			require.Greater(t, n, prev, "cursors increase")
			prev = n
			types = append(types, f.event)
			require.Equal(t, subs[0].run, f.data["run_id"])
		}
		require.Contains(t, types, "tool_result")
		// Resuming from a cursor gives the rest only (JSON page).
		resp, body := d.do(t, http.MethodGet, "/runs/"+subs[0].run+"/events?after="+frames[0].id, nil, "Accept", "application/json")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		page := decode(t, body)
		require.Len(t, page["events"], len(frames)-1)
	})

	t.Run("lists", func(t *testing.T) {
		resp, body := d.do(t, http.MethodGet, "/sessions/"+subs[1].session, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		s := decode(t, body)
		require.Equal(t, map[string]any{"run_id": subs[1].run, "status": "completed"}, s["latest_run"])
		require.Equal(t, false, s["recording"])
		resp, body = d.do(t, http.MethodGet, "/sessions/"+subs[1].session+"/runs", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		items := decode(t, body)["items"].([]any)
		require.Len(t, items, 1)
		require.Equal(t, subs[1].run, items[0].(map[string]any)["run_id"])
		// Visibility is eventually consistent: poll for every session.
		require.Eventually(t, func() bool {
			resp, body := d.do(t, http.MethodGet, "/sessions?limit=1000", nil)
			if resp.StatusCode != http.StatusOK {
				return false
			}
			seen := map[string]bool{}
			for _, it := range decode(t, body)["items"].([]any) {
				seen[it.(map[string]any)["session_id"].(string)] = true
			}
			for _, s := range subs {
				if !seen[s.session] {
					return false
				}
			}
			return true
		}, 30*time.Second, 250*time.Millisecond)
		resp, body = d.do(t, http.MethodGet, "/sessions/"+subs[0].session+"/pending", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Empty(t, decode(t, body)["items"])
	})

	t.Run("timeline", func(t *testing.T) {
		resp, body := d.do(t, http.MethodGet, "/runs/"+subs[1].run+"/timeline", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		tl := decode(t, body)
		require.Equal(t, "completed", tl["status"])
		lanes := tl["lanes"].([]any)
		require.Equal(t, "model", lanes[0].(map[string]any)["id"])
		require.Len(t, lanes, 2, "the model and the webhook tool")
		var models, tools int
		prev := ""
		for _, a := range tl["attempts"].([]any) {
			at := a.(map[string]any)
			require.NotEmpty(t, at["started_at"])
			require.GreaterOrEqual(t, at["started_at"].(string)[:19], prev[:min(len(prev), 19)], "bars in start order")
			prev = at["started_at"].(string)
			switch at["kind"] {
			case "model":
				models++
				require.Equal(t, "succeeded", at["outcome"])
			case "tool":
				tools++
				require.Contains(t, []string{"succeeded", "retrying"}, at["outcome"], "%v", at)
			}
		}
		require.Equal(t, steps+1, models, "one model bar per step")
		require.GreaterOrEqual(t, tools, steps, "a bar per tool call (and per call that ran again)")
		marks := []string{}
		for _, m := range tl["marks"].([]any) {
			marks = append(marks, m.(map[string]any)["type"].(string))
		}
		require.Contains(t, marks, "completed", "the final status, from the run's events in Redis")
		resp, body = d.do(t, http.MethodGet, "/runs/no-such-run/timeline", nil)
		requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	})

	t.Run("export is unsupported", func(t *testing.T) {
		resp, body := d.do(t, http.MethodPost, "/runs/"+subs[0].run+"/export", map[string]any{})
		requireProblem(t, resp, body, http.StatusUnprocessableEntity, "recording_unsupported")
		resp, body = d.do(t, http.MethodPost, "/runs/no-such-run/export", map[string]any{})
		requireProblem(t, resp, body, http.StatusNotFound, "not_found")
		resp, body = d.do(t, http.MethodGet, "/runs/no-such-run", nil)
		requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	})

	t.Run("lost event history is a gap", func(t *testing.T) {
		rdb := redis.NewClient(&redis.Options{Addr: te.redisAddr})
		defer hxtest.Close(t, rdb)
		run := subs[2].run
		resp, body := d.do(t, http.MethodGet, "/runs/"+run+"/events", nil, "Accept", "application/json")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		page := decode(t, body)
		evs := page["events"].([]any)
		require.NotEmpty(t, evs)
		cursor := evs[0].(map[string]any)["cursor"].(string)
		require.NoError(t, rdb.Del(context.Background(), "harness:events:"+run, "harness:events:"+run+":ids").Err())
		resp, body = d.do(t, http.MethodGet, "/runs/"+run+"/events?after="+cursor, nil, "Accept", "application/json")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		page = decode(t, body)
		evs = page["events"].([]any)
		require.Len(t, evs, 1, string(body))
		gap := evs[0].(map[string]any)
		require.Equal(t, "gap", gap["type"])
		require.Equal(t, map[string]any{"reason": "event_history_unavailable"}, gap["data"])
		require.Equal(t, "0", page["next_cursor"], "start over")
		// SSE: one gap frame, then the stream of the stopped run ends.
		frames := readSSE(t, d, "/runs/"+run+"/events", "Last-Event-ID", cursor)
		require.Len(t, frames, 1)
		require.Equal(t, "gap", frames[0].event)
		// The run itself is still known: state is authoritative in Temporal.
		resp, body = d.do(t, http.MethodGet, "/runs/"+run, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, "completed", decode(t, body)["status"])
	})

	t.Run("payload over 64 KiB travels through S3", func(t *testing.T) {
		big := strings.Repeat("0123456789abcdef", 5000) // 80,000 bytes
		resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]any{"name": "hooker", "version": "v1"}})
		require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
		sid := decode(t, body)["session_id"].(string)
		before := s3Objects(t, te.s3)
		resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs?wait=60", map[string]any{"message": big})
		require.Contains(t, []int{http.StatusAccepted}, resp.StatusCode, string(body))
		run := decode(t, body)
		run = waitRunDone(t, d, run["run_id"].(string), time.Minute)
		require.Equal(t, "completed", run["status"], "%v", run)
		after := s3Objects(t, te.s3)
		var added []string
		for k := range after {
			if !before[k] && !strings.Contains(k, "/runs/") && !strings.Contains(k, "/owners/") {
				added = append(added, k)
			}
		}
		require.NotEmpty(t, added, "the 80 KB message reached Temporal as an S3 artifact reference")
		for _, k := range added {
			require.Regexp(t, `^harness-x/[0-9a-f]{64}$`, k)
		}
	})

	w2.stop()
}

// s3Objects lists every object key of the test bucket.
func s3Objects(t *testing.T, s *s3test.S3Server) map[string]bool {
	t.Helper()
	c := s.Client(t)
	out := map[string]bool{}
	for obj := range c.ListObjects(context.Background(), s.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		require.NoError(t, obj.Err)
		out[obj.Key] = true
	}
	return out
}

// readSSELong reads an SSE stream until it ends (or timeout) without
// failing the test from a goroutine: errors end the read.
func readSSELong(t *testing.T, d *daemon, path string, timeout time.Duration) []sseFrame {
	req, err := http.NewRequest(http.MethodGet, d.base+path, nil)
	if err != nil {
		return nil
	}
	client := &http.Client{Timeout: timeout}
	resp, err := client.Do(req)
	if err != nil {
		t.Logf("SSE: %v", err)
		return nil
	}
	defer hxtest.Close(t, resp.Body)
	raw, _ := io.ReadAll(resp.Body)
	var frames []sseFrame
	for _, block := range strings.Split(string(raw), "\n\n") {
		var f sseFrame
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "id: "):
				f.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				f.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f.data)
			}
		}
		if f.event != "" {
			frames = append(frames, f)
		}
	}
	return frames
}
