package main

// Crash matrix (issue 3): hxd runs as a child process (this test binary
// re-executed with HXD_TEST_RUN_MAIN=1, see main_test.go) and is made to
// exit at every boundary commit of a one-tool run with HXD_CRASH_AFTER, or
// is SIGKILLed at random moments; a fresh child on the same database must
// finish the run as REFERENCE §4.3 / DESIGN §3 say, never calling a tool
// whose raw result was committed again, and leaving a gap-free journal.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hxhttp "hxd/internal/http"
	"hxd/internal/hxbundle"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/store/sqlite"
)

// ---------------------------------------------------------------------------
// Child process

// hxdChild is `hxd serve` running as a child process.
type hxdChild struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:PORT once listening
	client *http.Client

	mu     sync.Mutex
	stderr bytes.Buffer

	listening chan string   // receives the address once
	exited    chan struct{} // closed when the process is gone
	exitCode  int           // valid after exited
}

var listenLine = regexp.MustCompile(`msg="hxd listening".*\baddr=(\S+)`)

// childEnv is the parent's environment without any HXD_* setting or
// DATABASE_URL (which would switch serve to PostgreSQL), plus env.
func childEnv(env ...string) []string {
	out := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HXD_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// spawnHxd starts `hxd serve` on db with the agents folder; env adds
// variables (e.g. HXD_CRASH_AFTER=…). It does not wait for the listener.
func spawnHxd(t *testing.T, name, db, agents string, env ...string) *hxdChild {
	t.Helper()
	return spawnHxdArgs(t, name, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--agents", agents,
		"--workdir", filepath.Dir(db), "--shutdown-timeout", "500ms"}, env...)
}

// spawnHxdArgs starts hxd with the command line argv (without the program
// name); env adds variables. It does not wait for the listener.
func spawnHxdArgs(t *testing.T, name string, argv []string, env ...string) *hxdChild {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	args, err := json.Marshal(argv)
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$") // the flag is never parsed: TestMain runs main()
	cmd.Env = childEnv(append([]string{envRunMain + "=1", envArgs + "=" + string(args)}, env...)...)
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &hxdChild{
		t: t, name: name, cmd: cmd,
		client:    &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{}},
		listening: make(chan string, 1), exited: make(chan struct{}),
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.stderr.WriteString(line + "\n")
			c.mu.Unlock()
			if m := listenLine.FindStringSubmatch(line); m != nil && !sent {
				sent = true
				c.listening <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
		_ = cmd.Wait()
		c.exitCode = cmd.ProcessState.ExitCode() // -1 when killed by a signal
		close(c.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
		c.client.CloseIdleConnections()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", c.name, c.log())
		}
	})
	return c
}

func (c *hxdChild) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// startHxd spawns a child and waits until it listens.
func startHxd(t *testing.T, name, db, agents string, env ...string) *hxdChild {
	t.Helper()
	c := spawnHxd(t, name, db, agents, env...)
	c.awaitListening()
	return c
}

func (c *hxdChild) awaitListening() {
	c.t.Helper()
	select {
	case addr := <-c.listening:
		c.base = addr
	case <-c.exited:
		c.t.Fatalf("%s exited with code %d before listening", c.name, c.exitCode)
	case <-time.After(30 * time.Second):
		c.t.Fatalf("%s did not start listening", c.name)
	}
}

// waitExit waits for the process to end and returns its exit code (-1 for
// a signal).
func (c *hxdChild) waitExit(d time.Duration) int {
	c.t.Helper()
	select {
	case <-c.exited:
		return c.exitCode
	case <-time.After(d):
		c.t.Fatalf("%s did not exit within %s", c.name, d)
		return 0
	}
}

