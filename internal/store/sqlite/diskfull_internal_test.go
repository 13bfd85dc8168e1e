package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	hxhttp "hxd/internal/http"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/tool"
)

// diskFullRuns is how many runs are in flight when the disk fills.
const diskFullRuns = 30

// napper is a builtin tool that counts its calls by execution key, then
// sleeps for its input's seconds.
type napper struct {
	mu       sync.Mutex
	calls    map[string]int
	returned atomic.Int64
}

func (n *napper) nap(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
	n.mu.Lock()
	n.calls[inv.ExecutionKey]++
	n.mu.Unlock()
	var in struct{ Seconds float64 }
	if err := json.Unmarshal(inv.Call.Input, &in); err != nil {
		return tool.Outcome{}, err
	}
	select {
	case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
	case <-ctx.Done():
		return tool.Outcome{}, ctx.Err()
	}
	n.returned.Add(1)
	return tool.Outcome{Result: model.ToolResult{Content: json.RawMessage(`"rested ` + pageFiller + `"`)}}, nil
}

// hxClient calls the HTTP API of a test server.
type hxClient struct {
	t    *testing.T
	base string
}

func (c hxClient) do(method, path string, body any) (*http.Response, map[string]any) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(c.t, err)
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, r)
	require.NoError(c.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer hxtest.Close(c.t, resp.Body)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	var out map[string]any
	if len(raw) > 0 {
		require.NoError(c.t, json.Unmarshal(raw, &out), "%s %s: %s", method, path, raw)
	}
	return resp, out
}

