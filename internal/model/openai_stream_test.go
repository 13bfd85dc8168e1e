package model

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chunk is a chat.completion.chunk whose first choice has delta (a JSON
// object) and, when set, finish_reason.
func chunk(delta, finish string) string {
	s := `{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":` + delta
	if finish != "" {
		s += `,"finish_reason":"` + finish + `"`
	}
	return s + `}]}`
}

func TestOpenAICompleteStreamDeltas(t *testing.T) {
	t.Parallel()

	b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		sse(w,
			chunk(`{"role":"assistant","content":""}`, ""),
			chunk(`{"reasoning_content":"Let me "}`, ""),
			chunk(`{"reasoning_content":"think."}`, ""),
			chunk(`{"content":"The "}`, ""),
			chunk(`{"content":"answer "}`, ""),
			chunk(`{"content":"is 42."}`, ""),
			chunk(`{}`, "stop"),
			`{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`,
		)
	}, nil)

	var got []Delta
	resp, err := b.provider.CompleteStream(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}},
		func(d Delta) { got = append(got, d) })
	require.NoError(t, err)
	require.Equal(t, []Delta{
		{DeltaThinking, "Let me "}, {DeltaThinking, "think."},
		{DeltaText, "The "}, {DeltaText, "answer "}, {DeltaText, "is 42."},
	}, got)
	var text, thinking strings.Builder
	for _, d := range got {
		if d.Kind == DeltaText {
			text.WriteString(d.Text)
		} else {
			thinking.WriteString(d.Text)
		}
	}
	require.Equal(t, &Response{
		Text: "The answer is 42.", Thinking: "Let me think.", StopReason: "end_turn",
		Usage:         Usage{InputTokens: 7, OutputTokens: 5},
		UsageReported: true,
		Model:         "gpt-test",
	}, resp)
	require.Equal(t, resp.Text, text.String())
	require.Equal(t, resp.Thinking, thinking.String())
}

// cutAfter writes the chunks as a stream, flushes them and then closes the
// connection without ending the chunked body.
func cutAfter(chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, c := range chunks {
			_, _ = io.WriteString(w, "data: "+c+"\n\n")
		}
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		conn, _, err := rc.Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
}

// TestOpenAIStreamBroken: a stream that breaks mid-answer is a transient
// failure, and the deltas before the break have reached the hook.
func TestOpenAIStreamBroken(t *testing.T) {
	t.Parallel()

	partial := []string{chunk(`{"role":"assistant","content":"Hel"}`, ""), chunk(`{"content":"lo"}`, "")}
	tests := []struct {
		name        string
		handler     http.HandlerFunc
		wantType    string
		wantMessage string
	}{
		{
			name: "connection cut", handler: cutAfter(partial...),
			wantType: "ConnectionError", wantMessage: "connection to the model server failed: connection closed before the reply was complete",
		},
		{
			name: "clean end without finish_reason or [DONE]",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for _, c := range partial {
					_, _ = io.WriteString(w, "data: "+c+"\n\n")
				}
			},
			wantType: "ConnectionError", wantMessage: "model stream ended before the answer was complete",
		},
		{
			name: "[DONE] without finish_reason", handler: func(w http.ResponseWriter, _ *http.Request) { sse(w, partial...) },
			wantType: "ConnectionError", wantMessage: "model stream ended before the answer was complete",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupOpenAI(t, tt.handler, nil)
			var text strings.Builder
			resp, err := b.provider.CompleteStream(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}},
				func(d Delta) { text.WriteString(d.Text) })
			require.Nil(t, resp)
			var f *Failure
			require.ErrorAs(t, err, &f)
			require.Equal(t, tt.wantType, f.Type)
			require.True(t, f.Retryable)
			require.True(t, IsTransient(err))
			require.Equal(t, tt.wantMessage, f.Message)
			require.Equal(t, "Hello", text.String(), "the partial deltas were delivered")
			require.Equal(t, int32(1), b.hits.Load(), "the SDK must not retry")
		})
	}
}

