package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hxhttp "hxd/internal/http"
	"hxd/internal/http/api"
	hxruntime "hxd/internal/runtime"
)

// fakeRun is an in-memory run "r1" with an event log, wired into a
// fakeService's GetRun, ListEvents and WatchRun.
type fakeRun struct {
	mu       sync.Mutex
	status   hxruntime.RunStatus
	events   []hxruntime.RunEvent
	watchers map[int]chan struct{}
	nextW    int
	calls    [][2]int64 // ListEvents (after, limit)
}

func newFakeRun(f *fakeService, status hxruntime.RunStatus) *fakeRun {
	r := &fakeRun{status: status, watchers: map[int]chan struct{}{}}
	f.GetRunFunc = func(_ context.Context, id string) (*hxruntime.RunResult, error) {
		if id != "r1" {
			return nil, hxruntime.ErrNotFound
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return runFixture(r.status), nil
	}
	f.ListEventsFunc = func(_ context.Context, id string, after int64, limit int) ([]hxruntime.RunEvent, error) {
		if id != "r1" {
			return nil, hxruntime.ErrNotFound
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, [2]int64{after, int64(limit)})
		var out []hxruntime.RunEvent
		for _, ev := range r.events {
			if c, _ := strconv.ParseInt(ev.Cursor, 10, 64); c > after && len(out) < limit {
				out = append(out, ev)
			}
		}
		return out, nil
	}
	f.WatchRunFunc = func(string) (<-chan struct{}, func()) {
		r.mu.Lock()
		defer r.mu.Unlock()
		ch := make(chan struct{})
		k := r.nextW
		r.nextW++
		r.watchers[k] = ch
		return ch, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			delete(r.watchers, k)
		}
	}
	return r
}

// commit appends events of the given types and sets the status in one
// step, then wakes the watchers (as a store commit would).
func (r *fakeRun) commit(status hxruntime.RunStatus, types ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, typ := range types {
		n := len(r.events) + 1
		data := json.RawMessage(`"chunk ` + strconv.Itoa(n) + `"`)
		if typ == hxruntime.EventRunResult {
			data, _ = json.Marshal(runFixture(status))
		}
		r.events = append(r.events, hxruntime.RunEvent{
			Type: typ, Data: data, SessionID: "s1", RunID: "r1", StepID: "1", AttemptID: "1",
			EventID: "ev-" + strconv.Itoa(n), Cursor: strconv.Itoa(n),
			// Stored in another zone: the wire form gives UTC.
			CreatedAt: time.Date(2026, 1, 2, 3, 4, n, 123456000, time.FixedZone("UTC+1", 3600)),
		})
	}
	r.status = status
	for k, ch := range r.watchers {
		close(ch)
		delete(r.watchers, k)
	}
}

func (r *fakeRun) listCalls() [][2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][2]int64(nil), r.calls...)
}

// frame is one parsed SSE frame (or a comment).
type frame struct {
	id, event, data, comment string
}

// readFrame reads one SSE frame; io.EOF at the end of the stream.
func readFrame(br *bufio.Reader) (frame, error) {
	var f frame
	seen := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && !seen && line == "" {
				return f, io.EOF
			}
			return f, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if seen {
				return f, nil
			}
			continue
		}
		seen = true
		switch {
		case strings.HasPrefix(line, ":"):
			f.comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id: "):
			f.id = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			f.event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			f.data = line[len("data: "):]
		default:
			return f, errors.New("unexpected SSE line: " + line)
		}
	}
}

func readAllFrames(t *testing.T, body []byte) []frame {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(string(body)))
	var out []frame
	for {
		f, err := readFrame(br)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, f)
	}
}

