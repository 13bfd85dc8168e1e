package temporal

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"hxd/internal/agent"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestActivitiesTrace: the model and tool activities make the chat and
// execute_tool spans the local driver makes (runtime.Tracing), children
// of the span in the activity's context, content only with
// CaptureContent and then redacted.
func TestActivitiesTrace(t *testing.T) {
	t.Parallel()
	def := &agent.Definition{
		Name: "traced", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{FailAttempts: 1, ToolCalls: []model.ToolCall{{ID: "c1", Name: "fetch", Input: json.RawMessage(`{"password":"hunter2"}`)}}},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "fetch", Kind: "builtin", Builtin: "fetch", ReplayPolicy: "safe"}}},
	}
	reg := agent.NewRegistry("fetch")
	require.NoError(t, reg.Register(def))
	registered, err := reg.Get(def.Ref())
	require.NoError(t, err)
	hash := ConfigHash(mustConfig(t, registered))

	for _, capture := range []bool{false, true} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		acts := NewActivities(WorkerDeps{Agents: reg, TracerProvider: tp, CaptureContent: capture,
			ToolOptions: tool.Options{Builtins: map[string]tool.BuiltinFunc{"fetch": func(context.Context, tool.Invocation) (tool.Outcome, error) {
				return tool.Outcome{Result: model.ToolResult{Content: json.RawMessage(`{"api_key":"sk-live-1","rows":3}`)}}, nil
			}}}})
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		env.RegisterActivityWithOptions(acts.Model, activity.RegisterOptions{Name: ActivityModel})
		env.RegisterActivityWithOptions(acts.Tool, activity.RegisterOptions{Name: ActivityTool})

		mi := ModelInput{Agent: def.Ref(), ConfigHash: hash, SessionID: runtime.SessionKey(runtime.LocalPrincipal, "ses-1"), RunID: "run-1", Step: 1, Attempt: 1,
			Request: model.Request{Messages: []model.Message{model.TextMessage(model.RoleUser, "say hi")}}}
		_, err := env.ExecuteActivity(ActivityModel, mi)
		require.Error(t, err, "the scripted first attempt fails")
		mi.Attempt = 2
		_, err = env.ExecuteActivity(ActivityModel, mi)
		require.NoError(t, err)
		_, err = env.ExecuteActivity(ActivityTool, ToolInput{Agent: def.Ref(), ConfigHash: hash, SessionID: "ses-1", RunID: "run-1", Step: 1,
			Entry: runtime.ToolEntry{ExecutionKey: "run-1:1:c1", Call: model.ToolCall{ID: "c1", Name: "fetch", Input: json.RawMessage(`{"password":"hunter2"}`)},
				Policy: "safe", Attempt: 1, Timeout: 10}})
		require.NoError(t, err)

		spans := rec.Ended()
		require.Len(t, spans, 3)
		require.Equal(t, "chat", spans[0].Name())
		require.Equal(t, codes.Error, spans[0].Status().Code)
		require.Equal(t, int64(1), spanAttrs(spans[0])[runtime.AttrAttempt].AsInt64())
		require.Equal(t, codes.Unset, spans[1].Status().Code)
		require.Equal(t, int64(2), spanAttrs(spans[1])[runtime.AttrAttempt].AsInt64())
		require.Equal(t, "execute_tool fetch", spans[2].Name())
		ta := spanAttrs(spans[2])
		require.Equal(t, "returned", ta[runtime.AttrToolOutcome].AsString())
		require.Equal(t, "safe", ta[runtime.AttrReplayPolicy].AsString())
		require.Equal(t, "c1", ta["gen_ai.tool.call.id"].AsString())
		var all strings.Builder
		for _, s := range spans {
			a := spanAttrs(s)
			require.Equal(t, "ses-1", a[runtime.AttrSessionID].AsString())
			require.Equal(t, "run-1", a[runtime.AttrRunID].AsString())
			for _, kv := range s.Attributes() {
				all.WriteString(kv.Value.String() + "\n")
			}
		}
		require.NotContains(t, all.String(), "hunter2")
		require.NotContains(t, all.String(), "sk-live-1")
		if capture {
			require.Contains(t, spanAttrs(spans[1])["gen_ai.input.messages"].AsString(), "say hi")
			require.JSONEq(t, `{"password":"[REDACTED]"}`, ta["gen_ai.tool.call.arguments"].AsString())
			require.JSONEq(t, `{"api_key":"[REDACTED]","rows":3}`, ta["gen_ai.tool.call.result"].AsString())
		} else {
			require.NotContains(t, all.String(), "say hi")
			require.NotContains(t, all.String(), "rows")
		}
	}
}
