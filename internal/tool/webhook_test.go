package tool

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/model"
)

// capturedRequest is what a test webhook server saw.
type capturedRequest struct {
	method, contentType, idempotencyKey string
	traceparent                         string
	body                                []byte
}

// webhookBundle is a webhook tool talking to a test server.
type webhookBundle struct {
	tool Tool
	mu   sync.Mutex
	seen []capturedRequest
}

// requests returns the requests seen so far.
func (b *webhookBundle) requests() []capturedRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]capturedRequest(nil), b.seen...)
}

// setupWebhook starts a server running handler and a webhook tool
// pointing at it.
func setupWebhook(t *testing.T, timeoutSeconds float64, handler http.HandlerFunc) *webhookBundle {
	t.Helper()
	b := &webhookBundle{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.seen = append(b.seen, capturedRequest{
			method: r.Method, contentType: r.Header.Get("Content-Type"),
			idempotencyKey: r.Header.Get("Idempotency-Key"), body: body,
			traceparent: r.Header.Get("traceparent"),
		})
		b.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	tl, err := New(Config{Name: "hook", Kind: KindWebhook, URL: srv.URL + "/hook", TimeoutSeconds: timeoutSeconds},
		Options{HTTPClient: srv.Client()})
	require.NoError(t, err)
	b.tool = tl
	return b
}

// reply returns a handler answering status and body.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func TestWebhookRequest(t *testing.T) {
	t.Parallel()
	b := setupWebhook(t, 5, reply(200, `{"content":"ok"}`))
	inv := Invocation{
		SessionID: "sess", RunID: "run", ExecutionKey: "run:1:c1", Attempt: 2,
		Call: model.ToolCall{ID: "c1", Name: "hook", Input: json.RawMessage(`{"account":"demo"}`)},
	}
	_, err := b.tool.Call(t.Context(), inv)
	require.NoError(t, err)

	seen := b.requests()
	require.Len(t, seen, 1)
	require.Equal(t, http.MethodPost, seen[0].method)
	require.Equal(t, "application/json", seen[0].contentType)
	require.Equal(t, "run:1:c1", seen[0].idempotencyKey)
	require.JSONEq(t, `{"tool":"hook","input":{"account":"demo"},"execution_key":"run:1:c1","attempt":2,"session_id":"sess","run_id":"run"}`, string(seen[0].body))

	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(seen[0].body, &raw))
	require.Equal(t, "2", string(raw["attempt"]), "attempt is a JSON integer")
}

