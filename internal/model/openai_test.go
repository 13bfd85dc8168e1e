package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
)

const (
	testKeyEnv = "HXD_TEST_OPENAI_KEY"
	testKey    = "sk-test-0123456789secret"
)

// openaiBundle is a fake Chat Completions server and a provider pointed at it.
type openaiBundle struct {
	provider *OpenAI
	srv      *httptest.Server
	hits     atomic.Int32

	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
}

// lastRequest returns the body (decoded) and headers of the last request.
func (b *openaiBundle) lastRequest(t *testing.T) (map[string]any, http.Header) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.NotEmpty(t, b.bodies)
	var body map[string]any
	require.NoError(t, json.Unmarshal(b.bodies[len(b.bodies)-1], &body))
	return body, b.headers[len(b.headers)-1]
}

// setupOpenAI starts a server answering with handler and a provider for it;
// mutate adjusts the model config before the provider is built.
func setupOpenAI(t *testing.T, handler http.HandlerFunc, mutate func(*Config)) *openaiBundle {
	t.Helper()
	b := &openaiBundle{}
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
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
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
		Provider:  ProviderOpenAI,
		Model:     "gpt-test",
		BaseURL:   b.srv.URL + "/v1",
		APIKeyEnv: testKeyEnv,
		MaxTokens: 256,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := NewOpenAI(cfg, Options{
		LookupEnvFunc: func(name string) (string, bool) {
			if name == testKeyEnv {
				return testKey, true
			}
			return "", false
		},
		HTTPClient: client,
	})
	require.NoError(t, err)
	b.provider = p
	return b
}

// sse writes a 200 chat-completions stream: each chunk as `data: chunk`,
// then `data: [DONE]`.
func sse(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, c := range chunks {
		_, _ = io.WriteString(w, "data: "+c+"\n\n")
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

// reply writes a JSON body with status.
func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func TestOpenAITextAnswer(t *testing.T) {
	t.Parallel()

	b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		sse(w,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":"gr"}}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"reasoning_content":"eet"}}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":"Hello"}}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"content":" there."}}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`,
		)
	}, nil)

	resp, err := b.provider.Complete(t.Context(), &Request{
		Messages: []Message{TextMessage(RoleUser, "Hi")},
		Step:     1, Attempt: 1,
	})
	require.NoError(t, err)
	require.Equal(t, &Response{
		Text:          "Hello there.",
		Thinking:      "greet",
		StopReason:    "end_turn",
		Usage:         Usage{InputTokens: 10, OutputTokens: 3},
		UsageReported: true,
		Model:         "gpt-test",
	}, resp)

	body, header := b.lastRequest(t)
	require.Equal(t, "Bearer "+testKey, header.Get("Authorization"))
	require.Equal(t, "gpt-test", body["model"])
	require.InDelta(t, 256, body["max_tokens"], 0)
	require.NotContains(t, body, "temperature")
	require.NotContains(t, body, "tools")
	require.Equal(t, []any{map[string]any{"role": "user", "content": "Hi"}}, body["messages"])
	require.Equal(t, true, body["stream"])
	require.Equal(t, map[string]any{"include_usage": true}, body["stream_options"])
	require.Equal(t, int32(1), b.hits.Load())
}

// TestOpenAICachedTokens: cached prompt tokens are cache reads, not input
// tokens as well, in a stream's usage chunk and in a plain JSON reply.
func TestOpenAICachedTokens(t *testing.T) {
	t.Parallel()
	usage := `"usage":{"prompt_tokens":1000,"completion_tokens":20,"total_tokens":1020,"prompt_tokens_details":{"cached_tokens":800}}`
	for _, tc := range []struct {
		name  string
		reply func(http.ResponseWriter)
	}{
		{"stream", func(w http.ResponseWriter) {
			sse(w,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],`+usage+`}`,
			)
		}},
		{"plain JSON", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],`+usage+`}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) { tc.reply(w) }, nil)
			resp, err := b.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}, Step: 1, Attempt: 1})
			require.NoError(t, err)
			require.Equal(t, Usage{InputTokens: 200, OutputTokens: 20, CacheReadInputTokens: 800}, resp.Usage)
		})
	}
}

