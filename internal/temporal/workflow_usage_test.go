package temporal

import (
	"context"
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