// stop ends the child gracefully (SIGTERM) and requires exit code 0.
func (c *hxdChild) stop() {
	c.t.Helper()
	require.NoError(c.t, c.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(c.t, 0, c.waitExit(20*time.Second), "%s exit code after SIGTERM", c.name)
	c.client.CloseIdleConnections()
}

// kill SIGKILLs the child and waits until it is gone.
func (c *hxdChild) kill() {
	c.t.Helper()
	_ = c.cmd.Process.Kill()
	c.waitExit(10 * time.Second)
	c.client.CloseIdleConnections()
}

// try sends one request; err is a transport error (the child may be dying).
func (c *hxdChild) try(method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, errors.Join(err, resp.Body.Close())
}

// call sends one request that must reach the child.
func (c *hxdChild) call(method, path string, body any) (int, map[string]any) {
	c.t.Helper()
	code, raw, err := c.try(method, path, body)
	require.NoError(c.t, err, "%s %s", method, path)
	var m map[string]any
	require.NoError(c.t, json.Unmarshal(raw, &m), "%s %s: %s", method, path, raw)
	return code, m
}

// createSession creates a recorded session of agent name@v1.
func (c *hxdChild) createSession(agentName string) string {
	c.t.Helper()
	code, m := c.call(http.MethodPost, "/sessions", map[string]any{
		"agent": map[string]string{"name": agentName, "version": "v1"}, "recording": true,
	})
	require.Equal(c.t, http.StatusCreated, code, m)
	return m["session_id"].(string)
}

// latestRunID reads the session's latest run id.
func (c *hxdChild) latestRunID(sid string) string {
	c.t.Helper()
	code, m := c.call(http.MethodGet, "/sessions/"+url.PathEscape(sid), nil)
	require.Equal(c.t, http.StatusOK, code, m)
	latest, ok := m["latest_run"].(map[string]any)
	require.True(c.t, ok, "session has no latest run: %v", m)
	return latest["run_id"].(string)
}

// getRun reads a run.
func (c *hxdChild) getRun(rid string) map[string]any {
	c.t.Helper()
	code, m := c.call(http.MethodGet, "/runs/"+url.PathEscape(rid), nil)
	require.Equal(c.t, http.StatusOK, code, m)
	return m
}

// settle polls the run until its status is not running (≤ 15 s).
func (c *hxdChild) settle(rid string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		run := c.getRun(rid)
		if run["status"] != "running" {
			return run
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: run %s still running after 15 s: %v", c.name, rid, run)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventTypes lists the types of the run's public events.
func (c *hxdChild) eventTypes(rid string) []string {
	c.t.Helper()
	code, m := c.call(http.MethodGet, "/runs/"+url.PathEscape(rid)+"/events?after=0", nil)
	require.Equal(c.t, http.StatusOK, code, m)
	var types []string
	for _, ev := range m["events"].([]any) {
		types = append(types, ev.(map[string]any)["type"].(string))
	}
	return types
}

// ---------------------------------------------------------------------------
// Webhook server

// hookCall is one webhook invocation as the server saw it.
type hookCall struct {
	Key        string    // execution_key of the body
	IdemHeader string    // Idempotency-Key header
	Attempt    int       // attempt of the body
	At         time.Time // arrival
}

// hookServer counts webhook invocations per execution key and answers
// {"content": "ok <n>", "is_error": false}, n = calls of that key so far.
type hookServer struct {
	srv *httptest.Server
	// delay, when set, is how long to wait before answering call n (1-based,
	// over all keys); a client that goes away ends the wait without an answer.
	delay func(n int) time.Duration

	mu       sync.Mutex
	calls    []hookCall
	arrivals chan hookCall
}

func newHookServer(t *testing.T, delay func(n int) time.Duration) *hookServer {
	t.Helper()
	h := &hookServer{delay: delay, arrivals: make(chan hookCall, 100)}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookServer) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ExecutionKey string `json:"execution_key"`
		Attempt      int    `json:"attempt"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	call := hookCall{Key: body.ExecutionKey, IdemHeader: r.Header.Get("Idempotency-Key"), Attempt: body.Attempt, At: time.Now()}
	h.mu.Lock()
	h.calls = append(h.calls, call)
	total := len(h.calls)
	n := 0
	for _, c := range h.calls {
		if c.Key == call.Key {
			n++
		}
	}
	h.mu.Unlock()
	select {
	case h.arrivals <- call:
	default:
	}
	if h.delay != nil {
		if d := h.delay(total); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"content": fmt.Sprintf("ok %d", n), "is_error": false})
}

// callsFor returns the calls of one execution key, in arrival order.
func (h *hookServer) callsFor(key string) []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookCall
	for _, c := range h.calls {
		if c.Key == key {
			out = append(out, c)
		}
	}
	return out
}

func (h *hookServer) all() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// ---------------------------------------------------------------------------
// Agents and journal checks

// writeHookAgent writes agent <name>@v1 to a new agents folder: a scripted
// model whose first `steps` steps each call the webhook tool "hook" (call
// ids w1, w2, …) and whose last step answers "done". Every step reports
// usage, so usage_incomplete is set only by a crash with a model attempt
// open.
func writeHookAgent(t *testing.T, name, hookURL, policy string, steps int) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nversion: v1\nmodel:\n  provider: scripted\n  script:\n", name)
	for i := 1; i <= steps; i++ {
		fmt.Fprintf(&b, "    - tool_calls: [{id: w%d, name: hook, input: {n: %d}}]\n      usage: {input_tokens: 10, output_tokens: 2}\n", i, i)
	}
	b.WriteString("    - text: done\n      usage: {input_tokens: 12, output_tokens: 1}\n")
	fmt.Fprintf(&b, "tools:\n  - name: hook\n    kind: webhook\n    url: %s\n    replay_policy: %s\n    timeout_seconds: 30\n", hookURL, policy)
	fmt.Fprintf(&b, "    input_schema: {type: object, properties: {n: {type: integer}}}\n")
	dir := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(b.String()), 0o600))
	return dir
}

// requireBundleValid exports the run offline with payloads, as `hxd
// export` does on a crashed store, and requires the verifier's verdict
// valid.
func requireBundleValid(t *testing.T, st *sqlite.Store, sessionID, runID string) {
	t.Helper()
	ctx := context.Background()
	archive, report, err := hxhttp.ExportBundle(ctx, func(fn func(*hxruntime.Incident) error) error {
		return hxruntime.ExportOffline(ctx, st, sessionID, runID, fn)
	}, hxhttp.BundleOptions{Policy: hxbundle.Policy{IncludePayloads: true}, Version: "test", Dir: t.TempDir()})
	require.NoError(t, err)
	defer hxtest.Close(t, archive)
	require.True(t, report.Valid, "bundle of run %s: %v", runID, report.Issues)
}

// readJournal opens the (stopped) child's database and lists the run's
// journal; it checks seq 1..N without gaps and unique record ids.
func readJournal(t *testing.T, db, rid string) []journal.Record {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: db})
	require.NoError(t, err)
	defer hxtest.Close(t, st)
	recs, err := st.JournalList(ctx, rid, 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	requireBundleValid(t, st, recs[0].SessionID, rid)
	ids := map[string]int64{}
	for i, r := range recs {
		require.Equal(t, int64(i+1), r.Seq, "journal seq gap or duplicate at index %d (%s)", i, r.Kind)
		require.Equal(t, rid, r.RunID)
		if prev, dup := ids[r.ID]; dup {
			t.Fatalf("journal record id %s appears at seq %d and %d", r.ID, prev, r.Seq)
		}
		ids[r.ID] = r.Seq
	}
	require.Equal(t, journal.KindRunStarted, recs[0].Kind)
	return recs
}

// boundaryTrace is the journal's boundary kinds as kind@step/attempt[key].
func boundaryTrace(recs []journal.Record) []string {
	var out []string
	for _, r := range recs {
		if r.Kind == journal.KindEvent || r.Kind == journal.KindCheckpoint {
			continue
		}
		s := string(r.Kind) + "@" + r.StepID + "/" + r.AttemptID
		if r.ExecutionKey != nil {
			s += "[" + *r.ExecutionKey + "]"
		}
		out = append(out, s)
	}
	return out
}

// ofKind returns the records of kind (for key, when key != "").
func ofKind(recs []journal.Record, kind journal.Kind, key string) []journal.Record {
	var out []journal.Record
	for _, r := range recs {
		if r.Kind != kind {
			continue
		}
		if key != "" && (r.ExecutionKey == nil || *r.ExecutionKey != key) {
			continue
		}
		out = append(out, r)
	}
	return out
}

func payloadField(t *testing.T, r journal.Record, field string) any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Payload, &m), string(r.Payload))
	return m[field]
}