func TestOpenAIToolCallAnswer(t *testing.T) {
	t.Parallel()

	b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		// Tool-call deltas split across chunks, as OpenAI streams them.
		sse(w,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"overdue_balance","arguments":""}}]}}]}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"account\": "}}]}}]}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"A-2\"}"}}]}}]}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"echo","arguments":"{\"text\": \"not "}}]}}]}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"json\"}"}}]}}]}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"call_c","type":"function","function":{"name":"noop","arguments":""}}]}}]}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52}}`,
		)
	}, func(c *Config) {
		zero := 0.0
		c.Temperature = &zero
	})

	req := &Request{
		System: "You analyse invoices.",
		Messages: []Message{
			TextMessage(RoleUser, "What is overdue?"),
			{Role: RoleAssistant, Content: []ContentBlock{
				{Type: BlockText, Text: "Checking."},
				{Type: BlockToolUse, ID: "call_1", Name: "overdue_balance", Input: json.RawMessage(`{"account": "A-1"}`)},
				{Type: BlockToolUse, ID: "call_2", Name: "lookup"},
			}},
			{Role: RoleUser, Content: []ContentBlock{
				{Type: BlockToolResult, ToolUseID: "call_1", Content: json.RawMessage(`"120.50 EUR"`)},
				{Type: BlockToolResult, ToolUseID: "call_2", Content: json.RawMessage(`{"rows": [1, 2]}`), IsError: true},
				{Type: BlockText, Text: "Also check A-2."},
			}},
		},
		Tools: []ToolSpec{{
			Name:        "overdue_balance",
			Description: "Calculate the unpaid balance of overdue invoices.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"account":{"type":"string","maxLength":12}},"required":["account"]}`),
		}, {
			Name: "noop",
		}},
		Step: 2, Attempt: 1,
	}
	resp, err := b.provider.Complete(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, &Response{
		ToolCalls: []ToolCall{
			{ID: "call_a", Name: "overdue_balance", Input: json.RawMessage(`{"account":"A-2"}`)},
			{ID: "call_b", Name: "echo", Input: json.RawMessage(`{"text":"not json"}`)},
			{ID: "call_c", Name: "noop", Input: json.RawMessage(`{}`)},
		},
		StopReason:    "tool_use",
		Usage:         Usage{InputTokens: 40, OutputTokens: 12},
		UsageReported: true,
		Model:         "gpt-test",
	}, resp)

	body, header := b.lastRequest(t)
	require.Equal(t, "Bearer "+testKey, header.Get("Authorization"))
	require.Equal(t, "gpt-test", body["model"])
	require.InDelta(t, 256, body["max_tokens"], 0)
	require.Contains(t, body, "temperature")
	require.InDelta(t, 0, body["temperature"], 0)

	wantMessages := `[
		{"role": "system", "content": "You analyse invoices."},
		{"role": "user", "content": "What is overdue?"},
		{"role": "assistant", "content": "Checking.", "tool_calls": [
			{"id": "call_1", "type": "function", "function": {"name": "overdue_balance", "arguments": "{\"account\":\"A-1\"}"}},
			{"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
		]},
		{"role": "tool", "tool_call_id": "call_1", "content": "120.50 EUR"},
		{"role": "tool", "tool_call_id": "call_2", "content": "{\"rows\":[1,2]}"},
		{"role": "user", "content": "Also check A-2."}
	]`
	gotMessages, err := json.Marshal(body["messages"])
	require.NoError(t, err)
	require.JSONEq(t, wantMessages, string(gotMessages))

	wantTools := `[
		{"type": "function", "function": {
			"name": "overdue_balance",
			"description": "Calculate the unpaid balance of overdue invoices.",
			"parameters": {"type":"object","properties":{"account":{"type":"string","maxLength":12}},"required":["account"]}
		}},
		{"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}
	]`
	gotTools, err := json.Marshal(body["tools"])
	require.NoError(t, err)
	require.JSONEq(t, wantTools, string(gotTools))
	require.Equal(t, int32(1), b.hits.Load())
}