// requireUnavailable checks a 503 unavailable problem with Retry-After.
func (c hxClient) requireUnavailable(resp *http.Response, body map[string]any) {
	c.t.Helper()
	require.Equal(c.t, http.StatusServiceUnavailable, resp.StatusCode, "%v", body)
	require.Equal(c.t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.Equal(c.t, "unavailable", body["code"])
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(c.t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
	require.Positive(c.t, secs)
}

func (c hxClient) newSession() string {
	c.t.Helper()
	resp, body := c.do("POST", "/sessions", map[string]any{"agent": map[string]string{"name": "napper", "version": "v1"}, "recording": true})
	require.Equal(c.t, http.StatusCreated, resp.StatusCode, "%v", body)
	return body["session_id"].(string)
}

// TestDiskFullWhileRunsAreInFlight (issue 18 item 3): the disk fills
// while runs are in flight (fullDatabase; each tool's result is larger
// than a page, so its boundary needs room). Meanwhile a submit and a new
// session that need room answer 503 unavailable with Retry-After, /readyz
// answers 503 (the readiness probe needs a page too), and no run advances
// or fails; when space returns, /readyz is ready again without a restart
// and every run completes by itself, each tool called once, each boundary
// in the journal once. Without the runtime's retry of commits failing
// with ErrUnavailable the runs would fail.
func TestDiskFullWhileRunsAreInFlight(t *testing.T) {
	t.Parallel()
	s := openFaultStore(t)
	tools := &napper{calls: map[string]int{}}
	reg := agent.NewRegistry("nap")
	require.NoError(t, reg.Register(&agent.Definition{
		Name: "napper", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "nap", Name: "nap", Input: json.RawMessage(`{"seconds":2}`)}}},
			{Text: "rested"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "nap", Kind: "builtin", Builtin: "nap", ReplayPolicy: "safe"}}},
	}))
	rt, err := hxruntime.New(hxruntime.Config{
		Store: s, Agents: reg, Logger: hxtest.Logger(t),
		ToolOptions: tool.Options{Builtins: map[string]tool.BuiltinFunc{"nap": tools.nap}},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(hxhttp.New(hxhttp.Config{Service: rt, Logger: hxtest.Logger(t)}))
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, rt.Stop(context.Background()))
	})
	c := hxClient{t: t, base: srv.URL}

	spare := c.newSession()
	runs := make([]string, diskFullRuns)
	for i := range runs {
		sid := c.newSession()
		resp, body := c.do("POST", "/sessions/"+sid+"/runs", map[string]any{"message": "nap " + strconv.Itoa(i)})
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%v", body)
		runs[i] = body["run_id"].(string)
	}

	// The disk fills while the tools run.
	require.Eventually(t, func() bool {
		tools.mu.Lock()
		defer tools.mu.Unlock()
		return len(tools.calls) == diskFullRuns
	}, 30*time.Second, 10*time.Millisecond, "every run's tool is running")
	spaceBack := fullDatabase(t, s)
	resp, body := c.do("POST", "/sessions/"+spare+"/runs", map[string]any{"message": "now " + pageFiller})
	c.requireUnavailable(resp, body)
	resp, body = c.do("POST", "/sessions", map[string]any{"agent": map[string]string{"name": "napper", "version": "v1"},
		"metadata": map[string]string{"note": pageFiller}})
	c.requireUnavailable(resp, body)
	require.Eventually(t, func() bool {
		resp, _ := c.do("GET", "/readyz", nil)
		return resp.StatusCode == http.StatusServiceUnavailable
	}, 10*time.Second, 50*time.Millisecond, "readiness sees the full disk")
	resp, body = c.do("GET", "/readyz", nil)
	c.requireUnavailable(resp, body)

	// Every tool returns into the full disk; the runs wait.
	require.Eventually(t, func() bool { return tools.returned.Load() == diskFullRuns }, 30*time.Second, 20*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // their commits are refused meanwhile
	for _, id := range runs {
		resp, body := c.do("GET", "/runs/"+id, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "reads go on: %v", body)
		require.Equal(t, "running", body["status"], "run %s waits for the disk", id)
	}
	resp, body = c.do("POST", "/sessions/"+spare+"/runs", map[string]any{"message": "still full " + pageFiller})
	c.requireUnavailable(resp, body)

	// Space returns.
	spaceBack()
	require.Eventually(t, func() bool {
		resp, _ := c.do("GET", "/readyz", nil)
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond, "readiness recovers by itself")
	for _, id := range runs {
		var body map[string]any
		require.Eventually(t, func() bool {
			var resp *http.Response
			resp, body = c.do("GET", "/runs/"+id, nil)
			return resp.StatusCode == http.StatusOK && body["status"] != "running"
		}, 60*time.Second, 50*time.Millisecond, "run %s goes on by itself", id)
		require.Equal(t, "completed", body["status"], "run %s: %v", id, body["error"])
		require.Equal(t, "rested", body["output"])
	}
	tools.mu.Lock()
	require.Len(t, tools.calls, diskFullRuns)
	for key, n := range tools.calls {
		require.Equal(t, 1, n, "tool %s called once", key)
	}
	tools.mu.Unlock()
	for _, id := range runs {
		recs, err := s.JournalList(context.Background(), id, 0, 0)
		require.NoError(t, err)
		ids := map[string]bool{}
		kinds := map[journal.Kind]int{}
		for _, r := range recs {
			require.False(t, ids[r.ID], "record %s once", r.ID)
			ids[r.ID] = true
			kinds[r.Kind]++
		}
		for _, k := range []journal.Kind{journal.KindToolDispatched, journal.KindToolReturned, journal.KindToolProcessed} {
			require.Equal(t, 1, kinds[k], fmt.Sprintf("run %s: %s", id, k))
		}
		for _, k := range []journal.Kind{journal.KindModelFailed, journal.KindToolFailed, journal.KindCommandFailed} {
			require.Zero(t, kinds[k], fmt.Sprintf("run %s: %s", id, k))
		}
	}
	// And the store takes new work again.
	resp, body = c.do("POST", "/sessions/"+spare+"/runs?wait=30", map[string]any{"message": "after"})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%v", body)
	require.Equal(t, "completed", body["status"])
}