// requireIdempotentCalls: every call of key carried key as Idempotency-Key
// and in its body, with strictly increasing attempts.
func requireIdempotentCalls(t *testing.T, key string, calls []hookCall) []int {
	t.Helper()
	var attempts []int
	for i, c := range calls {
		require.Equal(t, key, c.IdemHeader, "call %d Idempotency-Key", i+1)
		require.Equal(t, key, c.Key, "call %d execution_key", i+1)
		if i > 0 {
			require.Greater(t, c.Attempt, calls[i-1].Attempt, "attempts must increase: %v", calls)
		}
		attempts = append(attempts, c.Attempt)
	}
	return attempts
}

// concurrency bounds the cases that run at once: children mostly wait on
// I/O, so a few per core keep the matrix fast without starving them.
func concurrency() int {
	return max(4, 3*runtime.NumCPU())
}

// runConcurrently runs one subtest per case, at most concurrency() at a time
// (independent of -parallel, which defaults to the number of cores).
func runConcurrently[C any](t *testing.T, cases []C, name func(C) string, f func(*testing.T, C)) {
	sem := make(chan struct{}, concurrency())
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(name(c), func(t *testing.T) { f(t, c) })
		}()
	}
	wg.Wait()
}

// ---------------------------------------------------------------------------
// 1. HXD_CRASH_AFTER matrix