func TestOpenAIRequestOverrides(t *testing.T) {
	t.Parallel()

	b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		sse(w, `{"choices":[{"index":0,"delta":{"role":"assistant","content":"cut"},"finish_reason":"length"}]}`)
	}, func(c *Config) { c.APIKeyEnv = "" })

	temp := 0.7
	resp, err := b.provider.Complete(t.Context(), &Request{
		Model: "other-model", MaxTokens: 99, Temperature: &temp,
		Messages: []Message{TextMessage(RoleUser, "Hi")},
	})
	require.NoError(t, err)
	require.Equal(t, "max_tokens", resp.StopReason)
	require.Equal(t, "cut", resp.Text)

	body, header := b.lastRequest(t)
	require.Empty(t, header.Get("Authorization"), "no api_key_env, no key")
	require.Equal(t, "other-model", body["model"])
	require.InDelta(t, 99, body["max_tokens"], 0)
	require.InDelta(t, 0.7, body["temperature"], 1e-9)
}

// TestOpenAIIgnoresAmbientEnv checks that the SDK does not pick up
// OPENAI_API_KEY or OPENAI_BASE_URL from the process environment (STYLE G18).
// Not parallel: it sets environment variables.
func TestOpenAIIgnoresAmbientEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-ambient")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/ambient")

	b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		sse(w, `{"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}, func(c *Config) { c.APIKeyEnv = "" })

	_, err := b.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
	require.NoError(t, err)
	_, header := b.lastRequest(t)
	require.Empty(t, header.Get("Authorization"))
}

func TestOpenAIStatusErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name           string
		status         int
		header         map[string]string
		body           string
		wantType       string
		wantRetryable  bool
		wantRetryAfter float64
		wantMessage    string
	}{
		{
			name: "429 with retry-after", status: 429, header: map[string]string{"Retry-After": "7"},
			body:     `{"error":{"message":"Rate limit reached for gpt-test","type":"requests","code":"rate_limit_exceeded"}}`,
			wantType: "RateLimitError", wantRetryable: true, wantRetryAfter: 7,
			wantMessage: "model server answered HTTP 429 Too Many Requests (rate_limit_exceeded)",
		},
		{
			name: "429 with retry-after-ms", status: 429, header: map[string]string{"Retry-After-Ms": "1500", "Retry-After": "9"},
			body:     `{"error":{"message":"slow down"}}`,
			wantType: "RateLimitError", wantRetryable: true, wantRetryAfter: 1.5,
			wantMessage: "model server answered HTTP 429 Too Many Requests",
		},
		{
			name: "429 without retry-after", status: 429, body: `{"error":{"message":"slow down"}}`,
			wantType: "RateLimitError", wantRetryable: true,
		},
		{
			name: "500", status: 500, body: `{"error":{"message":"The server had an error","type":"server_error"}}`,
			wantType: "APIStatusError", wantRetryable: true,
			wantMessage: "model server answered HTTP 500 Internal Server Error (server_error)",
		},
		{
			name: "502 html from a proxy", status: 502, body: `<html><body>Bad Gateway</body></html>`,
			wantType: "APIStatusError", wantRetryable: true,
			wantMessage: "model server answered HTTP 502 Bad Gateway",
		},
		{
			name: "503 with retry-after", status: 503, header: map[string]string{"Retry-After": "2"},
			body: `{"error":{"message":"unavailable"}}`, wantType: "APIStatusError", wantRetryable: true, wantRetryAfter: 2,
		},
		{
			name: "529 overloaded", status: 529, body: `{"error":{"message":"Overloaded","type":"overloaded_error"}}`,
			wantType: "APIStatusError", wantRetryable: true,
		},
		{
			name: "408", status: 408, body: `{"error":{"message":"request timeout"}}`,
			wantType: "TimeoutError", wantRetryable: true,
		},
		{
			name: "409", status: 409, body: `{"error":{"message":"conflict"}}`,
			wantType: "APIStatusError", wantRetryable: true,
		},
		{
			name: "400", status: 400,
			body:     `{"error":{"message":"Invalid value for 'messages[1].content': You analyse invoices.","type":"invalid_request_error","param":"messages"}}`,
			wantType: "BadRequestError", wantRetryable: false,
			wantMessage: "model server answered HTTP 400 Bad Request (invalid_request_error)",
		},
		{
			name: "400 with overloaded marker", status: 400, body: `{"error":{"message":"Engine is currently overloaded, please retry"}}`,
			wantType: "APIStatusError", wantRetryable: true,
			wantMessage: "model server answered HTTP 400 Bad Request: provider reports overload",
		},
		{
			name: "400 with rate limit marker", status: 400, body: `{"error":{"message":"Rate limit exceeded for tokens"}}`,
			wantType: "RateLimitError", wantRetryable: true,
		},
		{
			name: "422 with timed out marker", status: 422, body: `{"error":{"message":"upstream request timed out"}}`,
			wantType: "TimeoutError", wantRetryable: true,
		},
		{
			name: "401 echoing the key", status: 401,
			body:     `{"error":{"message":"Incorrect API key provided: ` + testKey + `. Rate limit docs at ...","type":"invalid_request_error","code":"invalid_api_key"}}`,
			wantType: "AuthenticationError", wantRetryable: false,
			wantMessage: "model server answered HTTP 401 Unauthorized (invalid_api_key)",
		},
		{
			name: "403", status: 403, body: `{"error":{"message":"forbidden"}}`,
			wantType: "AuthenticationError", wantRetryable: false,
		},
		{
			name: "404 unknown model", status: 404, body: `{"error":{"message":"The model does not exist","code":"model_not_found"}}`,
			wantType: "BadRequestError", wantRetryable: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				if tt.body != "" && tt.body[0] == '<' {
					w.Header().Set("Content-Type", "text/html")
					w.WriteHeader(tt.status)
					_, _ = io.WriteString(w, tt.body)
					return
				}
				reply(w, tt.status, tt.body)
			}, nil)

			resp, err := b.provider.Complete(t.Context(), &Request{
				System:   "You analyse invoices.",
				Messages: []Message{TextMessage(RoleUser, "Hi")},
			})
			require.Nil(t, resp)
			var f *Failure
			require.ErrorAs(t, err, &f)
			require.Equal(t, tt.wantType, f.Type)
			require.Equal(t, tt.wantRetryable, f.Retryable)
			require.Equal(t, tt.wantRetryable, IsTransient(err))
			require.Equal(t, tt.status, f.Status)
			require.InDelta(t, tt.wantRetryAfter, f.RetryAfterSeconds, 1e-9)
			if tt.wantMessage != "" {
				require.Equal(t, tt.wantMessage, f.Message)
			}
			// Client-safe: no key, no payload, no provider free text.
			require.NotContains(t, err.Error(), testKey)
			require.NotContains(t, err.Error(), "You analyse invoices")
			require.Equal(t, int32(1), b.hits.Load(), "the SDK must not retry")
		})
	}
}

func TestOpenAIInvalidReply(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name        string
		contentType string
		body        string
		wantMessage string
	}{
		{name: "no choices", contentType: "text/event-stream", body: "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\ndata: [DONE]\n\n", wantMessage: "model reply has no choices"},
		{name: "not json", contentType: "text/plain", body: `hello`, wantMessage: "model server reply (HTTP 200) is not a valid chat completion stream"},
		{name: "no choices in a plain reply", contentType: "application/json", body: `{"choices":[]}`, wantMessage: "model reply has no choices"},
		{name: "broken json", contentType: "application/json", body: `{"choices":[`, wantMessage: "model server reply (HTTP 200) is not a valid chat completion"},
		{name: "malformed sse data", contentType: "text/event-stream", body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[\n\ndata: [DONE]\n\n", wantMessage: "model server reply (HTTP 200) is not a valid chat completion stream"},
		{name: "choice index out of range", contentType: "text/event-stream", body: "data: {\"choices\":[{\"index\":500,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", wantMessage: "model stream sent a chunk that does not continue the answer"},
		{name: "tool call index out of range", contentType: "text/event-stream", body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":100000,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n", wantMessage: "model stream sent a chunk that does not continue the answer"},
		{name: "chunk data not an object", contentType: "text/event-stream", body: "data: 42\n\ndata: [DONE]\n\n", wantMessage: "model server reply (HTTP 200) is not a valid chat completion stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				_, _ = io.WriteString(w, tt.body)
			}, nil)
			_, err := b.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
			var f *Failure
			require.ErrorAs(t, err, &f)
			require.Equal(t, "APIResponseValidationError", f.Type)
			require.False(t, f.Retryable)
			require.Equal(t, tt.wantMessage, f.Message)
		})
	}
}

func TestOpenAIConnectionRefused(t *testing.T) {
	t.Parallel()

	b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, `{}`)
	}, nil)
	b.srv.Close() // nothing listens on the port any more

	_, err := b.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, "ConnectionError", f.Type)
	require.True(t, f.Retryable)
	require.Equal(t, "connection to the model server failed: connection refused", f.Message)
	require.NotContains(t, err.Error(), testKey)
	require.Equal(t, int32(0), b.hits.Load())
}

func TestOpenAIDroppedConnection(t *testing.T) {
	t.Parallel()

	b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}, nil)

	_, err := b.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, "ConnectionError", f.Type)
	require.True(t, f.Retryable)
	require.Equal(t, int32(1), b.hits.Load(), "the SDK must not retry")
}

func TestOpenAIBodyCutOff(t *testing.T) {
	t.Parallel()

	b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"choices":[`)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}, nil)

	_, err := b.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, "ConnectionError", f.Type)
	require.True(t, f.Retryable)
	require.Equal(t, int32(1), b.hits.Load(), "the SDK must not retry")
}