// TestOpenAIStreamErrorObject: an error object inside a 200 stream is
// classified by its code and type, never by its message.
func TestOpenAIStreamErrorObject(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name          string
		errorObject   string
		wantType      string
		wantRetryable bool
		wantMessage   string
	}{
		{
			name: "rate limit code", errorObject: `{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}`,
			wantType: "RateLimitError", wantRetryable: true, wantMessage: "model stream sent an error (rate_limit_exceeded)",
		},
		{
			name: "server error type", errorObject: `{"message":"The server had an error","type":"server_error","code":null}`,
			wantType: "APIStatusError", wantRetryable: true, wantMessage: "model stream sent an error (server_error)",
		},
		{
			name: "overloaded type", errorObject: `{"message":"Overloaded","type":"overloaded_error"}`,
			wantType: "APIStatusError", wantRetryable: true,
		},
		{
			name: "numeric code 429", errorObject: `{"message":"too many","code":429}`,
			wantType: "RateLimitError", wantRetryable: true, wantMessage: "model stream sent an error (429)",
		},
		{
			name: "string code 503", errorObject: `{"message":"unavailable","code":"503"}`,
			wantType: "APIStatusError", wantRetryable: true,
		},
		{
			name: "numeric code 400", errorObject: `{"message":"bad","code":400}`,
			wantType: "BadRequestError", wantRetryable: false,
		},
		{
			name: "timeout type", errorObject: `{"message":"x","type":"timeout"}`,
			wantType: "TimeoutError", wantRetryable: true,
		},
		{
			name: "retry words in the text only", errorObject: `{"message":"Rate limit reached; overloaded; timed out ` + testKey + `","type":"invalid_request_error"}`,
			wantType: "Error", wantRetryable: false, wantMessage: "model stream sent an error (invalid_request_error)",
		},
		{
			name: "error is a string", errorObject: `"something broke"`,
			wantType: "Error", wantRetryable: false, wantMessage: "model stream sent an error",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
				sse(w, chunk(`{"role":"assistant","content":"Hel"}`, ""), `{"error":`+tt.errorObject+`}`)
			}, nil)
			resp, err := b.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
			require.Nil(t, resp)
			var f *Failure
			require.ErrorAs(t, err, &f)
			require.Equal(t, tt.wantType, f.Type)
			require.Equal(t, tt.wantRetryable, f.Retryable)
			require.Equal(t, tt.wantRetryable, IsTransient(err))
			require.Zero(t, f.Status, "the HTTP status was 200")
			if tt.wantMessage != "" {
				require.Equal(t, tt.wantMessage, f.Message)
			}
			require.NotContains(t, err.Error(), testKey)
			require.NotContains(t, err.Error(), "Rate limit reached")
		})
	}
}

// TestOpenAIStreamStalls: a stream that stops sending mid-answer fails at
// the per-call timeout.
func TestOpenAIStreamStalls(t *testing.T) {
	t.Parallel()

	b := setupOpenAI(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: "+chunk(`{"role":"assistant","content":"Hel"}`, "")+"\n\n")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}, func(c *Config) { c.TimeoutSeconds = 0.5 })

	start := time.Now()
	_, err := b.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
	require.Less(t, time.Since(start), 5*time.Second)
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, "TimeoutError", f.Type)
	require.True(t, f.Retryable)
}

// TestOpenAIPlainReply: a server that ignores `stream: true` and answers one
// chat.completion JSON object is understood all the same (no deltas reach
// the hook); a plain reply over MaxReplyBytes still fails the call.
func TestOpenAIPlainReply(t *testing.T) {
	t.Parallel()

	b := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, `{
			"id": "chatcmpl-p", "object": "chat.completion", "created": 1, "model": "gpt-test",
			"choices": [{"index": 0, "finish_reason": "tool_calls",
				"message": {"role": "assistant", "content": "Checking.", "reasoning_content": "look it up",
					"tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": "{\"k\": 1}"}}]}}],
			"usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
		}`)
	}, nil)
	calls := 0
	resp, err := b.provider.CompleteStream(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}},
		func(Delta) { calls++ })
	require.NoError(t, err)
	require.Equal(t, &Response{
		Text: "Checking.", Thinking: "look it up", StopReason: "tool_use",
		ToolCalls:     []ToolCall{{ID: "call_a", Name: "lookup", Input: []byte(`{"k":1}`)}},
		Usage:         Usage{InputTokens: 4, OutputTokens: 2},
		UsageReported: true,
		Model:         "gpt-test",
	}, resp)
	require.Zero(t, calls)

	big := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`)
		chunk := strings.Repeat("a", 64<<10)
		for range 2 * MaxReplyBytes / len(chunk) {
			if _, err := io.WriteString(w, chunk); err != nil {
				return // the client stopped reading
			}
		}
		_, _ = io.WriteString(w, `"}}]}`)
	}, nil)
	_, err = big.provider.Complete(t.Context(), &Request{Messages: []Message{TextMessage(RoleUser, "Hi")}})
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, "APIResponseValidationError", f.Type)
	require.Equal(t, "model server reply exceeds 33554432 bytes", f.Message)
}
