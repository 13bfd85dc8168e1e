package http_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	hxruntime "hxd/internal/runtime"
)

// headPaths gives every path parameter of the contract a value (the stubs
// of stubGets answer those of the GET operations).
var headPaths = strings.NewReplacer(
	"{name}", "demo", "{version}", "v1", "{session_id}", "s1", "{run_id}", "r1",
	"{sha256}", strings.Repeat("ab", 32), "{execution_key}", "r1:1:call_1",
)

// stubGets stubs every read the GET operations make, so that each one
// answers 200. The run r1 is completed, so its event stream ends.
func stubGets(f *fakeService) {
	f.ReadyFunc = func(context.Context) error { return nil }
	f.AgentsFunc = func() []*agent.Definition { return []*agent.Definition{agentFixture()} }
	f.AgentFunc = func(string, string) (*agent.Definition, error) { return agentFixture(), nil }
	f.ListSessionsFunc = func(context.Context, hxruntime.SessionListParams) (hxruntime.Page[hxruntime.Session], error) {
		return hxruntime.Page[hxruntime.Session]{Items: []hxruntime.Session{*sessionFixture()}}, nil
	}
	f.GetSessionFunc = func(context.Context, string) (*hxruntime.Session, error) { return sessionFixture(), nil }
	f.ListRunsFunc = func(context.Context, string, hxruntime.ListParams) (hxruntime.Page[hxruntime.RunResult], error) {
		return hxruntime.Page[hxruntime.RunResult]{Items: []hxruntime.RunResult{*runFixture(hxruntime.StatusCompleted)}}, nil
	}
	f.PendingFunc = func(context.Context, string) ([]hxruntime.PendingTool, error) {
		return []hxruntime.PendingTool{pendingFixture()}, nil
	}
	f.ArtifactFunc = func(context.Context, string) ([]byte, error) { return []byte("artifact bytes"), nil }
	f.RunTimelineFunc = func(context.Context, string) (*hxruntime.RunTimeline, error) { return timelineFixture(), nil }
	run := newFakeRun(f, hxruntime.StatusRunning)
	run.commit(hxruntime.StatusRunning, hxruntime.EventTextDelta)
	run.commit(hxruntime.StatusCompleted, hxruntime.EventRunResult)
}

// TestHeadWhereGet: every GET operation of the contract answers HEAD
// with the status and headers of its GET and no body (and is labelled
// with its operation in the metrics).
func TestHeadWhereGet(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromFile("../../api/openapi.yaml")
	require.NoError(t, err)
	tb := setup(t)
	stubGets(tb.svc)
	var n int
	// Sorted, not in the map's random order: /metrics has a body only
	// once an earlier request was observed, and /agents… sorts before it.
	for _, path := range slices.Sorted(maps.Keys(doc.Paths.Map())) {
		item := doc.Paths.Value(path)
		if item.Get == nil {
			continue
		}
		n++
		url := headPaths.Replace(path)
		require.NotContains(t, url, "{", "a path parameter without a value")
		get, getBody := tb.do(t, request{method: "GET", path: url})
		require.Equal(t, http.StatusOK, get.StatusCode, "GET %s: %s", url, getBody)
		require.NotEmpty(t, getBody, "GET %s", url)

		head, headBody := tb.do(t, request{method: "HEAD", path: url})
		require.Equal(t, http.StatusOK, head.StatusCode, "HEAD %s", url)
		require.Empty(t, headBody, "HEAD %s", url)
		for _, h := range []string{"Content-Type", "Cache-Control", "ETag", "Content-Disposition", "X-Content-Type-Options"} {
			require.Equal(t, get.Header.Get(h), head.Header.Get(h), "HEAD %s: %s", url, h)
		}
		require.NotEmpty(t, head.Header.Get("X-Request-ID"))
	}
	require.Greater(t, n, 10)

	_, body := tb.do(t, request{method: "GET", path: "/metrics"})
	require.Contains(t, string(body), `hxd_http_requests_total{method="HEAD",operation="getSession",status="200"} 1`)
	require.Contains(t, string(body), `hxd_http_requests_total{method="HEAD",operation="listRunEvents",status="200"} 1`)
}

// TestHeadEventStreamOfRunningRun: HEAD on the event stream of a run that
// is still running answers the stream's headers at once instead of
// streaming (which would never end).
func TestHeadEventStreamOfRunningRun(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	run := newFakeRun(tb.svc, hxruntime.StatusRunning)
	run.commit(hxruntime.StatusRunning, hxruntime.EventTextDelta)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a hang guard, not a measurement
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, tb.srv.URL+"/runs/r1/events", nil)
	require.NoError(t, err)
	resp, err := tb.srv.Client().Do(req)
	require.NoError(t, err, "HEAD on a live stream must not wait for the run")
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))

	// An unknown run is a 404, as for GET.
	resp, body := tb.do(t, request{method: "HEAD", path: "/runs/nope/events"})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Empty(t, body)
}

// TestHeadNotAllowed: HEAD is refused where GET is (a 405 whose Allow
// lists what the path takes), and a 405 lists HEAD wherever GET is.
func TestHeadNotAllowed(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tests := []struct {
		method, path, allow string
	}{
		{"HEAD", "/sessions/s1/pause", "POST"},
		{"HEAD", "/bundles/verify", "POST"},
		{"DELETE", "/sessions/s1", "GET, HEAD"},
		{"PUT", "/sessions", "GET, HEAD, POST"},
		{"POST", "/metrics", "GET, HEAD"},
	}
	for _, tt := range tests {
		resp, body := tb.do(t, request{method: tt.method, path: tt.path})
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s: %s", tt.method, tt.path, body)
		require.Equal(t, tt.allow, resp.Header.Get("Allow"), "%s %s", tt.method, tt.path)
		if tt.method != "HEAD" {
			requireProblem(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
		}
	}
	resp, _ := tb.do(t, request{method: "HEAD", path: "/nope"})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestOIDCHead: HEAD on a public operation needs no token, HEAD on any
// other is a 401 without one, as GET.
func TestOIDCHead(t *testing.T) {
	t.Parallel()
	ob := setupOIDC(t, nil)
	ob.svc.ReadyFunc = func(context.Context) error { return nil }
	for _, path := range []string{"/healthz", "/readyz", "/openapi.yaml"} {
		resp, _ := ob.do(t, request{method: "HEAD", path: path})
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	for _, path := range []string{"/metrics", "/sessions", "/runs/r1/events"} {
		resp, body := ob.do(t, request{method: "HEAD", path: path})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
		require.Empty(t, body)
		require.Equal(t, `Bearer realm="hxd"`, resp.Header.Get("WWW-Authenticate"))
	}
}