// TestOpenAIReplyTooLarge: a 2xx reply over MaxReplyBytes fails the call
// without being read further; an error reply that large is still judged
// by its status.
func TestOpenAIReplyTooLarge(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		status    int
		wantType  string
		retryable bool
	}{
		{http.StatusOK, "APIResponseValidationError", false},
		{http.StatusServiceUnavailable, "APIStatusError", true},
	} {
		var sent atomic.Int64
		b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			if tc.status != http.StatusOK {
				w.Header().Set("Content-Type", "application/json")
			}
			w.WriteHeader(tc.status)
			chunk := `data: {"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("a", 64<<10) + `"}}]}` + "\n\n"
			for sent.Load() < 2*MaxReplyBytes {
				n, err := io.WriteString(w, chunk)
				sent.Add(int64(n))
				if err != nil {
					return // the client stopped reading
				}
			}
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		}, nil)

		_, err := b.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
		var f *Failure
		require.ErrorAs(t, err, &f, "HTTP %d", tc.status)
		require.Equal(t, tc.wantType, f.Type, "HTTP %d", tc.status)
		require.Equal(t, tc.retryable, f.Retryable, "HTTP %d", tc.status)
		if tc.status == http.StatusOK {
			require.Equal(t, "model server reply exceeds 33554432 bytes", f.Message)
			require.Less(t, sent.Load(), int64(2*MaxReplyBytes), "the reply was read to its end")
		}
	}
}

