package model

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Switching provider mid-conversation (issue 20, item 4: a fallback chain
// may answer one step with Anthropic and the next with OpenAI, or the
// other way round): each provider takes the history the other produced.

// TestOpenAITakesAnthropicHistory: an assistant turn Anthropic answered
// with signed thinking, redacted thinking and an opaque block goes to
// OpenAI with those blocks dropped and its text and tool call kept, in a
// request the provider accepts (before, it refused the request).
func TestOpenAITakesAnthropicHistory(t *testing.T) {
	t.Parallel()
	ant := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) { stream(w, thinkingStream) },
		func(c *Config) { c.Thinking = &Thinking{BudgetTokens: 1024} })
	resp, err := ant.provider.Complete(t.Context(), hi())
	require.NoError(t, err)
	require.Len(t, resp.Content, 5, "the answer holds native blocks")

	// As the journal and the run state keep them.
	recorded, err := json.Marshal(resp.Content)
	require.NoError(t, err)
	var history []ContentBlock
	require.NoError(t, json.Unmarshal(recorded, &history))

	oai := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		sse(w,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Sunny in Paris."}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		)
	}, nil)
	out, err := oai.provider.Complete(t.Context(), &Request{Messages: []Message{
		TextMessage(RoleUser, "Hi"),
		{Role: RoleAssistant, Content: history},
		{Role: RoleUser, Content: []ContentBlock{{Type: BlockToolResult, ToolUseID: "toolu_01", Content: json.RawMessage(`"sunny"`)}}},
		// A turn of native blocks only (no text, no call): sent empty.
		{Role: RoleAssistant, Content: history[:3]},
		TextMessage(RoleUser, "And tomorrow?"),
	}, Step: 2, Attempt: 1})
	require.NoError(t, err)
	require.Equal(t, "Sunny in Paris.", out.Text)

	body, _ := oai.lastRequest(t)
	msgs, err := json.Marshal(body["messages"])
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"role":"user","content":"Hi"},
		{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"toolu_01","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","content":"sunny","tool_call_id":"toolu_01"},
		{"role":"assistant","content":""},
		{"role":"user","content":"And tomorrow?"}
	]`, string(msgs))
	for _, native := range []string{"I should look", "EqQBCgIYAhIM", "EmwKAhgBEgy3", "srvtoolu_01", "thinking"} {
		require.NotContains(t, string(msgs), native, "no native block reaches OpenAI")
	}
}

// TestAnthropicTakesOpenAIHistory: an assistant turn OpenAI answered
// (text and tool calls, no native block) goes to Anthropic as text and
// tool_use blocks.
func TestAnthropicTakesOpenAIHistory(t *testing.T) {
	t.Parallel()
	oai := setupOpenAI(t, func(w http.ResponseWriter, _ *http.Request) {
		sse(w,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Checking.","reasoning_content":"look it up"}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		)
	}, nil)
	resp, err := oai.provider.Complete(t.Context(), hi())
	require.NoError(t, err)
	require.Nil(t, resp.Content, "an OpenAI answer has no native blocks")
	require.Equal(t, "look it up", resp.Thinking)

	// The assistant turn the runtime appends for such an answer.
	turn := Message{Role: RoleAssistant, Content: []ContentBlock{{Type: BlockText, Text: resp.Text}}}
	for _, c := range resp.ToolCalls {
		turn.Content = append(turn.Content, ContentBlock{Type: BlockToolUse, ID: c.ID, Name: c.Name, Input: c.Input})
	}

	ant := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) { stream(w, textStream("Cold.", "end_turn")) }, nil)
	out, err := ant.provider.Complete(t.Context(), &Request{Messages: []Message{
		TextMessage(RoleUser, "Hi"),
		turn,
		{Role: RoleUser, Content: []ContentBlock{{Type: BlockToolResult, ToolUseID: "call_1", Content: json.RawMessage(`"-5C"`)}}},
	}, Step: 2, Attempt: 1})
	require.NoError(t, err)
	require.Equal(t, "Cold.", out.Text)

	body, _ := ant.request(t, 0)
	msgs, err := json.Marshal(body["messages"])
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"role":"user","content":[{"type":"text","text":"Hi"}]},
		{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Oslo"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"-5C"}],"is_error":false}]}
	]`, string(msgs))
}
