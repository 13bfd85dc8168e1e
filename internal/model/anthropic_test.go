package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	testAnthropicKeyEnv = "HXD_TEST_ANTHROPIC_KEY"
	testAnthropicKey    = "sk-ant-test-0123456789secret"
)

// anthropicBundle is a fake Messages server and a provider pointed at it.
type anthropicBundle struct {
	provider *Anthropic
	srv      *httptest.Server
	hits     atomic.Int32

	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
}

// request returns the body (decoded) and headers of request i (0-based).
func (b *anthropicBundle) request(t *testing.T, i int) (map[string]any, http.Header) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Greater(t, len(b.bodies), i)
	var body map[string]any
	require.NoError(t, json.Unmarshal(b.bodies[i], &body))
	return body, b.headers[i]
}

// setupAnthropic starts a server answering POST /v1/messages with handler
// and a provider for it; mutate adjusts the config before the provider is
// built.
func setupAnthropic(t *testing.T, handler http.HandlerFunc, mutate func(*Config)) *anthropicBundle {
	t.Helper()
	b := &anthropicBundle{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read body", http.StatusInternalServerError)
			return
		}
		b.mu.Lock()
		b.bodies = append(b.bodies, body)
		b.headers = append(b.headers, r.Header.Clone())
		b.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		handler(w, r)
	}))
	client := b.srv.Client()
	t.Cleanup(func() {
		b.srv.Close()
		client.CloseIdleConnections()
	})
	cfg := Config{
		Provider:  ProviderAnthropic,
		Model:     "claude-test",
		BaseURL:   b.srv.URL,
		APIKeyEnv: testAnthropicKeyEnv,
		MaxTokens: 2048,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := NewAnthropic(cfg, Options{
		LookupEnvFunc: func(name string) (string, bool) {
			if name == testAnthropicKeyEnv {
				return testAnthropicKey, true
			}
			return "", false
		},
		HTTPClient: client,
	})
	require.NoError(t, err)
	b.provider = p
	return b
}

// sseEvent renders one server-sent event.
func sseEvent(name, data string) string {
	return "event: " + name + "\ndata: " + data + "\n\n"
}

// Event fixtures after Anthropic's documented streaming sequence
// (https://docs.anthropic.com/en/docs/build-with-claude/streaming).
var (
	evMessageStart = sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1,"cache_read_input_tokens":3,"cache_creation_input_tokens":2}}}`)
	evPing         = sseEvent("ping", `{"type": "ping"}`)
	evMessageStop  = sseEvent("message_stop", `{"type":"message_stop"}`)
)

func evBlockStart(i int, block string) string {
	return sseEvent("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, block))
}

func evDelta(i int, delta string) string {
	return sseEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":%s}`, i, delta))
}