// The commits of the one-tool run (steps: call hook w1, answer "done"):
//
//	C1: model.started (step 1)
//	C2: model.response, model.processed, model.completed, tool.started, tool.dispatched
//	C3: tool.returned (entry raw_completed, before result middleware)
//	C4: tool.processed, model.started (step 2)
//	C5: model.response, model.processed, model.completed (step 2; status completed)
type crashPoint struct {
	after  string // HXD_CRASH_AFTER
	commit int    // C1..C5 above
}

var crashPoints = []crashPoint{
	{"model.started:1", 1},
	{"model.response", 2},
	{"model.processed", 2},
	{"model.completed", 2},
	{"tool.started", 2},
	{"tool.dispatched", 2},
	{"tool.returned", 3},
	{"tool.processed", 4},
	{"model.started:2", 4},
	{"model.completed:2", 5},
}

type crashCase struct {
	point  crashPoint
	policy string
	// resumedCrash: the first restart exits too, right after its run.resumed
	// commit (a second crash during recovery); a third process finishes.
	resumedCrash bool
}

func (c crashCase) String() string {
	s := strings.ReplaceAll(c.point.after, ":", "_") + "/" + c.policy
	if c.resumedCrash {
		s += "/then_run.resumed"
	}
	return s
}

func crashCases() []crashCase {
	var cases []crashCase
	for _, p := range crashPoints {
		for _, pol := range []string{"safe", "idempotent", "manual"} {
			cases = append(cases, crashCase{point: p, policy: pol})
		}
	}
	// A second crash while recovering, one per distinct state left behind
	// (model attempt open, tool dispatched without result, raw result
	// committed, result processed and next model attempt open).
	for _, p := range []crashPoint{{"model.started:1", 1}, {"tool.dispatched", 2}, {"tool.returned", 3}, {"model.started:2", 4}} {
		for _, pol := range []string{"safe", "idempotent", "manual"} {
			cases = append(cases, crashCase{point: p, policy: pol, resumedCrash: true})
		}
	}
	return cases
}

// TestCrashMatrix: for every boundary commit of a one-tool run × replay
// policy, hxd exits (code 42) right after the commit; a fresh process on
// the same database resumes the run to completed with the recovery
// REFERENCE §4.3 prescribes.
func TestCrashMatrix(t *testing.T) {
	t.Parallel()
	start := time.Now()
	cases := crashCases()
	runConcurrently(t, cases, crashCase.String, runCrashCase)
	t.Logf("crash matrix: %d cases in %s", len(cases), time.Since(start).Round(time.Millisecond))
}

