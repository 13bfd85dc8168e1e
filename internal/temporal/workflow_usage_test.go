package temporal

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// usageRun runs run-1 of h to completion, continues as new and returns
// its state (usage_base is only in the state, not in get_run).
func usageRun(t *testing.T, h *harness) *runtime.RunState {
	t.Helper()
	h.submit(time.Second, "req-1", "run-1", "go")
	h.at(time.Minute, func() {
		assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
		h.env.SetContinueAsNewSuggested(true)
	})
	return continueAsNew(t, h).Runs["run-1"].State
}

// TestModelUsageAccounting: the workflow accounts usage per model attempt
// as the local driver does (runtime.BeginAttemptUsage /
// AccountAttemptUsage): usage is summed across attempts, usage_base is the
// usage before the last attempt, and usage_incomplete is set after a retry
// and after an answer whose provider reported no usage (scripted included),
// carried from the activity in ModelOutput.UsageReported.
func TestModelUsageAccounting(t *testing.T) {
	u1 := model.Usage{InputTokens: 10, OutputTokens: 4, CacheReadInputTokens: 2, CacheCreationInputTokens: 1}
	u2 := model.Usage{InputTokens: 7, OutputTokens: 3}
	call := toolCall("c1", "echo", `{"text":"hi"}`)
	tools := []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAllow)}
	openai := func(name string) *agent.Definition {
		return &agent.Definition{
			Name: name, Version: "v1", SystemPrompt: "test",
			Model: model.Config{Provider: model.ProviderOpenAI, Model: "gpt-test"}, Tools: tools,
		}
	}
	for _, tc := range []struct {
		name string
		def  *agent.Definition
		// answers, when set, replace the model activity: the responses of
		// the run's model calls in order.
		answers        []model.Response
		wantUsage      model.Usage
		wantBase       model.Usage
		wantIncomplete bool
	}{
		{
			name: "scripted summed",
			def: scriptedAgent("sum", tools,
				model.ScriptStep{ToolCalls: []model.ToolCall{call}, Usage: &u1},
				model.ScriptStep{Text: "done", Usage: &u2}),
			wantUsage: u1.Add(u2), wantBase: u1,
		},
		{
			name: "scripted without usage is incomplete",
			def: scriptedAgent("none", tools,
				model.ScriptStep{ToolCalls: []model.ToolCall{call}, Usage: &u1},
				model.ScriptStep{Text: "done"}),
			wantUsage: u1, wantBase: u1, wantIncomplete: true,
		},
		{
			name: "scripted retry",
			def: scriptedAgent("retry", tools,
				model.ScriptStep{ToolCalls: []model.ToolCall{call}, Usage: &u1},
				model.ScriptStep{Text: "done", Usage: &u2, FailAttempts: 1}),
			wantUsage: u1.Add(u2), wantBase: u1, wantIncomplete: true,
		},
		{
			name: "openai with usage",
			def:  openai("oa"),
			answers: []model.Response{
				{ToolCalls: []model.ToolCall{call}, StopReason: "tool_use", Usage: u1, UsageReported: true},
				{Text: "done", StopReason: "end_turn", Usage: u2, UsageReported: true},
			},
			wantUsage: u1.Add(u2), wantBase: u1,
		},
		{
			name: "openai reporting zero usage is complete",
			def:  openai("oa-zero"),
			answers: []model.Response{
				{ToolCalls: []model.ToolCall{call}, StopReason: "tool_use", Usage: u1, UsageReported: true},
				{Text: "done", StopReason: "end_turn", UsageReported: true},
			},
			wantUsage: u1, wantBase: u1,
		},
		{
			name: "openai answer without usage",
			def:  openai("oa-none"),
			answers: []model.Response{
				{ToolCalls: []model.ToolCall{call}, StopReason: "tool_use", Usage: u1, UsageReported: true},
				{Text: "done", StopReason: "end_turn"},
			},
			wantUsage: u1, wantBase: u1, wantIncomplete: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.def, harnessOpts{})
			if tc.answers != nil {
				calls := 0
				h.env.OnActivity(ActivityModel, mock.Anything, mock.Anything).Return(func(_ context.Context, in ModelInput) (*ModelOutput, error) {
					resp := tc.answers[calls]
					calls++
					return &ModelOutput{Response: resp, Attempt: in.Attempt, UsageReported: resp.UsageReported}, nil
				})
			}
			st := usageRun(t, h)
			require.Equal(t, runtime.StatusCompleted, st.Status)
			require.Equal(t, tc.wantUsage, st.Usage, "usage")
			require.Equal(t, tc.wantBase, st.UsageBase, "usage_base")
			require.Equal(t, tc.wantIncomplete, st.UsageIncomplete, "usage_incomplete")
		})
	}
}

// anthropicEvent renders one Messages stream event.
func anthropicEvent(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

// anthropicStart is a message_start reporting in input and cacheRead
// cache-read tokens (and one output token).
func anthropicStart(in, cacheRead int) string {
	return anthropicEvent("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":1,"cache_read_input_tokens":%d,"cache_creation_input_tokens":0}}}`, in, cacheRead))
}

// TestFailedModelAttemptUsage: what a provider reported before an attempt
// failed is added to the run's usage on the Temporal engine too, whether
// Temporal retried the activity (the usage travels in the heartbeat
// details to the next attempt and comes back in ModelOutput.FailedUsage)
// or the run failed (the usage is the failure's detail).
func TestFailedModelAttemptUsage(t *testing.T) {
	failed := func(in int) string {
		return anthropicStart(in, 40) +
			anthropicEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	}
	answer := anthropicStart(60, 40) +
		anthropicEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"all done"}}`) +
		anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":0}`) +
		anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}`) +
		anthropicEvent("message_stop", `{"type":"message_stop"}`)
	for _, tc := range []struct {
		name           string
		replies        []string
		wantStatus     runtime.RunStatus
		wantUsage      model.Usage
		wantIncomplete bool
	}{
		{
			name: "retried then answered", replies: []string{failed(50), failed(30), answer},
			wantStatus: runtime.StatusCompleted,
			wantUsage:  model.Usage{InputTokens: 140, OutputTokens: 9, CacheReadInputTokens: 120}, wantIncomplete: true,
		},
		{
			name: "every attempt failed", replies: []string{failed(50), failed(30), failed(20)},
			wantStatus: runtime.StatusFailed,
			wantUsage:  model.Usage{InputTokens: 100, OutputTokens: 3, CacheReadInputTokens: 120}, wantIncomplete: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				i := int(calls.Add(1)) - 1
				w.Header().Set("Content-Type", "text/event-stream")
				if i < len(tc.replies) {
					_, _ = w.Write([]byte(tc.replies[i]))
				}
			}))
			t.Cleanup(srv.Close)
			def := &agent.Definition{
				Name: "claude", Version: "v1", SystemPrompt: "test",
				Model: model.Config{Provider: model.ProviderAnthropic, Model: "m", BaseURL: srv.URL},
				Retry: &agent.RetryPolicy{Attempts: 3, BackoffSeconds: 0.1, MaxBackoffSeconds: 1},
			}
			h := newHarness(t, def, harnessOpts{})
			h.submit(time.Second, "req-1", "run-1", "go")
			var got runtime.RunResult
			h.at(time.Minute, func() { got = h.getRun("run-1") })
			h.run(time.Hour)
			assertStatus(t, got, tc.wantStatus)
			require.Equal(t, int32(3), calls.Load())
			require.Equal(t, tc.wantUsage, got.Usage)
			require.Equal(t, tc.wantIncomplete, got.UsageIncomplete)
		})
	}
}
