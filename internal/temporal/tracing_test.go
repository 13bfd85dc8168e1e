package temporal

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

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

// TestActivitiesTraceRun: with the run's trace context in their input, the
// model and tool activities make their chat and execute_tool spans
// children of that remote span (the request that submitted or resumed
// the run), linked to the activity's own span, and the tool's calls carry
// that trace; without it (TestActivitiesTrace) they stay the activity
// span's children.
func TestActivitiesTraceRun(t *testing.T) {
	t.Parallel()
	def := &agent.Definition{
		Name: "traced", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{{Text: "hi"}}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "fetch", Kind: "builtin", Builtin: "fetch", ReplayPolicy: "safe"}}},
	}
	reg := agent.NewRegistry("fetch")
	require.NoError(t, reg.Register(def))
	registered, err := reg.Get(def.Ref())
	require.NoError(t, err)
	hash := ConfigHash(mustConfig(t, registered))

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	// The request that submitted the run.
	reqCtx, reqSpan := tp.Tracer("test").Start(context.Background(), "POST /sessions/{session_id}/runs")
	reqSpan.End()
	tc := TraceContextOf(reqCtx)
	require.NotNil(t, tc)
	require.Equal(t, reqSpan.SpanContext().SpanID(), tc.SpanContext().SpanID())
	require.Nil(t, TraceContextOf(context.Background()), "no span: no trace context")
	// The activity's own span (the SDK interceptor's RunActivity span, in
	// the trace of the request that started the workflow).
	actCtx, actSpan := tp.Tracer("test").Start(context.Background(), "RunActivity:test")
	defer actSpan.End()

	var toolSpan trace.SpanContext
	acts := NewActivities(WorkerDeps{Agents: reg, TracerProvider: tp,
		ToolOptions: tool.Options{Builtins: map[string]tool.BuiltinFunc{"fetch": func(ctx context.Context, _ tool.Invocation) (tool.Outcome, error) {
			toolSpan = trace.SpanContextFromContext(ctx)
			return tool.Outcome{Result: model.ToolResult{Content: json.RawMessage(`"ok"`)}}, nil
		}}}})
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: actCtx})
	env.RegisterActivityWithOptions(acts.Model, activity.RegisterOptions{Name: ActivityModel})
	env.RegisterActivityWithOptions(acts.Tool, activity.RegisterOptions{Name: ActivityTool})

	_, err = env.ExecuteActivity(ActivityModel, ModelInput{Agent: def.Ref(), ConfigHash: hash, SessionID: "ses-1", RunID: "run-1", Step: 1, Attempt: 1,
		Request: model.Request{Messages: []model.Message{model.TextMessage(model.RoleUser, "say hi")}}, Trace: tc})
	require.NoError(t, err)
	_, err = env.ExecuteActivity(ActivityTool, ToolInput{Agent: def.Ref(), ConfigHash: hash, SessionID: "ses-1", RunID: "run-1", Step: 1,
		Entry: runtime.ToolEntry{ExecutionKey: "run-1:1:c1", Call: model.ToolCall{ID: "c1", Name: "fetch", Input: json.RawMessage(`{}`)},
			Policy: "safe", Attempt: 1, Timeout: 10}, Trace: tc})
	require.NoError(t, err)

	var chat, exec sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch {
		case strings.HasPrefix(s.Name(), "chat"):
			chat = s
		case s.Name() == "execute_tool fetch":
			exec = s
		}
	}
	require.NotNil(t, chat)
	require.NotNil(t, exec)
	for _, s := range []sdktrace.ReadOnlySpan{chat, exec} {
		require.Equal(t, reqSpan.SpanContext().TraceID(), s.SpanContext().TraceID(), s.Name())
		require.Equal(t, reqSpan.SpanContext().SpanID(), s.Parent().SpanID(), s.Name())
		require.True(t, s.Parent().IsRemote(), s.Name())
		require.Len(t, s.Links(), 1, s.Name())
		require.Equal(t, actSpan.SpanContext().SpanID(), s.Links()[0].SpanContext.SpanID(), s.Name())
		require.Equal(t, actSpan.SpanContext().TraceID(), s.Links()[0].SpanContext.TraceID(), s.Name())
	}
	// The tool's calls (webhooks, MCP) propagate the execute_tool span.
	require.Equal(t, exec.SpanContext().SpanID(), toolSpan.SpanID())
	require.Equal(t, reqSpan.SpanContext().TraceID(), toolSpan.TraceID())
}