func runCrashCase(t *testing.T, tc crashCase) {
	hook := newHookServer(t, nil)
	agentName := "hook-" + tc.policy
	agents := writeHookAgent(t, agentName, hook.srv.URL, tc.policy, 1)
	db := filepath.Join(t.TempDir(), "hxd.db")

	// Process 1 exits right after the commit under test.
	p1 := startHxd(t, "process 1", db, agents, "HXD_CRASH_AFTER="+tc.point.after)
	sid := p1.createSession(agentName)
	// The exit may race the answer to the submission itself.
	code, raw, err := p1.try(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs",
		map[string]any{"message": "call the hook", "request_id": "crash-1"})
	submitted := ""
	if err == nil {
		require.Equal(t, http.StatusAccepted, code, string(raw))
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		submitted = m["run_id"].(string)
	}
	require.Equal(t, 42, p1.waitExit(15*time.Second), "HXD_CRASH_AFTER=%s exit code", tc.point.after)
	require.Contains(t, p1.log(), "HXD_CRASH_AFTER: exiting after boundary commit")

	restarts := 1
	if tc.resumedCrash {
		// Process 2 resumes at start-up and exits after run.resumed, before serving.
		p2 := spawnHxd(t, "process 2", db, agents, "HXD_CRASH_AFTER=run.resumed")
		require.Equal(t, 42, p2.waitExit(15*time.Second), "crash during recovery: exit code")
		restarts++
	}
	p := startHxd(t, "final process", db, agents)
	rid := p.latestRunID(sid)
	if submitted != "" {
		require.Equal(t, submitted, rid)
	}
	key := rid + ":1:w1"

	modelOpen := tc.point.commit == 1 || tc.point.commit == 4
	dispatchedNoResult := tc.point.commit == 2
	awaiting := dispatchedNoResult && tc.policy == "manual"
	resolveRetry := awaiting && tc.resumedCrash // the other manual cases resolve with a value

	run := p.settle(rid)
	if awaiting {
		require.Equal(t, "awaiting_input", run["status"], run)
		pending := run["pending"].([]any)
		require.Len(t, pending, 1, run)
		entry := pending[0].(map[string]any)
		require.Equal(t, "uncertain", entry["status"], entry)
		require.Equal(t, key, entry["execution_key"])
		require.Equal(t, "manual", entry["policy"])
		code, m := p.call(http.MethodGet, "/sessions/"+url.PathEscape(sid)+"/pending", nil)
		require.Equal(t, http.StatusOK, code, m)
		require.Len(t, m["items"], 1, m)
		require.Equal(t, "uncertain", m["items"].([]any)[0].(map[string]any)["status"])
		events := p.eventTypes(rid)
		require.Equal(t, 1, count(events, "recovery_required"), "events: %v", events)
		// Crash right after the tool.dispatched commit: the handler never ran.
		require.Empty(t, hook.callsFor(key), "a manual tool dispatched before the crash must not have been called yet")

		body := map[string]any{"resume": true}
		if resolveRetry {
			body["retry"] = true
		} else {
			body["result"] = map[string]any{"tool_call_id": "w1", "content": "verified by operator", "is_error": false}
		}
		code, m = p.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/tools/"+url.PathEscape(key)+"/resolve", body)
		require.Equal(t, http.StatusOK, code, m)
		run = p.settle(rid)
	}
	require.Equal(t, "completed", run["status"], run)
	require.Equal(t, "done", run["output"], run)
	require.Empty(t, run["pending"], run)
	require.Equal(t, modelOpen, run["usage_incomplete"], "usage_incomplete after a crash with a model attempt open")
	if !awaiting {
		require.Zero(t, count(p.eventTypes(rid), "recovery_required"))
	}
	p.stop()

	// Webhook calls.
	calls := hook.callsFor(key)
	require.Len(t, hook.all(), len(calls), "calls with an unexpected execution key: %v", hook.all())
	attempts := requireIdempotentCalls(t, key, calls)
	switch {
	case awaiting && !resolveRetry:
		require.Empty(t, attempts, "the operator supplied the result: the tool is never called")
	case dispatchedNoResult:
		// Attempt 1 was dispatched but the process exited before the handler
		// ran; the re-execution is attempt 2 under the same key.
		require.Equal(t, []int{2}, attempts)
	default:
		// Raw result committed before the crash (or the crash came before the
		// tool): exactly one call.
		require.Equal(t, []int{1}, attempts)
	}

	// Journal.
	recs := readJournal(t, db, rid)
	trace := boundaryTrace(recs)
	t.Logf("webhook attempts %v; journal boundaries: %s", attempts, strings.ReplaceAll(strings.Join(trace, " "), rid, "<run>"))
	started := ofKind(recs, journal.KindToolStarted, key)
	var startedAttempts []string
	for _, r := range started {
		startedAttempts = append(startedAttempts, r.AttemptID)
	}
	returned := ofKind(recs, journal.KindToolReturned, key)
	resolved := ofKind(recs, journal.KindToolResolved, key)
	if awaiting && !resolveRetry {
		require.Equal(t, []string{"1"}, startedAttempts, trace)
		require.Empty(t, returned, trace)
		require.Len(t, resolved, 1, trace)
		require.NotNil(t, payloadField(t, resolved[0], "result"), "tool.resolved carries the result")
	} else {
		require.Len(t, returned, 1, "exactly one tool.returned per execution key: %v", trace)
		want := []string{"1"}
		if dispatchedNoResult {
			want = []string{"1", "2"}
		}
		require.Equal(t, want, startedAttempts, trace)
		require.Equal(t, strconv.Itoa(attempts[len(attempts)-1]), returned[0].AttemptID, trace)
	}
	require.Len(t, ofKind(recs, journal.KindToolProcessed, key), 1, trace)

	failed := ofKind(recs, journal.KindModelFailed, "")
	if modelOpen {
		lostStep := "1"
		if tc.point.commit == 4 {
			lostStep = "2"
		}
		require.Len(t, failed, 1, "one model.failed closes the lost attempt: %v", trace)
		require.Equal(t, "ProcessLost", payloadField(t, failed[0], "type"), string(failed[0].Payload))
		require.Equal(t, lostStep+"/1", failed[0].StepID+"/"+failed[0].AttemptID, "model.failed names the lost attempt")
		require.Contains(t, trace, "model.started@"+lostStep+"/2", "a new attempt follows")
		require.Contains(t, trace, "model.completed@"+lostStep+"/2")
	} else {
		require.Empty(t, failed, trace)
	}
	wantResumed := restarts
	switch {
	case tc.point.commit == 5:
		wantResumed = 0 // completed before the crash: nothing to resume
	case awaiting:
		wantResumed++ // resolve + resume
	}
	require.Len(t, ofKind(recs, journal.KindRunResumed, ""), wantResumed, trace)
	// Every model attempt started is closed exactly once.
	for _, r := range ofKind(recs, journal.KindModelStarted, "") {
		at := r.StepID + "/" + r.AttemptID
		closed := count(trace, "model.completed@"+at) + count(trace, "model.failed@"+at)
		require.Equal(t, 1, closed, "model attempt %s: %v", at, trace)
	}
}

