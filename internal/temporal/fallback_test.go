package temporal

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"hxd/internal/agent"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// modelCalls records every model activity attempt of h as
// "model_index/attempt model" (the attempt of the activity's input: its
// first attempt's number).
func modelCalls(h *harness) func() []string {
	var (
		mu  sync.Mutex
		out []string
	)
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != ActivityModel {
			return
		}
		var in ModelInput
		if err := args.Get(&in); err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		out = append(out, fmt.Sprintf("%d/%d %s", in.ModelIndex, in.Attempt, in.Request.Model))
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), out...)
	}
}

// fallbackAgent has a scripted primary (model-a) with the given script
// and a scripted fallback (model-b) that answers step 1 with an echo call
// and step 2 with "from b".
func fallbackAgent(primary ...model.ScriptStep) *agent.Definition {
	tools := []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAllow)}
	def := scriptedAgent("chain", tools, primary...)
	def.Model.Model = "model-a"
	def.Model.Fallback = []model.Config{{Provider: model.ProviderScripted, Model: "model-b", Script: []model.ScriptStep{
		{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
		{Text: "from b"},
	}}}
	def.Retry = &agent.RetryPolicy{Attempts: 2, BackoffSeconds: 0.1, MaxBackoffSeconds: 1}
	return def
}

// TestModelFallbackChain (issue 20, item 4, Temporal engine): once the
// primary's transient failures used up the retry policy, the workflow
// calls the fallback's activity, its attempt numbered on and its request
// naming its model; the next step starts at the primary again.
func TestModelFallbackChain(t *testing.T) {
	def := fallbackAgent(model.ScriptStep{Text: "never", FailAttempts: 100}, model.ScriptStep{Text: "from a"})
	h := newHarness(t, def, harnessOpts{})
	calls := modelCalls(h)
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(time.Hour)
	r := h.getRun("run-1")
	assertStatus(t, r, runtime.StatusCompleted)
	require.Equal(t, "from a", *r.Output)
	require.True(t, r.UsageIncomplete)
	require.Equal(t, []string{"0/1 model-a", "0/1 model-a", "1/3 model-b", "0/1 model-a"}, calls(),
		"two attempts of the primary (one activity), the fallback's attempt 3, then step 2 on the primary")
	var resets []string
	for _, e := range h.sink.events["run-1"] {
		if e.Type == runtime.EventAttemptReset {
			resets = append(resets, e.StepID+"/"+e.AttemptID+" "+string(e.Data))
		}
	}
	require.Equal(t, []string{`1/2 {"attempt":1}`, `1/2 {"attempt":2}`}, resets)
}

// TestModelFallbackNotAfterPermanentFailure: a permanent failure of the
// primary fails the run; the fallback is never called.
func TestModelFallbackNotAfterPermanentFailure(t *testing.T) {
	// Step 2 is beyond the primary's script: ScriptExhausted, permanent.
	def := fallbackAgent(model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}})
	h := newHarness(t, def, harnessOpts{})
	calls := modelCalls(h)
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(time.Hour)
	r := h.getRun("run-1")
	assertStatus(t, r, runtime.StatusFailed)
	require.Equal(t, model.FailureScriptExhausted, r.Error.Type)
	require.Equal(t, []string{"0/1 model-a", "0/1 model-a"}, calls())
}