func TestWebhookReplies(t *testing.T) {
	t.Parallel()
	bigBody := `"` + strings.Repeat("x", MaxWebhookReplyBytes) + `"`
	nested := func(levels int) string {
		return `{"content":` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
	}
	deepest, tooDeep := nested(journal.MaxInputDepth), nested(journal.MaxInputDepth+1)
	tests := []struct {
		name    string
		handler http.HandlerFunc
		timeout float64
		// want is the result when the call succeeds.
		want *model.ToolResult
		// wantFailure is the failure type when it fails.
		wantFailure   string
		wantTransient bool
		wantArtifacts []Artifact
	}{
		{name: "200 string content", handler: reply(200, `{"content":"balance 1500","is_error":false}`),
			want: &model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(`"balance 1500"`)}},
		{name: "200 json content", handler: reply(200, `{"content":{"balance":1500}}`),
			want: &model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(`{"balance":1500}`)}},
		{name: "201 is_error", handler: reply(201, `{"content":"no such account","is_error":true}`),
			want: &model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(`"no such account"`), IsError: true}},
		{name: "200 plain text", handler: reply(200, "just text"),
			want: &model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(`"just text"`)}},
		{name: "200 object without content", handler: reply(200, `{"balance":1500}`),
			want: &model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(`"{\"balance\":1500}"`)}},
		{name: "200 json array", handler: reply(200, `[1,2]`),
			want: &model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(`"[1,2]"`)}},
		{name: "200 content at the depth limit", handler: reply(200, deepest),
			want: &model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(deepest[len(`{"content":`) : len(deepest)-1])}},
		{name: "200 content nested too deep is text", handler: reply(200, tooDeep),
			want: &model.ToolResult{ToolCallID: "c1", Content: TextContent(tooDeep)}},
		{name: "200 content not UTF-8 is text", handler: reply(200, "{\"content\":\"a\xffb\"}"),
			want: &model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(`"{\"content\":\"a\ufffdb\"}"`)}},
		{name: "200 content with a repeated key is text", handler: reply(200, `{"content":{"a":1,"a":2}}`),
			want: &model.ToolResult{ToolCallID: "c1", Content: TextContent(`{"content":{"a":1,"a":2}}`)}},
		{name: "200 content with a number beyond float range is text", handler: reply(200, `{"content":1e999}`),
			want: &model.ToolResult{ToolCallID: "c1", Content: TextContent(`{"content":1e999}`)}},
		{name: "200 empty", handler: reply(200, ``),
			want: &model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(`""`)}},
		{name: "artifacts", handler: reply(200, `{"content":"see chart","artifacts":[{"media_type":"image/png","base64":"`+base64.StdEncoding.EncodeToString([]byte("PNG\x00data"))+`"},{"base64":"aGk="}]}`),
			want:          &model.ToolResult{ToolCallID: "c1", Content: json.RawMessage(`"see chart"`)},
			wantArtifacts: []Artifact{{MediaType: "image/png", Data: []byte("PNG\x00data")}, {MediaType: "application/octet-stream", Data: []byte("hi")}}},
		{name: "bad base64", handler: reply(200, `{"content":"x","artifacts":[{"media_type":"text/plain","base64":"!!!"}]}`),
			want: &model.ToolResult{ToolCallID: "c1", Content: TextContent("webhook reply artifacts[0].base64 is not valid base64"), IsError: true}},
		{name: "404 error result", handler: reply(404, `secret body`),
			want: &model.ToolResult{ToolCallID: "c1", Content: TextContent("webhook returned HTTP 404 Not Found"), IsError: true}},
		{name: "400 error result", handler: reply(400, `{"content":"x"}`),
			want: &model.ToolResult{ToolCallID: "c1", Content: TextContent("webhook returned HTTP 400 Bad Request"), IsError: true}},
		{name: "429 transient", handler: reply(429, ``), wantFailure: "TransientToolError", wantTransient: true},
		{name: "500 transient", handler: reply(500, ``), wantFailure: "TransientToolError", wantTransient: true},
		{name: "503 transient", handler: reply(503, ``), wantFailure: "TransientToolError", wantTransient: true},
		{name: "304 failure", handler: reply(304, ``), wantFailure: "WebhookError"},
		{name: "timeout transient", timeout: 0.05, handler: func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			wantFailure: "TimeoutError", wantTransient: true},
		{name: "oversize body", handler: reply(200, bigBody), wantFailure: "WebhookError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 10
			}
			b := setupWebhook(t, timeout, tt.handler)
			out, err := b.tool.Call(t.Context(), invocation("hook", `{}`))
			if tt.wantFailure != "" {
				require.Error(t, err)
				f := AsFailure(err)
				require.Equal(t, tt.wantFailure, f.Type)
				require.Equal(t, tt.wantTransient, f.Transient)
				require.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			require.Equal(t, *tt.want, out.Result)
			require.Equal(t, tt.wantArtifacts, out.Artifacts)
		})
	}
}

func TestWebhookConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/hook?token=secret"
	client := srv.Client()
	srv.Close()
	tl, err := New(Config{Name: "hook", Kind: KindWebhook, URL: url}, Options{HTTPClient: client})
	require.NoError(t, err)
	_, err = tl.Call(t.Context(), invocation("hook", `{}`))
	require.Error(t, err)
	f := AsFailure(err)
	require.Equal(t, "ConnectionError", f.Type)
	require.True(t, f.Transient)
	require.False(t, f.MayHaveRun, "a refused connection sent nothing")
	require.NotContains(t, err.Error(), "secret", "the URL stays out of the error")
}

// TestWebhookMayHaveRun: a failure after the request could have reached
// the tool (a timeout, a connection dropped before the reply) may have
// taken effect.
func TestWebhookMayHaveRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		timeout  float64
		handler  http.HandlerFunc
		wantType string
	}{
		{"timeout", 0.05, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, "TimeoutError"},
		{"dropped before the reply", 10, func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}, "ConnectionError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupWebhook(t, tt.timeout, tt.handler)
			_, err := b.tool.Call(t.Context(), invocation("hook", `{}`))
			require.Error(t, err)
			f := AsFailure(err)
			require.Equal(t, tt.wantType, f.Type)
			require.True(t, f.Transient)
			require.True(t, f.MayHaveRun)
		})
	}
}