func count(xs []string, x string) int {
	n := 0
	for _, s := range xs {
		if s == x {
			n++
		}
	}
	return n
}

// ---------------------------------------------------------------------------
// 2. SIGKILL at random moments

// TestKillRandom: a 3-tool run (safe webhook replying after 20–150 ms) is
// SIGKILLed after a random delay; a fresh process finishes it; no tool
// whose raw result was committed runs again.
func TestKillRandom(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	if s := os.Getenv("HXD_TEST_KILL_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("seed %d (rerun with HXD_TEST_KILL_SEED=%d)", seed, seed)
	iters := make([]int64, 6)
	for i := range iters {
		iters[i] = seed + int64(i)
	}
	runConcurrently(t, iters, func(s int64) string { return "seed_" + strconv.FormatInt(s, 10) }, runKillIteration)
}

func runKillIteration(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	var rmu sync.Mutex
	randDur := func(lo, hi int) time.Duration {
		rmu.Lock()
		defer rmu.Unlock()
		return time.Duration(lo+rng.Intn(hi-lo+1)) * time.Millisecond
	}
	killAfter := randDur(0, 600)
	hook := newHookServer(t, func(int) time.Duration { return randDur(20, 150) })
	agents := writeHookAgent(t, "hook3", hook.srv.URL, "safe", 3)
	db := filepath.Join(t.TempDir(), "hxd.db")

	p1 := startHxd(t, "process 1", db, agents)
	sid := p1.createSession("hook3")
	code, m := p1.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "go"})
	require.Equal(t, http.StatusAccepted, code, m)
	rid := m["run_id"].(string)
	time.Sleep(killAfter)
	p1.kill()
	// What the dead process left: the keys whose raw result is durable
	// must never be called again.
	returnedAtKill := map[string]int{}
	for _, r := range readJournal(t, db, rid) {
		if r.Kind == journal.KindToolReturned {
			returnedAtKill[*r.ExecutionKey] = len(hook.callsFor(*r.ExecutionKey))
		}
	}
	t.Logf("seed %d: SIGKILL after %s, %d webhook calls by then, %d raw results committed",
		seed, killAfter, len(hook.all()), len(returnedAtKill))

	p2 := startHxd(t, "process 2", db, agents)
	run := p2.settle(rid)
	require.Equal(t, "completed", run["status"], run)
	require.Equal(t, "done", run["output"], run)
	p2.stop()

	recs := readJournal(t, db, rid)
	trace := boundaryTrace(recs)
	total := 0
	for step := 1; step <= 3; step++ {
		key := fmt.Sprintf("%s:%d:w%d", rid, step, step)
		calls := hook.callsFor(key)
		total += len(calls)
		attempts := requireIdempotentCalls(t, key, calls)
		started := ofKind(recs, journal.KindToolStarted, key)
		require.Len(t, ofKind(recs, journal.KindToolReturned, key), 1, "exactly one tool.returned for %s: %v", key, trace)
		if n, ok := returnedAtKill[key]; ok {
			require.Len(t, calls, n, "%s was called again after its raw result was committed", key)
		}
		require.LessOrEqual(t, len(calls), len(started), "%s called more often than it was started: %v", key, trace)
		for i, r := range started {
			require.Equal(t, strconv.Itoa(i+1), r.AttemptID, "tool.started attempts of %s: %v", key, trace)
		}
		for _, a := range attempts {
			require.LessOrEqual(t, a, len(started), "call with attempt %d of %s has no tool.started", a, key)
		}
	}
	require.Len(t, hook.all(), total, "calls with unexpected execution keys: %v", hook.all())
	for _, r := range ofKind(recs, journal.KindModelStarted, "") {
		at := r.StepID + "/" + r.AttemptID
		closed := count(trace, "model.completed@"+at) + count(trace, "model.failed@"+at)
		require.Equal(t, 1, closed, "model attempt %s: %v", at, trace)
	}
}