func evBlockStop(i int) string {
	return sseEvent("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
}

func evMessageDelta(stopReason string, outputTokens int) string {
	return sseEvent("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stopReason, outputTokens))
}

func evError(errType string) string {
	return sseEvent("error", fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"provider free text that must not be echoed"}}`, errType))
}

// textStream is a complete one-text-block answer.
func textStream(text, stopReason string) string {
	return evMessageStart + evBlockStart(0, `{"type":"text","text":""}`) + evPing +
		evDelta(0, fmt.Sprintf(`{"type":"text_delta","text":%q}`, text[:len(text)/2])) +
		evDelta(0, fmt.Sprintf(`{"type":"text_delta","text":%q}`, text[len(text)/2:])) +
		evBlockStop(0) + evMessageDelta(stopReason, 15) + evMessageStop
}

// stream writes an SSE body with status 200.
func stream(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, body)
}

func hi() *Request {
	return &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}, Step: 1, Attempt: 1}
}

func TestAnthropicTextAnswer(t *testing.T) {
	t.Parallel()

	b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) {
		stream(w, textStream("Hello there.", "end_turn"))
	}, func(c *Config) { c.Temperature = new(0.5) })

	req := hi()
	req.System = "Be brief."
	req.Tools = []ToolSpec{{Name: "get_weather", Description: "Weather by city",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}}
	resp, err := b.provider.Complete(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, &Response{
		Text:          "Hello there.",
		StopReason:    "end_turn",
		Usage:         Usage{InputTokens: 25, OutputTokens: 15, CacheReadInputTokens: 3, CacheCreationInputTokens: 2},
		UsageReported: true,
		Model:         "claude-test",
	}, resp)

	body, header := b.request(t, 0)
	require.Contains(t, header.Get("Authorization")+header.Get("X-Api-Key"), testAnthropicKey)
	require.Equal(t, "claude-test", body["model"])
	require.InDelta(t, 2048, body["max_tokens"], 0)
	require.InDelta(t, 0.5, body["temperature"], 0)
	require.Equal(t, true, body["stream"])
	require.NotContains(t, body, "thinking")
	require.Equal(t, []any{map[string]any{"type": "text", "text": "Be brief."}}, body["system"])
	require.Equal(t, []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Hi"}}}}, body["messages"])
	tools, err := json.Marshal(body["tools"])
	require.NoError(t, err)
	require.JSONEq(t, `[{"name":"get_weather","description":"Weather by city",
		"input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}]`, string(tools))
	require.Equal(t, int32(1), b.hits.Load())
}

func TestAnthropicToolUseAnswer(t *testing.T) {
	t.Parallel()

	b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) {
		stream(w, evMessageStart+
			evBlockStart(0, `{"type":"text","text":""}`)+
			evDelta(0, `{"type":"text_delta","text":"Checking."}`)+evBlockStop(0)+
			evBlockStart(1, `{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}`)+
			evDelta(1, `{"type":"input_json_delta","partial_json":""}`)+
			evDelta(1, `{"type":"input_json_delta","partial_json":"{\"city\": \"San"}`)+
			evPing+
			evDelta(1, `{"type":"input_json_delta","partial_json":" Francisco\"}"}`)+
			evBlockStop(1)+
			evBlockStart(2, `{"type":"tool_use","id":"toolu_02","name":"now","input":{}}`)+
			evBlockStop(2)+
			evMessageDelta("tool_use", 40)+evMessageStop)
	}, nil)

	req := &Request{Messages: []Message{
		TextMessage(RoleUser, "Weather?"),
		{Role: RoleAssistant, Content: []ContentBlock{{Type: BlockToolUse, ID: "toolu_00", Name: "now"}}},
		{Role: RoleUser, Content: []ContentBlock{
			{Type: BlockToolResult, ToolUseID: "toolu_00", Content: json.RawMessage(`"noon"`)},
			{Type: BlockToolResult, ToolUseID: "toolu_00", Content: json.RawMessage(`{"a":1}`), IsError: true},
		}},
	}}
	resp, err := b.provider.Complete(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, "Checking.", resp.Text)
	require.Equal(t, "tool_use", resp.StopReason)
	require.Equal(t, []ToolCall{
		{ID: "toolu_01", Name: "get_weather", Input: json.RawMessage(`{"city":"San Francisco"}`)},
		{ID: "toolu_02", Name: "now", Input: json.RawMessage(`{}`)},
	}, resp.ToolCalls)
	require.Nil(t, resp.Content, "no native block: no content")

	body, _ := b.request(t, 0)
	msgs, err := json.Marshal(body["messages"])
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"role":"user","content":[{"type":"text","text":"Weather?"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_00","name":"now","input":{}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"toolu_00","content":[{"type":"text","text":"noon"}],"is_error":false},
			{"type":"tool_result","tool_use_id":"toolu_00","content":[{"type":"text","text":"{\"a\":1}"}],"is_error":true}]}
	]`, string(msgs))
}

// thinkingStream answers with a signed thinking block, a redacted one, an
// opaque (server tool) block, text and a tool call, in that order.
var thinkingStream = evMessageStart +
	evBlockStart(0, `{"type":"thinking","thinking":"","signature":""}`) +
	evDelta(0, `{"type":"thinking_delta","thinking":"I should look"}`) +
	evDelta(0, `{"type":"thinking_delta","thinking":" it up."}`) +
	evDelta(0, `{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}`) +
	evBlockStop(0) +
	evBlockStart(1, `{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}`) +
	evBlockStop(1) +
	evBlockStart(2, `{"type":"server_tool_use","id":"srvtoolu_01","name":"web_search","input":{"query":"weather"}}`) +
	evBlockStop(2) +
	evBlockStart(3, `{"type":"text","text":""}`) +
	evDelta(3, `{"type":"text_delta","text":"Let me check."}`) +
	evBlockStop(3) +
	evBlockStart(4, `{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}`) +
	evDelta(4, `{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}`) +
	evBlockStop(4) +
	evMessageDelta("tool_use", 99) + evMessageStop

// wantThinkingContent is the reply's content as native blocks, in order.
const wantThinkingContent = `[
	{"type":"thinking","thinking":"I should look it up.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
	{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
	{"type":"server_tool_use","id":"srvtoolu_01","name":"web_search","input":{"query":"weather"}},
	{"type":"text","text":"Let me check."},
	{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris"}}
]`

func TestAnthropicThinkingRoundTrip(t *testing.T) {
	t.Parallel()

	var calls atomic.Int32
	b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			stream(w, thinkingStream)
			return
		}
		stream(w, textStream("Sunny.", "end_turn"))
	}, func(c *Config) { c.Thinking = &Thinking{BudgetTokens: 1024} })

	first := hi()
	resp, err := b.provider.Complete(t.Context(), first)
	require.NoError(t, err)
	require.Equal(t, "I should look it up.", resp.Thinking)
	require.Equal(t, "Let me check.", resp.Text)
	require.Equal(t, "tool_use", resp.StopReason)
	require.Equal(t, []ToolCall{{ID: "toolu_01", Name: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)}}, resp.ToolCalls)
	content, err := json.Marshal(resp.Content)
	require.NoError(t, err)
	require.JSONEq(t, wantThinkingContent, string(content), "native blocks in order, as recorded in model.response")

	body, _ := b.request(t, 0)
	require.Equal(t, map[string]any{"type": "enabled", "budget_tokens": float64(1024)}, body["thinking"])

	// The journal round trip: the recorded content decodes to the same blocks.
	var decoded []ContentBlock
	require.NoError(t, json.Unmarshal(content, &decoded))
	again, err := json.Marshal(decoded)
	require.NoError(t, err)
	require.JSONEq(t, wantThinkingContent, string(again))

	second := &Request{Messages: []Message{
		TextMessage(RoleUser, "Hi"),
		{Role: RoleAssistant, Content: decoded},
		{Role: RoleUser, Content: []ContentBlock{{Type: BlockToolResult, ToolUseID: "toolu_01", Content: json.RawMessage(`"sunny"`)}}},
	}}
	_, err = b.provider.Complete(t.Context(), second)
	require.NoError(t, err)

	body, _ = b.request(t, 1)
	msgs := body["messages"].([]any)
	require.Len(t, msgs, 3)
	asst, err := json.Marshal(msgs[1])
	require.NoError(t, err)
	require.JSONEq(t, `{"role":"assistant","content":`+wantThinkingContent+`}`, string(asst), "native blocks sent back verbatim")
}

func TestContentBlockJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{name: "text", in: `{"type":"text","text":"a"}`},
		{name: "tool_use", in: `{"type":"tool_use","id":"t","name":"n","input":{"x":1}}`},
		{name: "tool_result", in: `{"type":"tool_result","tool_use_id":"t","content":"ok","is_error":true}`},
		{name: "thinking", in: `{"type":"thinking","thinking":"hm","signature":"sig"}`},
		{name: "redacted_thinking", in: `{"type":"redacted_thinking","data":"opaque=="}`},
		{name: "opaque", in: `{"type":"web_search_tool_result","tool_use_id":"s","content":[{"type":"web_search_result","url":"https://x"}],"extra":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b ContentBlock
			require.NoError(t, json.Unmarshal([]byte(tt.in), &b))
			out, err := json.Marshal(b)
			require.NoError(t, err)
			require.JSONEq(t, tt.in, string(out))
		})
	}
	out, err := json.Marshal(ContentBlock{Type: BlockText, Text: "a"})
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"text","text":"a"}`, string(out), "plain blocks keep their shape")
}

// TestAnthropicIgnoresAmbientEnv: ANTHROPIC_* variables never configure the
// client; only api_key_env and base_url do.
func TestAnthropicIgnoresAmbientEnv(t *testing.T) {
	var ambientHits atomic.Int32
	ambient := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ambientHits.Add(1)
		stream(w, textStream("wrong server", "end_turn"))
	}))
	t.Cleanup(ambient.Close)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-ambient-key")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "ambient-token")
	t.Setenv("ANTHROPIC_BASE_URL", ambient.URL)
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Ambient: leaked")
	t.Setenv("ANTHROPIC_PROFILE", "ambient-profile")
	t.Setenv("ANTHROPIC_CONFIG_DIR", t.TempDir())

	for _, keyEnv := range []string{"", testAnthropicKeyEnv} {
		t.Run("api_key_env="+keyEnv, func(t *testing.T) {
			b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) {
				stream(w, textStream("ok", "end_turn"))
			}, func(c *Config) { c.APIKeyEnv = keyEnv })

			resp, err := b.provider.Complete(t.Context(), hi())
			require.NoError(t, err)
			require.Equal(t, "ok", resp.Text)
			_, header := b.request(t, 0)
			for name, values := range header {
				for _, v := range values {
					require.NotContains(t, v, "ambient", "header %s", name)
				}
			}
			require.Empty(t, header.Get("X-Ambient"))
			if keyEnv == "" {
				require.Empty(t, header.Get("Authorization"))
				require.Empty(t, header.Get("X-Api-Key"))
			} else {
				require.Contains(t, header.Get("Authorization")+header.Get("X-Api-Key"), testAnthropicKey)
			}
		})
	}
	require.Equal(t, int32(0), ambientHits.Load(), "ANTHROPIC_BASE_URL must not be used")
}

func TestAnthropicStatusErrors(t *testing.T) {
	t.Parallel()
	errBody := func(errType string) string {
		return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"provider free text that must not be echoed"}}`, errType)
	}
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		wantType   string
		retryable  bool
		retryAfter float64
	}{
		{name: "429 with retry-after", status: 429, header: map[string]string{"Retry-After": "7"}, body: errBody("rate_limit_error"),
			wantType: FailureRateLimit, retryable: true, retryAfter: 7},
		{name: "529 overloaded", status: 529, body: errBody("overloaded_error"), wantType: FailureAPIStatus, retryable: true},
		{name: "500", status: 500, body: errBody("api_error"), wantType: FailureAPIStatus, retryable: true},
		{name: "503 with retry-after-ms", status: 503, header: map[string]string{"Retry-After-Ms": "1500"}, body: "<html>bad gateway</html>",
			wantType: FailureAPIStatus, retryable: true, retryAfter: 1.5},
		{name: "400", status: 400, body: errBody("invalid_request_error"), wantType: FailureBadRequest},
		{name: "413", status: 413, body: errBody("request_too_large"), wantType: FailureBadRequest},
		{name: "401", status: 401, body: errBody("authentication_error"), wantType: FailureAuthentication},
		{name: "403", status: 403, body: errBody("permission_error"), wantType: FailureAuthentication},
		// Classified by status, never by text: an "overloaded" 400 stays permanent.
		{name: "400 saying overloaded", status: 400, body: errBody("overloaded_error"), wantType: FailureBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}, nil)
			_, err := b.provider.Complete(t.Context(), hi())
			var f *Failure
			require.ErrorAs(t, err, &f)
			require.Equal(t, tt.wantType, f.Type)
			require.Equal(t, tt.retryable, f.Retryable)
			require.Equal(t, tt.retryable, IsTransient(err))
			require.Equal(t, tt.status, f.Status)
			require.InDelta(t, tt.retryAfter, f.RetryAfterSeconds, 0.001)
			require.NotContains(t, err.Error(), "free text")
			require.NotContains(t, err.Error(), testAnthropicKey)
			require.Equal(t, int32(1), b.hits.Load(), "the SDK must not retry")
		})
	}
}

