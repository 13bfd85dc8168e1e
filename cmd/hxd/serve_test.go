package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"hxd/internal/http/api"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
	"hxd/internal/store/sqlite"
)

// daemon is hxd serve running in-process on 127.0.0.1:0.
type daemon struct {
	base string
	db   string
	stop func()
}

const sleeperAgent = `name: sleeper
version: v1
model:
  provider: scripted
  script:
    - tool_calls: [{id: nap, name: sleep, input: {seconds: 3}}]
    - text: rested
tools:
  - name: sleep
    kind: builtin
    replay_policy: safe
    input_schema: {type: object, properties: {seconds: {type: number}}}
`

// startDaemon runs `hxd serve --demo` with an agents folder holding the
// sleeper agent on the SQLite file db (none: "", for --database-url in
// extra); extra args are appended.
func startDaemon(t *testing.T, db string, extra ...string) *daemon {
	t.Helper()
	return startAgentsDaemon(t, db, map[string]string{"sleeper": sleeperAgent}, nil, append([]string{"--demo"}, extra...)...)
}

func (d *daemon) do(t *testing.T, method, path string, body any, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, d.base+path, r)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer hxtest.Close(t, resp.Body)
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, out
}

func decode(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m), string(raw))
	return m
}

func requireProblem(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, string(body))
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	p := decode(t, body)
	require.Equal(t, code, p["code"], string(body))
	require.EqualValues(t, status, p["status"])
}

// sseFrame is one server-sent event.
type sseFrame struct {
	id, event string
	data      map[string]any
}

func readSSE(t *testing.T, d *daemon, path string, hdr ...string) []sseFrame {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, d.base+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer hxtest.Close(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))
	var frames []sseFrame
	var cur sseFrame
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" {
				frames = append(frames, cur)
			}
			cur = sseFrame{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data))
			requireContractEvent(t, cur.data)
		}
	}
	return frames
}

// runEventSchema is the contract's RunEvent: a union discriminated by
// type, one schema (with its typed data) per event type.
var runEventSchema = sync.OnceValues(func() (*openapi3.Schema, error) {
	spec, err := api.GetSwagger()
	if err != nil {
		return nil, err
	}
	return spec.Components.Schemas["RunEvent"].Value, nil
})

// requireContractEvent fails unless ev, a decoded event of a real run,
// matches the contract's RunEvent schema for its type.
func requireContractEvent(t *testing.T, ev map[string]any) {
	t.Helper()
	schema, err := runEventSchema()
	require.NoError(t, err)
	require.NoError(t, schema.VisitJSON(ev), "event breaks the contract: %v", ev)
}

// TestServeInvoiceDemoEndToEnd: a recorded session of the demo invoice
// agent runs to completed over HTTP; its journal holds the boundaries in
// the order REFERENCE §10.1 derives; SSE streams the events and resumes
// from Last-Event-ID.
func TestServeInvoiceDemoEndToEnd(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"))

	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{
		"agent": map[string]string{"name": "invoice-analyst", "version": "v1"}, "recording": true,
	})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sess := decode(t, body)
	sid := sess["session_id"].(string)
	require.Equal(t, true, sess["recording"])
	require.Nil(t, sess["latest_run"])

	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs?wait=20", map[string]any{
		"message": "Analyze overdue invoices for the demo account",
	}, "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	run := decode(t, body)
	require.Equal(t, "completed", run["status"], string(body))
	require.Equal(t, "Overdue balance: $1,500. (synthetic fixture)", run["output"])
	rid := run["run_id"].(string)

	// The same request again is the same run (200).
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{
		"message": "Analyze overdue invoices for the demo account",
	}, "Idempotency-Key", "req-1")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, rid, decode(t, body)["run_id"])
	// Reused with another message: 409 request_id_conflict.
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "other"}, "Idempotency-Key", "req-1")
	requireProblem(t, resp, body, http.StatusConflict, "request_id_conflict")

	resp, body = d.do(t, http.MethodGet, "/sessions/"+sid, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	latest := decode(t, body)["latest_run"].(map[string]any)
	require.Equal(t, rid, latest["run_id"])
	require.Equal(t, "completed", latest["status"])

	// SSE: the whole stream, ending after run_result.
	frames := readSSE(t, d, "/runs/"+rid+"/events")
	require.NotEmpty(t, frames)
	for i, f := range frames {
		require.Equal(t, strconv.Itoa(i+1), f.id)
		require.Equal(t, f.event, f.data["type"])
		require.Equal(t, f.id, f.data["cursor"])
		require.Equal(t, rid, f.data["run_id"])
	}
	last := frames[len(frames)-1]
	require.Equal(t, "run_result", last.event)
	require.Equal(t, "completed", last.data["data"].(map[string]any)["status"])
	// Resume after the third event.
	tail := readSSE(t, d, "/runs/"+rid+"/events", "Last-Event-ID", "3")
	require.Equal(t, len(frames)-3, len(tail))
	require.Equal(t, "4", tail[0].id)
	// The JSON page form carries the same events.
	resp, body = d.do(t, http.MethodGet, "/runs/"+rid+"/events?after=3", nil, "Accept", "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	page := decode(t, body)
	require.Len(t, page["events"], len(frames)-3)
	require.Equal(t, frames[len(frames)-1].id, page["next_cursor"])

	// The journal, read from the database file: boundaries in the derived order.
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: d.db})
	require.NoError(t, err)
	defer hxtest.Close(t, st)
	recs, err := st.JournalList(context.Background(), rid, 0, 0)
	require.NoError(t, err)
	var got []string
	for i, r := range recs {
		require.Equal(t, int64(i+1), r.Seq)
		k := string(r.Kind)
		if strings.HasPrefix(k, "model.") || strings.HasPrefix(k, "tool.") || strings.HasPrefix(k, "run.") {
			got = append(got, k+"@"+r.StepID+"/"+r.AttemptID)
		}
	}
	require.Equal(t, []string{
		"run.started@0/0",
		"model.started@1/1", "model.failed@1/1",
		"model.started@1/2", "model.response@1/2", "model.processed@1/2", "model.completed@1/2",
		"tool.started@1/1", "tool.dispatched@1/1", "tool.returned@1/1", "tool.processed@1/1",
		"model.started@2/1", "model.response@2/1", "model.processed@2/1", "model.completed@2/1",
	}, got)
	require.Equal(t, journal.KindEvent, recs[len(recs)-1].Kind)
}