// ---------------------------------------------------------------------------
// 3. Two processes, one database file

// TestTwoProcessSessionLock: while process A drives a run, process B on the
// same SQLite file gets 409 session_busy; once A is SIGKILLed the OS lock
// is gone and B resumes the run at once and completes it.
func TestTwoProcessSessionLock(t *testing.T) {
	t.Parallel()
	// The first call blocks until its caller goes away (A's death) or 10 s;
	// later calls answer at once.
	hook := newHookServer(t, func(n int) time.Duration {
		if n == 1 {
			return 10 * time.Second
		}
		return 0
	})
	agents := writeHookAgent(t, "slow", hook.srv.URL, "safe", 1)
	db := filepath.Join(t.TempDir(), "hxd.db")

	a := startHxd(t, "process A", db, agents)
	sid := a.createSession("slow")
	code, m := a.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "go"})
	require.Equal(t, http.StatusAccepted, code, m)
	rid := m["run_id"].(string)
	select {
	case <-hook.arrivals:
	case <-time.After(15 * time.Second):
		t.Fatal("A never called the webhook")
	}

	// B starts while A holds the session: start-up recovery skips the run.
	b := startHxd(t, "process B", db, agents)
	require.Equal(t, "running", b.getRun(rid)["status"])
	code, raw, err := b.try(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/resume", map[string]any{})
	require.NoError(t, err)
	requireProblemBody(t, code, raw, http.StatusConflict, "session_busy")
	code, raw, err = b.try(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "again"})
	require.NoError(t, err)
	requireProblemBody(t, code, raw, http.StatusConflict, "session_busy")
	require.Len(t, hook.all(), 1)

	a.kill()
	killed := time.Now()
	code, m = b.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/resume", map[string]any{})
	elapsed := time.Since(killed)
	require.Equal(t, http.StatusOK, code, m)
	require.Equal(t, rid, m["run_id"])
	require.Less(t, elapsed, time.Second, "the lock of a dead process is released at once")
	run := b.settle(rid)
	require.Equal(t, "completed", run["status"], run)
	require.Equal(t, "done", run["output"], run)
	b.stop()

	key := rid + ":1:w1"
	require.Equal(t, []int{1, 2}, requireIdempotentCalls(t, key, hook.callsFor(key)))
	recs := readJournal(t, db, rid)
	trace := boundaryTrace(recs)
	require.Len(t, ofKind(recs, journal.KindToolStarted, key), 2, trace)
	require.Len(t, ofKind(recs, journal.KindToolReturned, key), 1, trace)
	require.Len(t, ofKind(recs, journal.KindRunResumed, ""), 1, trace)
}

// requireProblemBody checks a problem+json answer's status and code.
func requireProblemBody(t *testing.T, code int, raw []byte, status int, problem string) {
	t.Helper()
	require.Equal(t, status, code, string(raw))
	var p map[string]any
	require.NoError(t, json.Unmarshal(raw, &p), string(raw))
	require.Equal(t, problem, p["code"], string(raw))
	require.EqualValues(t, status, p["status"], string(raw))
}
