package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	hxhttp "hxd/internal/http"
	"hxd/internal/http/api"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/tool"
)

// testBundle is one server under test with its fake service.
type testBundle struct {
	svc    *fakeService
	srv    *httptest.Server
	reg    *prometheus.Registry
	logs   *logCapture
	router routers.Router
}

// setup starts a server over a fresh fakeService; opts adjust the Config.
func setup(t *testing.T, opts ...func(*hxhttp.Config)) *testBundle {
	t.Helper()
	tb := &testBundle{svc: &fakeService{}, reg: prometheus.NewRegistry(), logs: &logCapture{}}
	cfg := hxhttp.Config{
		Service:  tb.svc,
		Logger:   slog.New(&teeHandler{a: hxtest.Logger(t).Handler(), b: tb.logs}),
		Version:  "test",
		Registry: tb.reg,
	}
	for _, o := range opts {
		o(&cfg)
	}
	tb.srv = httptest.NewServer(hxhttp.New(cfg))
	t.Cleanup(func() {
		tb.srv.Client().CloseIdleConnections()
		tb.srv.Close()
	})

	var err error
	tb.router, err = contractRouter()
	require.NoError(t, err)
	return tb
}

// contractRouter finds the contract operation of a request (for response
// validation); built once.
var contractRouter = sync.OnceValues(func() (routers.Router, error) {
	spec, err := api.GetSwagger()
	if err != nil {
		return nil, err
	}
	spec.Servers = nil // match any host
	return legacy.NewRouter(spec)
})

// request is one call to the server under test.
type request struct {
	method string
	path   string
	body   string
	header map[string]string
}

// do sends rq and returns the response with its body read. JSON and
// problem responses are validated against the contract.
func (tb *testBundle) do(t *testing.T, rq request) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader = http.NoBody
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	req, err := http.NewRequestWithContext(t.Context(), rq.method, tb.srv.URL+rq.path, body)
	require.NoError(t, err)
	if rq.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range rq.header {
		req.Header.Set(k, v)
	}
	resp, err := tb.srv.Client().Do(req)
	require.NoError(t, err)
	defer hxtest.Close(t, resp.Body)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	tb.checkContract(t, req, resp, data)
	return resp, data
}

// checkContract validates a JSON or problem response against the
// operation it answers (when the request matched one).
func (tb *testBundle) checkContract(t *testing.T, req *http.Request, resp *http.Response, data []byte) {
	t.Helper()
	ct := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "application/problem+json") {
		return
	}
	route, params, err := tb.router.FindRoute(req)
	if err != nil {
		return // unknown path or method: no operation to check against
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: resp.StatusCode,
		Header: resp.Header,
		Body:   io.NopCloser(bytes.NewReader(data)),
	}
	require.NoError(t, openapi3filter.ValidateResponse(context.Background(), in), "response breaks the contract: %s", data)
}

// decode unmarshals a JSON body.
func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(data, &v), "body: %s", data)
	return v
}

// requireProblem asserts a problem+json answer with status and code.
func requireProblem(t *testing.T, resp *http.Response, data []byte, status int, code string) api.Problem {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, "body: %s", data)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	p := decode[api.Problem](t, data)
	require.Equal(t, code, p.Code)
	require.Equal(t, status, p.Status)
	require.Equal(t, "urn:hxd:problem:"+code, p.Type)
	require.NotEmpty(t, p.Title)
	require.NotEmpty(t, p.RequestId)
	require.Equal(t, resp.Header.Get("X-Request-ID"), p.RequestId)
	return p
}

// logCapture is a slog.Handler keeping every record as JSON.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	if err := h.Handle(context.Background(), r); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, buf.String())
	return nil
}

func (c *logCapture) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &attrHandler{c: c, attrs: attrs}
}

func (c *logCapture) WithGroup(string) slog.Handler { return c }

// matching returns the captured lines containing every one of subs.
func (c *logCapture) matching(subs ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
next:
	for _, l := range c.lines {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

type attrHandler struct {
	c     *logCapture
	attrs []slog.Attr
}

func (h *attrHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *attrHandler) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	return h.c.Handle(ctx, r)
}

func (h *attrHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &attrHandler{c: h.c, attrs: append(append([]slog.Attr{}, h.attrs...), attrs...)}
}

func (h *attrHandler) WithGroup(string) slog.Handler { return h }

// teeHandler sends records to two handlers.
type teeHandler struct{ a, b slog.Handler }

func (h *teeHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *teeHandler) Handle(ctx context.Context, r slog.Record) error {
	_ = h.a.Handle(ctx, r.Clone())
	return h.b.Handle(ctx, r.Clone())
}

func (h *teeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &teeHandler{a: h.a.WithAttrs(attrs), b: h.b.WithAttrs(attrs)}
}

func (h *teeHandler) WithGroup(name string) slog.Handler {
	return &teeHandler{a: h.a.WithGroup(name), b: h.b.WithGroup(name)}
}

// Fixtures.

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func sessionFixture() *hxruntime.Session {
	return &hxruntime.Session{
		ID:        "s1",
		Agent:     agent.Ref{Name: "demo", Version: "v1"},
		Recording: true,
		Metadata:  json.RawMessage(`{"customer":"acme"}`),
		CreatedAt: t0,
		LatestRun: &hxruntime.RunRef{RunID: "r1", Status: hxruntime.StatusCompleted},
	}
}

func pendingFixture() hxruntime.PendingTool {
	return hxruntime.PendingTool{
		Call:           model.ToolCall{ID: "call_1", Name: "refund", Input: json.RawMessage(`{"amount":10}`)},
		Status:         hxruntime.ToolApproval,
		Attempt:        0,
		ExecutionKey:   "r1:1:call_1",
		Policy:         tool.PolicyManual,
		TimeoutSeconds: journal.Float(300),
		Retry:          &tool.Retry{Attempts: 3, BackoffSeconds: 0.5, MaxBackoffSeconds: 30},
	}
}

func runFixture(status hxruntime.RunStatus) *hxruntime.RunResult {
	r := &hxruntime.RunResult{
		SessionID: "s1",
		RunID:     "r1",
		Status:    status,
		Usage:     model.Usage{InputTokens: 12, OutputTokens: 3},
		Pending:   []hxruntime.PendingTool{},
		CreatedAt: t0,
		UpdatedAt: t0.Add(time.Second),
	}
	switch status {
	case hxruntime.StatusCompleted:
		r.Output, r.StopReason = ptr("done"), ptr("end_turn")
	case hxruntime.StatusAwaitingInput:
		r.Pending = []hxruntime.PendingTool{pendingFixture()}
	case hxruntime.StatusFailed:
		r.Error = &hxruntime.RunError{Type: "ProviderError", Message: "model call failed"}
	}
	return r
}

func agentFixture() *agent.Definition {
	return &agent.Definition{
		Name:         "demo",
		Version:      "v1",
		SystemPrompt: "You help.",
		Model: model.Config{
			Provider:  model.ProviderOpenAI,
			Model:     "gpt-4o-mini",
			BaseURL:   "https://user:hunter2@llm.example/v1",
			APIKeyEnv: "OPENAI_API_KEY",
		},
		Tools: []agent.ToolDef{
			{Config: tool.Config{Name: "echo", Description: "Echo.", ReplayPolicy: tool.PolicySafe}},
			{Config: tool.Config{Name: "refund", Kind: tool.KindWebhook, URL: "https://token:s3cret@hooks.example/refund", Permission: tool.PermissionAsk}},
		},
	}
}
