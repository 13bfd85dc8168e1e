package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/tool"
)

// usageAgent is a scripted agent of two steps (a tool call, then an
// answer) with the given usage and fail_attempts per step.
func usageAgent(name string, usage [2]*model.Usage, failAttempts [2]int) *agent.Definition {
	return &agent.Definition{
		Name: name, Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "c1", Name: "count", Input: json.RawMessage(`{}`)}}, Usage: usage[0], FailAttempts: failAttempts[0]},
			{Text: "done", Usage: usage[1], FailAttempts: failAttempts[1]},
		}},
		Retry: &agent.RetryPolicy{Attempts: 3, BackoffSeconds: 0.01, MaxBackoffSeconds: 0.01},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"}}},
	}
}

// requireRunUsage checks the usage of a settled run where the API reads
// it: GET run (GetRun) and the run_result event.
func requireRunUsage(t *testing.T, tb *testBundle, runID string, want model.Usage, incomplete bool) {
	t.Helper()
	got, err := tb.rt.GetRun(context.Background(), runID)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusCompleted, got.Status, "%+v", got.Error)
	require.Equal(t, want, got.Usage)
	require.Equal(t, incomplete, got.UsageIncomplete)
	var result *hxruntime.RunEvent
	for _, ev := range eventsOf(t, tb, runID) {
		if ev.Type == hxruntime.EventRunResult {
			result = &ev
		}
	}
	require.NotNil(t, result, "no run_result event")
	data, err := json.Marshal(result.Data)
	require.NoError(t, err)
	var res struct {
		Usage           model.Usage `json:"usage"`
		UsageIncomplete bool        `json:"usage_incomplete"`
	}
	require.NoError(t, json.Unmarshal(data, &res))
	require.Equal(t, want, res.Usage, "run_result usage")
	require.Equal(t, incomplete, res.UsageIncomplete, "run_result usage_incomplete")
}

// TestScriptedRunUsage: a run's usage is the sum of its model attempts'
// usage; a retried attempt (fail_attempts) makes it incomplete and adds
// nothing of its own, and so does a step without `usage:` (the scripted
// provider reported none).
func TestScriptedRunUsage(t *testing.T) {
	t.Parallel()
	u1 := &model.Usage{InputTokens: 120, OutputTokens: 30, CacheReadInputTokens: 100, CacheCreationInputTokens: 20}
	u2 := &model.Usage{InputTokens: 160, OutputTokens: 8, CacheReadInputTokens: 120}
	sum := model.Usage{InputTokens: 280, OutputTokens: 38, CacheReadInputTokens: 220, CacheCreationInputTokens: 20}
	for _, tc := range []struct {
		name       string
		usage      [2]*model.Usage
		fail       [2]int
		want       model.Usage
		incomplete bool
	}{
		{"usage on every step", [2]*model.Usage{u1, u2}, [2]int{}, sum, false},
		{"a retried step", [2]*model.Usage{u1, u2}, [2]int{0, 1}, sum, true},
		{"a step without usage is incomplete", [2]*model.Usage{u1, nil}, [2]int{}, *u1, true},
		{"a step with zero usage is complete", [2]*model.Usage{u1, {}}, [2]int{}, *u1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			def := usageAgent("usage", tc.usage, tc.fail)
			tb := setup(t, def)
			sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
			require.NoError(t, err)
			res := runToEnd(t, tb, sess.ID, "go")
			requireRunUsage(t, tb, res.RunID, tc.want, tc.incomplete)
		})
	}
}

// TestProviderWithoutUsage: an OpenAI-compatible server that leaves usage
// out of one answer makes the run's usage incomplete; the answers that
// carry it are summed.
func TestProviderWithoutUsage(t *testing.T) {
	t.Parallel()
	const toolCall = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"count","arguments":"{}"}}]}}]%s}`
	const answer = `{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"all done"}}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`
	for _, tc := range []struct {
		name       string
		usage      string
		want       model.Usage
		incomplete bool
	}{
		{"every answer reports usage", `,"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}`, model.Usage{InputTokens: 14, OutputTokens: 5}, false},
		{"one answer without usage", ``, model.Usage{InputTokens: 9, OutputTokens: 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if calls.Add(1) == 1 {
					_, _ = fmt.Fprintf(w, toolCall, tc.usage)
					return
				}
				_, _ = w.Write([]byte(answer))
			}))
			t.Cleanup(srv.Close)
			def := &agent.Definition{
				Name: "oai", Version: "v1",
				Model: model.Config{Provider: "openai", Model: "m", BaseURL: srv.URL},
				Tools: []agent.ToolDef{{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"}}},
			}
			tb := setup(t, def)
			sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
			require.NoError(t, err)
			res := runToEnd(t, tb, sess.ID, "go")
			requireRunUsage(t, tb, res.RunID, tc.want, tc.incomplete)
			srv.CloseClientConnections()
		})
	}
}

// TestFailedAttemptUsage: the usage an Anthropic server reported before an
// attempt failed (message_start, then an overloaded_error event) is added
// to the run's usage with that of the successful retry; the retry makes
// the usage incomplete.
func TestFailedAttemptUsage(t *testing.T) {
	t.Parallel()
	event := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	start := func(in, cacheRead int) string {
		return event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":1,"cache_read_input_tokens":%d,"cache_creation_input_tokens":0}}}`, in, cacheRead))
	}
	const text = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	failed := start(50, 40) + event("content_block_start", text) +
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Par"}}`) +
		event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	answer := start(60, 40) + event("content_block_start", text) +
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"all done"}}`) +
		event("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}`) +
		event("message_stop", `{"type":"message_stop"}`)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if calls.Add(1) == 1 {
			_, _ = w.Write([]byte(failed))
			return
		}
		_, _ = w.Write([]byte(answer))
	}))
	t.Cleanup(srv.Close)
	def := &agent.Definition{
		Name: "claude", Version: "v1",
		Model: model.Config{Provider: "anthropic", Model: "m", BaseURL: srv.URL},
		Retry: &agent.RetryPolicy{Attempts: 2, BackoffSeconds: 0.01, MaxBackoffSeconds: 0.01},
	}
	tb := setup(t, def)
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, int32(2), calls.Load())
	requireRunUsage(t, tb, res.RunID, model.Usage{InputTokens: 110, OutputTokens: 8, CacheReadInputTokens: 80}, true)
	srv.CloseClientConnections()
}