// TestTraceContextRoundTrip: a trace context keeps traceparent and
// tracestate; an invalid or missing one is no parent.
func TestTraceContextRoundTrip(t *testing.T) {
	t.Parallel()
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ts, err := trace.ParseTraceState("vendor=abc")
	require.NoError(t, err)
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts,
	}))
	tc := TraceContextOf(ctx)
	require.Equal(t, &TraceContext{TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", TraceState: "vendor=abc"}, tc)
	sc := tc.SpanContext()
	require.True(t, sc.IsValid())
	require.Equal(t, "vendor=abc", sc.TraceState().String())
	for _, bad := range []*TraceContext{nil, {}, {TraceParent: "00-zz-b7ad6b7169203331-01"}} {
		require.False(t, bad.SpanContext().IsValid())
	}
	// The workflow keeps only a bounded one.
	require.Equal(t, tc, tc.bounded())
	for _, over := range []*TraceContext{nil, {}, {TraceParent: strings.Repeat("0", maxTraceParent+1)},
		{TraceParent: tc.TraceParent, TraceState: strings.Repeat("a", maxTraceState+1)}} {
		require.Nil(t, over.bounded())
	}
}

// TestRunTraceFollowsRequests: the workflow hands each model and tool
// activity the trace context of the request that submitted or last
// resumed the run (submit, resolve with resume, control resume); a
// request without one (tracing off) leaves the inputs without it.
func TestRunTraceFollowsRequests(t *testing.T) {
	const (
		submitTP  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		resolveTP = "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"
		resumeTP  = "00-2af7651916cd43dd8448eb211c80319c-d7ad6b7169203331-01"
	)
	t.Run("resolve", func(t *testing.T) {
		def := scriptedAgent("ask", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAsk)},
			model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
			model.ScriptStep{Text: "done"},
		)
		h := newHarness(t, def, harnessOpts{})
		msg, _ := json.Marshal("go")
		h.update(time.Second, UpdateSubmit, "req-1", SubmitRequest{Message: msg, RequestID: "req-1", RunID: "run-1", Trace: &TraceContext{TraceParent: submitTP}})
		allow := true
		res := h.update(time.Minute, UpdateResolve, "res-1", ResolveRequest{Key: "run-1:1:c1", Allow: &allow, Resume: true, Trace: &TraceContext{TraceParent: resolveTP}})
		h.run(time.Hour)
		var rr ResolveResult
		res.decode(t, &rr)
		assertStatus(t, rr.Run, runtime.StatusCompleted)
		require.Equal(t, []string{"model:" + submitTP, "tool:" + resolveTP, "model:" + resolveTP}, h.activityTraces())
	})
	t.Run("control resume", func(t *testing.T) {
		def := scriptedAgent("fails", nil, model.ScriptStep{Text: "ok", FailAttempts: 1})
		def.Retry = &agent.RetryPolicy{Attempts: 1, BackoffSeconds: 0.1, MaxBackoffSeconds: 1}
		h := newHarness(t, def, harnessOpts{})
		h.submit(time.Second, "req-1", "run-1", "go") // no trace context
		resume := h.update(time.Minute, UpdateControl, "ctl-1", ControlRequest{Action: ActionResume, Trace: &TraceContext{TraceParent: resumeTP}})
		h.run(time.Hour)
		var cr ControlResult
		resume.decode(t, &cr)
		assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
		require.Equal(t, []string{"model:", "model:" + resumeTP}, h.activityTraces())
	})
}
