package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTemporalOTel: with --otel on serve and worker, the Temporal SDK's
// interceptor carries the trace across: an activity span the worker
// exports descends from the HTTP server span of the request that started
// the session's workflow; the run's chat and execute_tool spans descend
// from the server span of the request that submitted the run, and the
// webhook gets that trace. (t.Setenv: not parallel.)
func TestTemporalOTel(t *testing.T) {
	te := newTemporalEnv(t)
	recv := startOTLPReceiver(t)
	// The worker exports as it goes (it is not stopped before the check).
	otelEnv(t, recv, map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "100"})
	hookParents := make(chan string, 8)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hookParents <- r.Header.Get("traceparent"):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":"ok"}`)
	}))
	t.Cleanup(hook.Close)
	agents := writeHookAgent(t, "hooker", hook.URL, "idempotent", 1)

	getenv := func(name string) string {
		if name == "HXD_OTEL" {
			return "true"
		}
		return te.getenv(name)
	}
	d := serveInProcess(t, getenv, append([]string{"serve", "--engine", "temporal", "--addr", "127.0.0.1:0",
		"--agents", agents, "--shutdown-timeout", "500ms", "--bundle-signing-key", testSigningKey(t)}, te.flags...))
	w := spawnHxdArgs(t, "worker", append([]string{"worker", "--agents", agents, "--workdir", t.TempDir()}, te.flags...),
		append([]string{"HXD_OTEL=true"}, te.env...)...)
	t.Cleanup(w.stop)

	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]any{"name": "hooker", "version": "v1"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sid := decode(t, body)["session_id"].(string)
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "go"})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	rid := decode(t, body)["run_id"].(string)
	require.Equal(t, "completed", waitRunDone(t, d, rid, 2*time.Minute)["status"])
	d.stop() // flushes serve's spans

	// The worker's spans arrive within its batch delay. The session
	// workflow's own span stays open (the workflow outlives the test), so
	// the tree is checked through the trace: an activity span of the trace
	// whose root is the server span of POST /sessions, which started the
	// workflow (the root has no parent, so every span of its trace
	// descends from it).
	var root, activity otlpSpan
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && activity.spanID == "" {
		spans, _ := recv.received()
		for _, s := range spans {
			if s.name == "POST /sessions" {
				root = s
			}
		}
		for _, s := range spans {
			if root.spanID != "" && strings.HasPrefix(s.name, "RunActivity:") && s.traceID == root.traceID {
				activity = s
			}
		}
		if activity.spanID == "" {
			time.Sleep(200 * time.Millisecond)
		}
	}
	spans, _ := recv.received()
	var names []string
	for _, s := range spans {
		names = append(names, s.name+"("+s.traceID[:8]+" "+s.spanID+"<-"+s.parentID+")")
	}
	require.NotEmpty(t, root.spanID, "no POST /sessions span; spans: %s", strings.Join(names, " "))
	require.Empty(t, root.parentID, "POST /sessions is its trace's root")
	require.NotEmpty(t, activity.spanID, "no activity span in the trace of POST /sessions; spans: %s", strings.Join(names, " "))
	// The client's span of the workflow start is the server span's child.
	var started bool
	for _, s := range spans {
		if strings.HasPrefix(s.name, "StartWorkflow:") && s.parentID == root.spanID {
			started = true
		}
	}
	require.True(t, started, "no StartWorkflow span under POST /sessions; spans: %s", strings.Join(names, " "))

	// The run's own spans (chat, execute_tool) are in the trace of the
	// request that submitted it, under its server span, not in the
	// workflow's: the workflow carries the request's trace context with
	// the run to its activities.
	var submitted otlpSpan
	for _, s := range spans {
		if s.name == "POST /sessions/{session_id}/runs" {
			submitted = s
		}
	}
	require.NotEmpty(t, submitted.spanID, "no POST /sessions/{session_id}/runs span; spans: %s", strings.Join(names, " "))
	require.NotEqual(t, root.traceID, submitted.traceID, "the submit request starts its own trace")
	// Two model calls (the tool call, then "done") and one tool call.
	var chats []otlpSpan
	var exec otlpSpan
	for {
		spans, _ = recv.received()
		chats, exec = nil, otlpSpan{}
		for _, s := range spans {
			if s.attrs["hxd.run_id"] != rid {
				continue
			}
			switch {
			case strings.HasPrefix(s.name, "chat"):
				chats = append(chats, s)
			case s.name == "execute_tool hook":
				exec = s
			}
		}
		if (len(chats) >= 2 && exec.spanID != "") || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	names = names[:0]
	for _, s := range spans {
		names = append(names, s.name+"("+s.traceID[:8]+" "+s.spanID+"<-"+s.parentID+")")
	}
	require.Len(t, chats, 2, "chat spans of the run; spans: %s", strings.Join(names, " "))
	require.NotEmpty(t, exec.spanID, "no execute_tool span of the run; spans: %s", strings.Join(names, " "))
	for _, s := range append(chats, exec) {
		require.Equal(t, submitted.traceID, s.traceID, "%s is in the trace of the run's request; spans: %s", s.name, strings.Join(names, " "))
		require.True(t, descends(spans, s, submitted.spanID), "%s descends from POST /sessions/{session_id}/runs; spans: %s", s.name, strings.Join(names, " "))
		// It links to its activity's span, which stays in the workflow's
		// trace.
		require.Len(t, s.links, 1, "%s links to its activity span", s.name)
		require.Equal(t, root.traceID, s.links[0].traceID, "%s's link is in the workflow's trace", s.name)
	}
	// The webhook's call carries the run's trace: the execute_tool span.
	select {
	case parent := <-hookParents:
		require.Equal(t, "00-"+submitted.traceID+"-"+exec.spanID+"-01", parent, "the webhook's traceparent is the execute_tool span")
	default:
		t.Fatal("the webhook was not called")
	}
}

// descends reports whether s is a descendant of the span ancestor among
// spans (same trace, following parent IDs).
func descends(spans []otlpSpan, s otlpSpan, ancestor string) bool {
	byID := map[string]otlpSpan{}
	for _, x := range spans {
		if x.traceID == s.traceID {
			byID[x.spanID] = x
		}
	}
	for range len(spans) + 1 {
		if s.parentID == ancestor {
			return true
		}
		p, ok := byID[s.parentID]
		if !ok {
			return false
		}
		s = p
	}
	return false
}