func TestEventStreamFraming(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	run := newFakeRun(tb.svc, hxruntime.StatusRunning)
	run.commit(hxruntime.StatusRunning, hxruntime.EventTextDelta, hxruntime.EventTextComplete)
	run.commit(hxruntime.StatusCompleted, hxruntime.EventRunResult)

	resp, body := tb.do(t, request{method: "GET", path: "/runs/r1/events"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))

	frames := readAllFrames(t, body)
	require.Len(t, frames, 3)
	for i, want := range []string{"text_delta", "text_complete", "run_result"} {
		f := frames[i]
		require.Equal(t, strconv.Itoa(i+1), f.id)
		require.Equal(t, want, f.event)
		require.JSONEq(t, string(eventJSON(t, run.events[i])), f.data)
		typ, err := decode[api.RunEvent](t, []byte(f.data)).Discriminator()
		require.NoError(t, err)
		require.Equal(t, want, typ)
	}
	// The wire form: the keys in this order, data as committed.
	require.Equal(t, `{"attempt_id":"1","created_at":"2026-01-02T02:04:01.123456Z","cursor":"1","data":"chunk 1","event_id":"ev-1","run_id":"r1","session_id":"s1","step_id":"1","type":"text_delta"}`, frames[0].data)
	delta, err := decode[api.RunEvent](t, []byte(frames[0].data)).AsTextDeltaEvent()
	require.NoError(t, err)
	require.Equal(t, "chunk 1", delta.Data)
	result, err := decode[api.RunEvent](t, []byte(frames[2].data)).AsRunResultEvent()
	require.NoError(t, err)
	require.Equal(t, api.RunStatusCompleted, result.Data.Status)
	require.Equal(t, "ev-3", result.EventId)
}

// eventJSON is ev in the wire form the contract gives RunEvent.
func eventJSON(t *testing.T, ev hxruntime.RunEvent) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"type": ev.Type, "data": ev.Data, "session_id": ev.SessionID, "run_id": ev.RunID,
		"step_id": ev.StepID, "attempt_id": ev.AttemptID, "event_id": ev.EventID, "cursor": ev.Cursor,
		"created_at": ev.CreatedAt.UTC().Format(time.RFC3339Nano),
	})
	require.NoError(t, err)
	return b
}

func TestEventStreamResume(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		path    string
		header  map[string]string
		wantIDs []string
	}{
		{name: "from the start", path: "", wantIDs: []string{"1", "2", "3"}},
		{name: "after", path: "?after=1", wantIDs: []string{"2", "3"}},
		{name: "Last-Event-ID", header: map[string]string{"Last-Event-ID": "2"}, wantIDs: []string{"3"}},
		{name: "Last-Event-ID wins over after", path: "?after=0", header: map[string]string{"Last-Event-ID": "2"}, wantIDs: []string{"3"}},
		{name: "past the end", header: map[string]string{"Last-Event-ID": "3"}, wantIDs: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			run := newFakeRun(tb.svc, hxruntime.StatusRunning)
			run.commit(hxruntime.StatusRunning, hxruntime.EventTextDelta, hxruntime.EventTextComplete)
			run.commit(hxruntime.StatusPaused, hxruntime.EventRunResult) // paused ends the stream too

			_, body := tb.do(t, request{method: "GET", path: "/runs/r1/events" + tt.path, header: tt.header})
			var ids []string
			for _, f := range readAllFrames(t, body) {
				ids = append(ids, f.id)
			}
			require.Equal(t, tt.wantIDs, ids)
		})
	}
}

// openStream starts a streaming request and returns a frame reader.
func openStream(t *testing.T, tb *testBundle, ctx context.Context) *bufio.Reader {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", tb.srv.URL+"/runs/r1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := tb.srv.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return bufio.NewReader(resp.Body)
}

func TestEventStreamLive(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	run := newFakeRun(tb.svc, hxruntime.StatusRunning)
	run.commit(hxruntime.StatusRunning, hxruntime.EventTextDelta)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	br := openStream(t, tb, ctx)

	// The first frame arrives while the stream is still open: it was flushed.
	f, err := readFrame(br)
	require.NoError(t, err)
	require.Equal(t, "1", f.id)

	run.commit(hxruntime.StatusRunning, hxruntime.EventTextComplete)
	f, err = readFrame(br)
	require.NoError(t, err)
	require.Equal(t, frame{id: "2", event: "text_complete", data: f.data}, f)

	run.commit(hxruntime.StatusCompleted, hxruntime.EventTurnComplete, hxruntime.EventRunResult)
	for _, want := range []string{"turn_complete", "run_result"} {
		f, err = readFrame(br)
		require.NoError(t, err)
		require.Equal(t, want, f.event)
	}
	_, err = readFrame(br)
	require.ErrorIs(t, err, io.EOF, "the stream ends after the run_result of a finished run")

	// Each batch asked for up to 1000 events after the last cursor sent.
	for _, c := range run.listCalls() {
		require.Equal(t, int64(1000), c[1])
	}
}