func TestAnthropicStreamFailures(t *testing.T) {
	t.Parallel()
	partial := evMessageStart + evBlockStart(0, `{"type":"text","text":""}`) + evDelta(0, `{"type":"text_delta","text":"Hel"}`)
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		wantType  string
		retryable bool
	}{
		{name: "overloaded_error event", handler: func(w http.ResponseWriter, _ *http.Request) { stream(w, partial+evError("overloaded_error")) },
			wantType: FailureAPIStatus, retryable: true},
		{name: "api_error event", handler: func(w http.ResponseWriter, _ *http.Request) { stream(w, evMessageStart+evError("api_error")) },
			wantType: FailureAPIStatus, retryable: true},
		{name: "invalid_request_error event", handler: func(w http.ResponseWriter, _ *http.Request) { stream(w, evError("invalid_request_error")) },
			wantType: FailureAPIStatus},
		{name: "stream ends without message_stop", handler: func(w http.ResponseWriter, _ *http.Request) {
			stream(w, partial+evBlockStop(0)+evMessageDelta("end_turn", 3))
		}, wantType: FailureConnection, retryable: true},
		{name: "empty stream", handler: func(w http.ResponseWriter, _ *http.Request) { stream(w, "") },
			wantType: FailureConnection, retryable: true},
		{name: "connection cut mid-stream", handler: func(w http.ResponseWriter, _ *http.Request) {
			stream(w, partial)
			_ = http.NewResponseController(w).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}, wantType: FailureConnection, retryable: true},
		{name: "data not JSON", handler: func(w http.ResponseWriter, _ *http.Request) {
			stream(w, evMessageStart+sseEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text"`))
		}, wantType: FailureResponseValidation},
		{name: "delta for a block never started", handler: func(w http.ResponseWriter, _ *http.Request) {
			stream(w, evMessageStart+evDelta(3, `{"type":"text_delta","text":"x"}`)+evMessageStop)
		}, wantType: FailureResponseValidation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupAnthropic(t, tt.handler, nil)
			resp, err := b.provider.Complete(t.Context(), hi())
			require.Nil(t, resp)
			var f *Failure
			require.ErrorAs(t, err, &f)
			require.Equal(t, tt.wantType, f.Type, "%v", err)
			require.Equal(t, tt.retryable, f.Retryable)
			require.NotContains(t, err.Error(), "free text")
			require.Equal(t, int32(1), b.hits.Load(), "the SDK must not retry")
		})
	}
}