// TestServeProblems: bad input gets problem+json with a stable code.
func TestServeProblems(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"))

	resp, body := d.do(t, http.MethodPost, "/sessions", `{"agent":`)
	requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")
	resp, body = d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]string{"name": "nope", "version": "v1"}})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "unknown_agent")
	resp, body = d.do(t, http.MethodGet, "/sessions/does-not-exist", nil)
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	resp, body = d.do(t, http.MethodGet, "/runs/does-not-exist", nil)
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	resp, body = d.do(t, http.MethodGet, "/runs/does-not-exist/events", nil, "Accept", "application/json")
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")

	// A busy session: the sleeper's run is still going.
	resp, body = d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]string{"name": "sleeper", "version": "v1"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sid := decode(t, body)["session_id"].(string)
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "nap"})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "again"})
	requireProblem(t, resp, body, http.StatusConflict, "session_busy")
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": 42})
	requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/cancel", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "cancelled", decode(t, body)["run"].(map[string]any)["status"])
	// No internal error text anywhere.
	require.NotContains(t, string(body), "sqlite")
}

// TestServeShutdownLeavesRunsResumable: a shutdown in the middle of a tool
// call leaves the run resumable; the next start resumes and finishes it.
func TestServeShutdownLeavesRunsResumable(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "hxd.db")
	d := startDaemon(t, db)
	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]string{"name": "sleeper", "version": "v1"}, "recording": true})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sid := decode(t, body)["session_id"].(string)
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "nap"})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	rid := decode(t, body)["run_id"].(string)
	require.Eventually(t, func() bool {
		_, body := d.do(t, http.MethodGet, "/runs/"+rid+"/events?after=0", nil, "Accept", "application/json")
		return strings.Contains(string(body), "tool_call_start")
	}, 10*time.Second, 20*time.Millisecond)
	d.stop()

	// The nap is shortened for the second process: same agent, same file.
	d2 := startDaemon(t, db)
	resp, body = d2.do(t, http.MethodGet, "/runs/"+rid, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "running", decode(t, body)["status"], "resumed at start-up")
	resp, body = d2.do(t, http.MethodPost, "/sessions/"+sid+"/resume", map[string]any{})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, rid, decode(t, body)["run_id"], "resuming a run this process drives is idempotent")
	require.Eventually(t, func() bool {
		_, body := d2.do(t, http.MethodGet, "/runs/"+rid, nil)
		return decode(t, body)["status"] == "completed"
	}, 15*time.Second, 50*time.Millisecond)

	// The safe tool ran again under a new attempt of the same execution key.
	d2.stop()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db})
	require.NoError(t, err)
	defer hxtest.Close(t, st)
	recs, err := st.JournalList(context.Background(), rid, 0, 0)
	require.NoError(t, err)
	var starts []string
	resumed := 0
	for _, r := range recs {
		switch r.Kind {
		case journal.KindToolStarted:
			starts = append(starts, *r.ExecutionKey+"#"+r.AttemptID)
		case journal.KindRunResumed:
			resumed++
		}
	}
	require.Equal(t, []string{rid + ":1:nap#1", rid + ":1:nap#2"}, starts)
	require.Equal(t, 1, resumed)
}

// TestServeIdleTimeout: a keep-alive connection that sends nothing after
// its request is closed after --idle-timeout; one in use is not.
func TestServeIdleTimeout(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), "--idle-timeout", "300ms")
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.base, "http://"))
	require.NoError(t, err)
	defer hxtest.Close(t, conn)
	r := bufio.NewReader(conn)
	get := func() {
		t.Helper()
		_, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: hxd\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(r, nil)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	// Requests closer together than the timeout keep the connection.
	for range 3 {
		get()
		time.Sleep(100 * time.Millisecond)
	}
	// Then nothing: the server closes it.
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = r.ReadByte()
	require.ErrorIs(t, err, io.EOF)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestServeIdleTimeoutFlag(t *testing.T) {
	t.Parallel()
	e := env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard}
	cfg, err := parseServeFlags(nil, e)
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, cfg.IdleTimeout)
	for _, v := range []string{"0s", "-1s"} {
		_, err := parseServeFlags([]string{"--idle-timeout", v}, e)
		var ee *exitError
		require.ErrorAs(t, err, &ee, v)
		require.Equal(t, 2, ee.code)
		require.Contains(t, err.Error(), "--idle-timeout must be positive", v)
	}
}

// TestServeAddressTakenLeavesNoDatabase: serve listens before it opens
// the store, so an address it cannot listen on fails without creating the
// database file (or its folder).
func TestServeAddressTakenLeavesNoDatabase(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	db := filepath.Join(t.TempDir(), "data", "hxd.db")
	e := env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard}
	err = run(context.Background(), []string{"serve", "--demo", "--addr", taken.Addr().String(), "--db", db}, e)
	require.ErrorContains(t, err, "listen:")
	_, statErr := os.Stat(filepath.Dir(db))
	require.ErrorIs(t, statErr, os.ErrNotExist, "serve created the database folder")
}