func TestEventStreamKeepAlive(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(c *hxhttp.Config) { c.KeepAlive = 10 * time.Millisecond })
	newFakeRun(tb.svc, hxruntime.StatusRunning)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	br := openStream(t, tb, ctx)
	f, err := readFrame(br)
	require.NoError(t, err)
	require.Equal(t, frame{comment: "keep-alive"}, f)
	cancel() // the client leaves; the handler must end (goleak checks)
}

func TestEventPageJSON(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		query     string
		accept    string
		wantCall  [2]int64
		wantIDs   []string
		wantNext  string
		wantEvent bool
	}{
		{name: "page", query: "?after=1&limit=2", accept: "application/json",
			wantCall: [2]int64{1, 2}, wantIDs: []string{"2", "3"}, wantNext: "3"},
		{name: "defaults", accept: "application/json", wantCall: [2]int64{0, 1000}, wantIDs: []string{"1", "2", "3", "4"}, wantNext: "4"},
		{name: "empty page keeps the cursor", query: "?after=9", accept: "application/json",
			wantCall: [2]int64{9, 1000}, wantIDs: nil, wantNext: "9"},
		{name: "json preferred by quality", query: "?after=3", accept: "text/event-stream;q=0.5, application/json",
			wantCall: [2]int64{3, 1000}, wantIDs: []string{"4"}, wantNext: "4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			run := newFakeRun(tb.svc, hxruntime.StatusRunning)
			run.commit(hxruntime.StatusRunning, "text_delta", "text_delta", "text_delta", "text_delta")

			resp, body := tb.do(t, request{method: "GET", path: "/runs/r1/events" + tt.query, header: map[string]string{"Accept": tt.accept}})
			require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", body)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			page := decode[api.EventPage](t, body)
			var ids []string
			for _, ev := range page.Events {
				delta, err := ev.AsTextDeltaEvent()
				require.NoError(t, err)
				ids = append(ids, delta.Cursor)
			}
			require.Equal(t, tt.wantIDs, ids)
			require.Equal(t, tt.wantNext, page.NextCursor)
			require.Equal(t, [][2]int64{tt.wantCall}, run.listCalls())
		})
	}
}