func TestAnthropicStopReasons(t *testing.T) {
	t.Parallel()
	for _, reason := range []string{"end_turn", "max_tokens", "stop_sequence", "pause_turn", "refusal"} {
		t.Run(reason, func(t *testing.T) {
			t.Parallel()
			b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) {
				stream(w, textStream("text", reason))
			}, nil)
			resp, err := b.provider.Complete(t.Context(), hi())
			require.NoError(t, err)
			require.Equal(t, reason, resp.StopReason)
		})
	}
	tests := []struct {
		reason string
		tools  bool
		want   string
	}{
		{"", false, "end_turn"},
		{"", true, "tool_use"},
		{"tool_use", true, "tool_use"},
		{"pause_turn", false, "pause_turn"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, anthropicStopReason(tt.reason, tt.tools), "%q tools=%v", tt.reason, tt.tools)
	}
}

func TestAnthropicTimeout(t *testing.T) {
	t.Parallel()
	b := setupAnthropic(t, func(w http.ResponseWriter, r *http.Request) {
		stream(w, evMessageStart)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done() // an event stream that never ends
	}, func(c *Config) { c.TimeoutSeconds = 0.2 })
	_, err := b.provider.Complete(t.Context(), hi())
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, FailureTimeout, f.Type)
	require.True(t, f.Retryable)
}

