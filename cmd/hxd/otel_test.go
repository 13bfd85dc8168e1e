package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"hxd/internal/telemetry"
)

// otlpSpan is one span an otlpReceiver received.
type otlpSpan struct {
	name, traceID, spanID, parentID, service string
	attrs                                    map[string]string
	links                                    []otlpLink
}

// otlpLink is a span link: the span context it points at.
type otlpLink struct{ traceID, spanID string }

// otlpReceiver is an OTLP/HTTP trace receiver decoding the exports with
// the collector's pdata.
type otlpReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests int
	spans    []otlpSpan
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 16<<20))
		if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		exp := ptraceotlp.NewExportRequest()
		if err := exp.UnmarshalProto(body); err != nil {
			http.Error(w, "bad protobuf", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.requests++
		rss := exp.Traces().ResourceSpans()
		for i := range rss.Len() {
			rs := rss.At(i)
			service, _ := rs.Resource().Attributes().Get("service.name")
			for j := range rs.ScopeSpans().Len() {
				spans := rs.ScopeSpans().At(j).Spans()
				for k := range spans.Len() {
					s := spans.At(k)
					attrs := map[string]string{}
					for key, v := range s.Attributes().All() {
						attrs[key] = v.AsString()
					}
					var links []otlpLink
					for _, l := range s.Links().All() {
						links = append(links, otlpLink{traceID: l.TraceID().String(), spanID: l.SpanID().String()})
					}
					r.spans = append(r.spans, otlpSpan{
						name: s.Name(), traceID: s.TraceID().String(), spanID: s.SpanID().String(),
						parentID: s.ParentSpanID().String(), service: service.AsString(), attrs: attrs, links: links,
					})
				}
			}
		}
		r.mu.Unlock()
		out, _ := ptraceotlp.NewExportResponse().MarshalProto()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// received returns the spans and the number of export requests so far.
func (r *otlpReceiver) received() ([]otlpSpan, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans), r.requests
}

// otelEnv points the OTLP exporter at r (nil: nowhere) and clears the
// other OTEL_* variables the test does not set, so the machine's
// environment does not leak in.
func otelEnv(t *testing.T, r *otlpReceiver, extra map[string]string) {
	t.Helper()
	endpoint := "http://127.0.0.1:1"
	if r != nil {
		endpoint = r.srv.URL
	}
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}
	for _, name := range []string{"OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER",
		"OTEL_TRACES_SAMPLER_ARG", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_COMPRESSION"} {
		vars[name] = ""
	}
	for k, v := range extra {
		vars[k] = v
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

// hookAgentYAML is a scripted agent calling the webhook at url once.
func hookAgentYAML(url string) string {
	return fmt.Sprintf(`name: hooker
version: v1
model:
  provider: scripted
  script:
    - tool_calls: [{id: w1, name: hook, input: {n: 1}}]
    - text: done
tools:
  - name: hook
    kind: webhook
    url: %s
    replay_policy: idempotent
    timeout_seconds: 30
    input_schema: {type: object, properties: {n: {type: integer}}}
`, url)
}

// TestOTelEndToEnd: `hxd serve --otel` exports its spans over OTLP/HTTP
// (decoded here with the collector's pdata): server spans named after
// the route template, continuing an incoming traceparent; a problem's
// trace_id is its request's trace; the webhook called by the run receives
// a traceparent of the run's trace. (t.Setenv: not parallel.)
func TestOTelEndToEnd(t *testing.T) {
	recv := startOTLPReceiver(t)
	otelEnv(t, recv, map[string]string{"OTEL_SERVICE_NAME": "hxd-e2e"})
	hookParents := make(chan string, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hookParents <- r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"content":"ok"}`)
	}))
	t.Cleanup(hook.Close)
	d := startAgentsDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), map[string]string{"hooker": hookAgentYAML(hook.URL)},
		map[string]string{"HXD_OTEL": "true"})

	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	caller := "00-" + callerTrace + "-" + callerSpan + "-01"
	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]string{"name": "hooker", "version": "v1"}},
		"traceparent", caller)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sid := decode(t, body)["session_id"].(string)
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs?wait=30", map[string]any{"message": "go"})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	require.Equal(t, "completed", decode(t, body)["status"], string(body))

	// A problem carries the trace id of its request: a new trace, or the
	// caller's.
	resp, body = d.do(t, http.MethodGet, "/sessions/no-such-session", nil)
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	problemTrace, _ := decode(t, body)["trace_id"].(string)
	require.Len(t, problemTrace, 32, "problem without trace_id: %s", body)
	resp, body = d.do(t, http.MethodGet, "/sessions/no-such-session", nil, "traceparent", caller)
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	require.Equal(t, callerTrace, decode(t, body)["trace_id"], string(body))

	d.stop() // flushes the spans still queued
	spans, _ := recv.received()
	byName := func(name, trace string) []otlpSpan {
		var out []otlpSpan
		for _, s := range spans {
			if s.name == name && (trace == "" || s.traceID == trace) {
				out = append(out, s)
			}
		}
		return out
	}
	var names []string
	for _, s := range spans {
		names = append(names, s.name)
	}

	created := byName("POST /sessions", callerTrace)
	require.Len(t, created, 1, "spans: %q", names)
	require.Equal(t, callerSpan, created[0].parentID, "the caller's traceparent is the parent")
	require.Equal(t, "/sessions", created[0].attrs["http.route"])
	require.Equal(t, "hxd-e2e", created[0].service, "OTEL_SERVICE_NAME")

	submitted := byName("POST /sessions/{session_id}/runs", "")
	require.Len(t, submitted, 1, "spans: %q", names)
	require.Empty(t, submitted[0].parentID, "a request without traceparent starts a trace")
	require.NotContains(t, strings.Join(names, " "), sid, "a span name holds the route template, not the ids")

	require.Len(t, byName("GET /sessions/{session_id}", problemTrace), 1, "the problem's trace_id is its request's trace; spans: %q", names)
	require.Len(t, byName("GET /sessions/{session_id}", callerTrace), 1, "spans: %q", names)

	// The run's spans: invoke_agent under the submitting request's span,
	// chat and execute_tool under it, and the webhook called with the
	// execute_tool span as its parent.
	run := submitted[0].traceID
	invoke := byName("invoke_agent hooker", run)
	require.Len(t, invoke, 1, "spans: %q", names)
	require.Equal(t, submitted[0].spanID, invoke[0].parentID, "invoke_agent is a child of the request that started the run")
	require.Equal(t, sid, invoke[0].attrs["hxd.session_id"])
	var chats int
	for _, s := range spans {
		if strings.HasPrefix(s.name, "chat") && s.traceID == run && s.parentID == invoke[0].spanID {
			chats++
		}
	}
	require.Equal(t, 2, chats, "one chat span per model call under invoke_agent; spans: %q", names)
	exec := byName("execute_tool hook", run)
	require.Len(t, exec, 1, "spans: %q", names)
	require.Equal(t, invoke[0].spanID, exec[0].parentID)
	require.Equal(t, "returned", exec[0].attrs["hxd.tool.outcome"])
	parent := <-hookParents
	require.Equal(t, "00-"+run+"-"+exec[0].spanID+"-01", parent, "the webhook's traceparent is the execute_tool span")
}

// TestOTelSDKDisabled: OTEL_SDK_DISABLED=true wins over --otel: nothing
// is exported and problems carry no trace_id. (t.Setenv: not parallel.)
func TestOTelSDKDisabled(t *testing.T) {
	recv := startOTLPReceiver(t)
	otelEnv(t, recv, map[string]string{"OTEL_SDK_DISABLED": "true"})
	d := startAgentsDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), nil, map[string]string{"HXD_OTEL": "true"})
	resp, body := d.do(t, http.MethodGet, "/sessions/no-such-session", nil,
		"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	require.NotContains(t, decode(t, body), "trace_id")
	d.stop()
	spans, requests := recv.received()
	require.Zero(t, requests, "export requests; spans: %v", spans)
}

// TestOTelUnknownProtocol: an OTLP protocol the exporters do not speak is
// a usage error at start-up (exit 2), before anything listens.
func TestOTelUnknownProtocol(t *testing.T) {
	otelEnv(t, nil, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "hxd.db"), "--otel"},
		env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard,
			onListen: func(string) { t.Error("serve listened") }})
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.code, "%v", err)
	require.ErrorIs(t, err, telemetry.ErrProtocol)
	require.ErrorContains(t, err, "http/json")
}

// TestSetupOTelLogger: with --otel, serve's and worker's logger adds the
// trace and span ids of a traced context to its lines; off, the logger is
// the one given. (t.Setenv: not parallel.)
func TestSetupOTelLogger(t *testing.T) {
	otelEnv(t, nil, nil)
	var buf strings.Builder
	base := slog.New(slog.NewJSONHandler(&buf, nil))
	ctx := context.Background()

	tel, log, stop, err := setupOTel(ctx, false, base)
	require.NoError(t, err)
	stop()
	require.False(t, tel.Enabled())
	require.Same(t, base, log)

	tel, log, stop, err = setupOTel(ctx, true, base)
	require.NoError(t, err)
	require.True(t, tel.Enabled())
	sctx, span := tel.TracerProvider().Tracer("test").Start(ctx, "request")
	buf.Reset()
	log.InfoContext(sctx, "in a request")
	span.End()
	require.Contains(t, buf.String(), `"trace_id":"`+span.SpanContext().TraceID().String()+`"`)
	require.Contains(t, buf.String(), `"span_id":"`+span.SpanContext().SpanID().String()+`"`)
	buf.Reset()
	log.InfoContext(ctx, "outside")
	require.NotContains(t, buf.String(), "trace_id")
	// Nothing listens at the endpoint: the flush fails within its bound
	// and is only logged.
	stop()
}