// TestEventPageTypedPerEvent: every event type, with data shaped as the
// runtime and the Temporal engine emit it, passes the contract's RunEvent
// union (tb.do validates the page) and decodes as its own schema.
func TestEventPageTypedPerEvent(t *testing.T) {
	t.Parallel()
	call := `{"id":"call_1","name":"echo","input":{"text":"hi"}}`
	result, err := json.Marshal(runFixture(hxruntime.StatusAwaitingInput))
	require.NoError(t, err)
	tests := []struct {
		typ, data string
		want      any
	}{
		{"text_delta", `"Hel"`, api.TextDeltaEvent{}},
		{"text_complete", `"Hello"`, api.TextCompleteEvent{}},
		{"thinking_delta", `"hmm"`, api.ThinkingDeltaEvent{}},
		{"tool_call_start", call, api.ToolCallStartEvent{}},
		{"tool_call_complete", call, api.ToolCallCompleteEvent{}},
		{"tool_result", `{"tool_call_id":"call_1","content":"hi","is_error":false}`, api.ToolResultEvent{}},
		{"turn_complete", `"Hello"`, api.TurnCompleteEvent{}},
		{"error", `"Session duration limit exceeded"`, api.ErrorEvent{}},
		{"approval_required", `{"execution_key":"r1:1:call_1","call":` + call + `}`, api.ApprovalRequiredEvent{}},
		{"recovery_required", `{"execution_key":"r1:1:call_1","call":` + call + `,"reason":"client_result"}`, api.RecoveryRequiredEvent{}},
		{"attempt_reset", `{"attempt":1}`, api.AttemptResetEvent{}},
		{"todos_updated", `{"todos":[]}`, api.TodosUpdatedEvent{}},
		{"waiting", `{"on":"model","seconds":0.5}`, api.WaitingEvent{}},
		{"run_result", string(result), api.RunResultEvent{}},
		{"gap", `{"reason":"event_history_unavailable"}`, api.GapEvent{}},
	}
	tb := setup(t)
	newFakeRun(tb.svc, hxruntime.StatusRunning)
	tb.svc.ListEventsFunc = func(context.Context, string, int64, int) ([]hxruntime.RunEvent, error) {
		evs := make([]hxruntime.RunEvent, len(tests))
		for i, tt := range tests {
			evs[i] = hxruntime.RunEvent{
				Type: tt.typ, Data: json.RawMessage(tt.data), SessionID: "s1", RunID: "r1",
				StepID: "1", AttemptID: "1", EventID: "ev-" + tt.typ, Cursor: strconv.Itoa(i + 1),
			}
		}
		evs[len(evs)-1].StepID, evs[len(evs)-1].AttemptID, evs[len(evs)-1].Cursor = "", "", "0" // as the Temporal engine's gap
		return evs, nil
	}
	resp, body := tb.do(t, request{method: "GET", path: "/runs/r1/events", header: map[string]string{"Accept": "application/json"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", body)
	page := decode[api.EventPage](t, body)
	require.Len(t, page.Events, len(tests))
	for i, tt := range tests {
		v, err := page.Events[i].ValueByDiscriminator()
		require.NoError(t, err, tt.typ)
		require.IsType(t, tt.want, v, tt.typ)
	}
}

func TestEventStreamIsTheDefault(t *testing.T) {
	t.Parallel()
	for _, accept := range []string{"", "*/*", "text/event-stream", "application/json;q=0.5, text/event-stream", "application/json, text/event-stream"} {
		t.Run(accept, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			run := newFakeRun(tb.svc, hxruntime.StatusRunning)
			run.commit(hxruntime.StatusCompleted, hxruntime.EventRunResult)
			resp, body := tb.do(t, request{method: "GET", path: "/runs/r1/events", header: map[string]string{"Accept": accept}})
			require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			require.Len(t, readAllFrames(t, body), 1)
		})
	}
}

// TestEventStreamResumeRace: the run is resumed between the stream's
// status read (awaiting_input) and its drain, which then returns the
// run_result of that stop and the resumed run's first events. The stream
// goes on with the running run instead of ending without a run_result.
func TestEventStreamResumeRace(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	run := newFakeRun(tb.svc, hxruntime.StatusRunning)
	run.commit(hxruntime.StatusRunning, hxruntime.EventTextDelta)
	run.commit(hxruntime.StatusAwaitingInput, hxruntime.EventRunResult)
	get := tb.svc.GetRunFunc
	var calls atomic.Int32
	tb.svc.GetRunFunc = func(ctx context.Context, id string) (*hxruntime.RunResult, error) {
		res, err := get(ctx, id)
		if calls.Add(1) == 2 { // the stream loop's first status read
			run.commit(hxruntime.StatusRunning, hxruntime.EventToolCallStart)
		}
		return res, err
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	br := openStream(t, tb, ctx)
	for _, want := range []string{"text_delta", "run_result", "tool_call_start"} {
		f, err := readFrame(br)
		require.NoError(t, err)
		require.Equal(t, want, f.event)
	}
	run.commit(hxruntime.StatusCompleted, hxruntime.EventRunResult)
	f, err := readFrame(br)
	require.NoError(t, err, "the stream of the resumed run stays open")
	require.Equal(t, "run_result", f.event)
	_, err = readFrame(br)
	require.ErrorIs(t, err, io.EOF)
}

// TestEventCreatedAt: each event's created_at, in UTC, is the same in the
// JSON page and in the stream, and decodes as the contract's date-time.
func TestEventCreatedAt(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	run := newFakeRun(tb.svc, hxruntime.StatusRunning)
	run.commit(hxruntime.StatusRunning, hxruntime.EventTextDelta, hxruntime.EventTextComplete)
	run.commit(hxruntime.StatusCompleted, hxruntime.EventRunResult)
	want := []string{"2026-01-02T02:04:01.123456Z", "2026-01-02T02:04:02.123456Z", "2026-01-02T02:04:03.123456Z"}

	resp, body := tb.do(t, request{method: "GET", path: "/runs/r1/events", header: map[string]string{"Accept": "application/json"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", body)
	var page struct {
		Events []struct {
			CreatedAt string `json:"created_at"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal(body, &page))
	require.Len(t, page.Events, len(want))
	for i, ev := range page.Events {
		require.Equal(t, want[i], ev.CreatedAt)
	}
	typed, err := decode[api.EventPage](t, body).Events[0].AsTextDeltaEvent()
	require.NoError(t, err)
	require.True(t, typed.CreatedAt.Equal(run.events[0].CreatedAt))

	resp, body = tb.do(t, request{method: "GET", path: "/runs/r1/events"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	frames := readAllFrames(t, body)
	require.Len(t, frames, len(want))
	for i, f := range frames {
		var ev struct {
			CreatedAt string `json:"created_at"`
		}
		require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
		require.Equal(t, want[i], ev.CreatedAt)
	}
}