func TestAnthropicParentCancel(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	b := setupAnthropic(t, func(w http.ResponseWriter, r *http.Request) {
		stream(w, evMessageStart)
		_ = http.NewResponseController(w).Flush()
		close(started)
		<-r.Context().Done()
	}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	_, err := b.provider.Complete(ctx, hi())
	require.ErrorIs(t, err, context.Canceled)
	var f *Failure
	require.False(t, errors.As(err, &f), "a cancellation is not a model failure")
}

func TestAnthropicReplyTooLarge(t *testing.T) {
	t.Parallel()
	b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, evMessageStart+evBlockStart(0, `{"type":"text","text":""}`))
		chunk := evDelta(0, `{"type":"text_delta","text":"`+strings.Repeat("x", 1<<20)+`"}`)
		for range MaxReplyBytes/len(chunk) + 2 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	}, nil)
	_, err := b.provider.Complete(t.Context(), hi())
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, FailureResponseValidation, f.Type)
	require.False(t, f.Retryable)
}

func TestAnthropicInvalidRequest(t *testing.T) {
	t.Parallel()
	b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) {
		stream(w, textStream("never", "end_turn"))
	}, nil)
	tests := []struct {
		name string
		req  *Request
		want string
	}{
		{name: "tool_use in a user message", req: &Request{Messages: []Message{{Role: RoleUser, Content: []ContentBlock{{Type: BlockToolUse, ID: "x"}}}}},
			want: `message 0 block 0: block type "tool_use" is not allowed in a user message`},
		{name: "unknown role", req: &Request{Messages: []Message{{Role: "system", Content: []ContentBlock{{Type: BlockText, Text: "x"}}}}},
			want: `message 0: unsupported role "system"`},
		{name: "schema not an object", req: &Request{Messages: []Message{TextMessage(RoleUser, "x")}, Tools: []ToolSpec{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}},
			want: `tool 0 ("t"): input_schema: not a JSON object`},
	}
	for _, tt := range tests {
		_, err := b.provider.Complete(t.Context(), tt.req)
		var f *Failure
		require.ErrorAs(t, err, &f, tt.name)
		require.Equal(t, FailureInvalidRequest, f.Type, tt.name)
		require.Contains(t, f.Message, tt.want, tt.name)
	}
	require.Equal(t, int32(0), b.hits.Load())
}

func TestNewAnthropicWrongProvider(t *testing.T) {
	t.Parallel()
	_, err := NewAnthropic(Config{Provider: ProviderOpenAI, Model: "m"}, Options{})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
