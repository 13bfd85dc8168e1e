package model

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAnthropicUsageReported: Response.UsageReported is set when
// message_start or message_delta carried usage, all-zero included, and
// unset when neither did.
func TestAnthropicUsageReported(t *testing.T) {
	t.Parallel()
	startNoUsage := sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null}}`)
	startZero := sseEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`)
	deltaNoUsage := sseEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null}}`)
	body := func(start, delta string) string {
		return start + evBlockStart(0, `{"type":"text","text":""}`) +
			evDelta(0, `{"type":"text_delta","text":"Hi."}`) + evBlockStop(0) + delta + evMessageStop
	}
	for _, tc := range []struct {
		name      string
		body      string
		want      bool
		wantUsage Usage
	}{
		{"start and delta", body(evMessageStart, evMessageDelta("end_turn", 7)), true,
			Usage{InputTokens: 25, OutputTokens: 7, CacheReadInputTokens: 3, CacheCreationInputTokens: 2}},
		// The SDK's Accumulate takes output_tokens from message_delta, 0
		// when it has no usage.
		{"start only", body(evMessageStart, deltaNoUsage), true,
			Usage{InputTokens: 25, CacheReadInputTokens: 3, CacheCreationInputTokens: 2}},
		{"delta only", body(startNoUsage, evMessageDelta("end_turn", 4)), true, Usage{OutputTokens: 4}},
		{"all zero", body(startZero, deltaNoUsage), true, Usage{}},
		{"none", body(startNoUsage, deltaNoUsage), false, Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) { stream(w, tc.body) }, nil)
			resp, err := b.provider.Complete(t.Context(), hi())
			require.NoError(t, err)
			require.Equal(t, "Hi.", resp.Text)
			require.Equal(t, tc.want, resp.UsageReported)
			require.Equal(t, tc.wantUsage, resp.Usage)
		})
	}
}

// TestOpenAIUsageReported: Response.UsageReported is set when a stream
// chunk (the last, with include_usage) or a plain chat.completion carried
// usage, all-zero included, and unset when none did.
func TestOpenAIUsageReported(t *testing.T) {
	t.Parallel()
	const (
		text   = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi."}}]}`
		finish = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
		usage  = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`
		zero   = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`
		nullU  = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`
		plain  = `{"id":"c","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hi."}}]`
	)
	for _, tc := range []struct {
		name      string
		handler   http.HandlerFunc
		want      bool
		wantUsage Usage
	}{
		{"stream with usage", func(w http.ResponseWriter, _ *http.Request) { sse(w, text, finish, usage) }, true, Usage{InputTokens: 9, OutputTokens: 2}},
		{"stream with zero usage", func(w http.ResponseWriter, _ *http.Request) { sse(w, text, finish, zero) }, true, Usage{}},
		{"stream without usage", func(w http.ResponseWriter, _ *http.Request) { sse(w, text, finish) }, false, Usage{}},
		{"stream with null usage", func(w http.ResponseWriter, _ *http.Request) { sse(w, text, nullU) }, false, Usage{}},
		{"plain with usage", func(w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusOK, plain+`,"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}`)
		}, true, Usage{InputTokens: 4, OutputTokens: 2}},
		{"plain without usage", func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, plain+`}`) }, false, Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupOpenAI(t, tc.handler, nil)
			resp, err := b.provider.Complete(t.Context(), hi())
			require.NoError(t, err)
			require.Equal(t, "Hi.", resp.Text)
			require.Equal(t, tc.want, resp.UsageReported)
			require.Equal(t, tc.wantUsage, resp.Usage)
		})
	}
}

// TestScriptedUsageReported: a scripted step reports usage exactly when it
// sets `usage:`, an all-zero one included.
func TestScriptedUsageReported(t *testing.T) {
	t.Parallel()
	p := NewScripted([]ScriptStep{
		{Text: "a", Usage: &Usage{InputTokens: 3}},
		{Text: "b", Usage: &Usage{}},
		{Text: "c"},
	})
	for step, want := range []bool{true, true, false} {
		resp, err := p.Complete(t.Context(), &Request{Step: step + 1, Attempt: 1})
		require.NoError(t, err)
		require.Equal(t, want, resp.UsageReported, "step %d", step+1)
	}
}