// slowHandler blocks until the client goes away (or a safety timeout) and
// signals started when the request arrived.
func slowHandler(started chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if started != nil {
			started <- struct{}{}
		}
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		reply(w, http.StatusOK, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"late"}}]}`)
	}
}

func TestOpenAITimeout(t *testing.T) {
	t.Parallel()

	// Long enough for the request to reach the server on a loaded machine.
	b := setupOpenAI(t, slowHandler(nil), func(c *Config) { c.TimeoutSeconds = 0.5 })

	start := time.Now()
	_, err := b.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
	require.Less(t, time.Since(start), 5*time.Second)
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, "TimeoutError", f.Type)
	require.True(t, f.Retryable)
	require.Equal(t, "no model reply within the call timeout of 500ms", f.Message)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, int32(1), b.hits.Load(), "the SDK must not retry")
}

func TestOpenAIParentCancel(t *testing.T) {
	t.Parallel()

	started := make(chan struct{}, 1)
	b := setupOpenAI(t, slowHandler(started), nil)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		<-started
		cancel()
	}()
	_, err := b.provider.Complete(ctx, &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
	require.ErrorIs(t, err, context.Canceled)
	var f *Failure
	require.False(t, errors.As(err, &f), "cancellation is not a failure to retry")
	require.Equal(t, int32(1), b.hits.Load())
}

func TestOpenAIParentCancelWithCause(t *testing.T) {
	t.Parallel()

	errStop := errors.New("worker stopping")
	started := make(chan struct{}, 1)
	b := setupOpenAI(t, slowHandler(started), nil)

	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	go func() {
		<-started
		cancel(errStop)
	}()
	_, err := b.provider.Complete(ctx, &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errStop)
}

func TestOpenAIAlreadyCancelled(t *testing.T) {
	t.Parallel()

	b := setupOpenAI(t, slowHandler(nil), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.provider.Complete(ctx, &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, int32(0), b.hits.Load())
}

func TestOpenAIInvalidRequest(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name        string
		req         *Request
		wantMessage string
	}{
		{name: "nil request", req: nil, wantMessage: "nil model request"},
		{
			name:        "unknown role",
			req:         &Request{Messages: []Message{TextMessage("system", "x")}},
			wantMessage: `message 0: unsupported role "system"`,
		},
		{
			name: "tool_use in a user message",
			req: &Request{Messages: []Message{{Role: RoleUser, Content: []ContentBlock{
				{Type: BlockToolUse, ID: "c", Name: "n"},
			}}}},
			wantMessage: `message 0 block 0: block type "tool_use" is not allowed in a user message`,
		},
		{
			name: "tool_result in an assistant message",
			req: &Request{Messages: []Message{{Role: RoleAssistant, Content: []ContentBlock{
				{Type: BlockText, Text: "x"}, {Type: BlockToolResult, ToolUseID: "c"},
			}}}},
			wantMessage: `message 0 block 1: block type "tool_result" is not allowed in an assistant message`,
		},
		{
			name: "schema not an object",
			req: &Request{
				Messages: []Message{TextMessage(RoleUser, "x")},
				Tools:    []ToolSpec{{Name: "t", InputSchema: json.RawMessage(`[1]`)}},
			},
			wantMessage: `tool 0 ("t"): input_schema: not a JSON object`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupOpenAI(t, slowHandler(nil), nil)
			_, err := b.provider.Complete(t.Context(), tt.req)
			var f *Failure
			require.ErrorAs(t, err, &f)
			require.Equal(t, "InvalidRequestError", f.Type)
			require.False(t, f.Retryable)
			require.Contains(t, f.Message, tt.wantMessage)
			require.Equal(t, int32(0), b.hits.Load())
		})
	}
}

func TestParseArguments(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		args string
		want string
	}{
		{name: "object kept and compacted", args: "{ \"a\" : 1 }", want: `{"a":1}`},
		{name: "empty", args: "", want: `{}`},
		{name: "whitespace", args: "  \n", want: `{}`},
		{name: "null", args: "null", want: `{}`},
		// want "": refused (the attempt fails with ToolArgumentsError).
		{name: "invalid json", args: `{"a":`},
		{name: "array", args: `[1,2]`},
		{name: "string", args: `"x"`},
		{name: "object not UTF-8", args: "{\"a\":\"x\xffy\"}"},
		{name: "repeated key", args: `{"a":1,"a":2}`},
		{name: "number beyond float range", args: `{"a":1e999}`},
		{name: "lone surrogate", args: `{"a":"\ud800"}`},
		{name: "object beyond ASCII kept", args: `{"a":"grüße"}`, want: `{"a":"grüße"}`},
		{name: "object at the depth limit", args: deepArgs(journal.MaxInputDepth), want: deepArgs(journal.MaxInputDepth)},
		{name: "object nested too deep", args: deepArgs(journal.MaxInputDepth + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseArguments(tt.args)
			require.Equal(t, tt.want != "", ok)
			require.Equal(t, tt.want, string(got))
		})
	}
}

// deepArgs is a tool-arguments object nesting levels objects deep.
func deepArgs(levels int) string {
	return strings.Repeat(`{"a":`, levels-1) + `{}` + strings.Repeat(`}`, levels-1)
}

func TestStopReason(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		finish    string
		toolCalls bool
		want      string
	}{
		{name: "stop", finish: "stop", want: "end_turn"},
		{name: "stop with tool calls", finish: "stop", toolCalls: true, want: "tool_use"},
		{name: "tool_calls", finish: "tool_calls", toolCalls: true, want: "tool_use"},
		{name: "function_call", finish: "function_call", toolCalls: true, want: "tool_use"},
		{name: "length", finish: "length", want: "max_tokens"},
		{name: "content_filter", finish: "content_filter", want: "refusal"},
		{name: "unknown verbatim", finish: "insufficient_system_resource", want: "insufficient_system_resource"},
		{name: "empty", finish: "", want: "end_turn"},
		{name: "empty with tool calls", finish: "", toolCalls: true, want: "tool_use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, stopReason(tt.finish, tt.toolCalls))
		})
	}
}

func TestToolResultText(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		content string
		want    string
	}{
		{name: "string", content: `"42 EUR"`, want: "42 EUR"},
		{name: "string with escapes", content: `"a\nb \"q\""`, want: "a\nb \"q\""},
		{name: "object compacted", content: `{ "a": [1, 2] }`, want: `{"a":[1,2]}`},
		{name: "number", content: `3.5`, want: `3.5`},
		{name: "null", content: `null`, want: ""},
		{name: "absent", content: ``, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, ToolResultText(json.RawMessage(tt.content)))
		})
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   float64
	}{
		{name: "none", header: http.Header{}, want: 0},
		{name: "nil", header: nil, want: 0},
		{name: "seconds", header: http.Header{"Retry-After": {"12"}}, want: 12},
		{name: "fractional seconds", header: http.Header{"Retry-After": {"0.25"}}, want: 0.25},
		{name: "milliseconds preferred", header: http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"12"}}, want: 0.25},
		{name: "bad milliseconds fall back", header: http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"3"}}, want: 3},
		{name: "http date", header: http.Header{"Retry-After": {now.Add(30 * time.Second).Format(http.TimeFormat)}}, want: 30},
		{name: "http date in the past", header: http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, want: 0},
		{name: "negative", header: http.Header{"Retry-After": {"-4"}}, want: 0},
		{name: "garbage", header: http.Header{"Retry-After": {"soon"}}, want: 0},
		{name: "infinite", header: http.Header{"Retry-After": {"Inf"}}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.InDelta(t, tt.want, retryAfterSeconds(tt.header, now), 1e-9)
		})
	}
}
