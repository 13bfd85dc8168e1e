package runtime_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/agent"
	"hxd/internal/hxtest"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/store/sqlite"
	"hxd/internal/tool"
)

// tracedSetup is setup with a TracerProvider recording every span.
func tracedSetup(t *testing.T, capture bool, defs ...*agent.Definition) (*testBundle, *sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tb := setupCfg(t, func(cfg *hxruntime.Config) {
		cfg.TracerProvider = tp
		cfg.CaptureContent = capture
	}, defs...)
	return tb, tp, rec
}

// requestSpan stands for the HTTP server span of a request.
func requestSpan(tp trace.TracerProvider, name string) (context.Context, trace.Span) {
	return tp.Tracer("test").Start(context.Background(), name, trace.WithSpanKind(trace.SpanKindServer))
}

// ended returns the ended spans whose name starts with prefix, in start
// order.
func ended(rec *tracetest.SpanRecorder, prefix string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), prefix) {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	return out
}

// awaitEnded waits until n spans named with prefix ended (a driver ends
// its span just after its last commit) and returns them.
func awaitEnded(t *testing.T, rec *tracetest.SpanRecorder, prefix string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	require.Eventually(t, func() bool { return len(ended(rec, prefix)) >= n }, 10*time.Second, 5*time.Millisecond,
		"%d %q spans", n, prefix)
	spans := ended(rec, prefix)
	require.Len(t, spans, n)
	return spans
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func requireAttr(t *testing.T, s sdktrace.ReadOnlySpan, key string, want any) {
	t.Helper()
	v, ok := attrsOf(s)[attribute.Key(key)]
	require.True(t, ok, "span %s has no %s", s.Name(), key)
	require.Equal(t, want, v.AsInterface(), "span %s: %s", s.Name(), key)
}

// allAttributeText is every attribute value of every ended span, as text.
func allAttributeText(rec *tracetest.SpanRecorder) string {
	var b strings.Builder
	for _, s := range rec.Ended() {
		b.WriteString(s.Name())
		b.WriteString(s.Status().Description)
		for _, kv := range s.Attributes() {
			b.WriteString(" " + string(kv.Key) + "=" + kv.Value.String())
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				b.WriteString(" " + string(kv.Key) + "=" + kv.Value.String())
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// contentKeys are the attributes only CaptureContent sets.
var contentKeys = []string{
	"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
	"gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
}

// TestTracingInvoiceDemo: the demo invoice run under a request's span
// makes invoke_agent, its child, with a chat span per model attempt (the
// failed first one in error), an execute_tool span and hxd.commit spans
// as its children; every run span names the session and run; and without
// CaptureContent no prompt, completion or tool payload is in any span.
func TestTracingInvoiceDemo(t *testing.T) {
	t.Parallel()
	tb, tp, rec := tracedSetup(t, false)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{
		Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}, Recording: recording(true),
	})
	require.NoError(t, err)
	rctx, req := requestSpan(tp, "POST /v1/sessions/{session_id}/runs")
	run, created, err := tb.rt.SubmitRun(rctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("Analyze overdue invoices for the demo account")})
	require.NoError(t, err)
	require.True(t, created)
	req.End()
	res := waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)

	agents := awaitEnded(t, rec, "invoke_agent", 1)
	ia := agents[0]
	require.Equal(t, "invoke_agent invoice-analyst", ia.Name())
	require.Equal(t, req.SpanContext().TraceID(), ia.SpanContext().TraceID())
	require.Equal(t, req.SpanContext().SpanID(), ia.Parent().SpanID(), "a child of the request's span")
	require.Empty(t, ia.Links())
	requireAttr(t, ia, "gen_ai.operation.name", "invoke_agent")
	requireAttr(t, ia, "gen_ai.agent.name", "invoice-analyst")
	requireAttr(t, ia, "hxd.run.status", "completed")
	require.Equal(t, codes.Unset, ia.Status().Code)

	chats := ended(rec, "chat")
	require.Len(t, chats, 3, "two attempts of step 1, one of step 2")
	for _, c := range chats {
		require.Equal(t, ia.SpanContext().SpanID(), c.Parent().SpanID())
		require.Equal(t, trace.SpanKindClient, c.SpanKind())
		requireAttr(t, c, "gen_ai.operation.name", "chat")
		requireAttr(t, c, "gen_ai.provider.name", "scripted")
	}
	require.Equal(t, codes.Error, chats[0].Status().Code, "the injected failure")
	requireAttr(t, chats[0], "error.type", "ConnectionError")
	requireAttr(t, chats[0], "hxd.attempt", int64(1))
	require.Equal(t, codes.Unset, chats[1].Status().Code)
	requireAttr(t, chats[1], "hxd.attempt", int64(2))
	requireAttr(t, chats[1], "gen_ai.response.finish_reasons", []string{"tool_use"})
	requireAttr(t, chats[2], "hxd.attempt", int64(1))
	requireAttr(t, chats[2], "gen_ai.response.finish_reasons", []string{"end_turn"})

	tools := ended(rec, "execute_tool")
	require.Len(t, tools, 1)
	et := tools[0]
	require.Equal(t, "execute_tool overdue_balance", et.Name())
	require.Equal(t, ia.SpanContext().SpanID(), et.Parent().SpanID())
	requireAttr(t, et, "gen_ai.operation.name", "execute_tool")
	requireAttr(t, et, "gen_ai.tool.name", "overdue_balance")
	requireAttr(t, et, "gen_ai.tool.call.id", "overdue")
	requireAttr(t, et, "hxd.replay_policy", "safe")
	requireAttr(t, et, "hxd.attempt", int64(1))
	requireAttr(t, et, "hxd.tool.outcome", "returned")
	require.Equal(t, codes.Unset, et.Status().Code)

	commits := ended(rec, "hxd.commit")
	require.NotEmpty(t, commits)
	var kinds [][]string
	for _, c := range commits {
		require.Equal(t, ia.SpanContext().SpanID(), c.Parent().SpanID())
		kinds = append(kinds, attrsOf(c)["hxd.commit.kinds"].AsStringSlice())
	}
	require.Equal(t, []string{"run.started"}, kinds[0], "the insert's commit")
	require.Contains(t, kinds, []string{"tool.returned"}, "the raw result commits on its own")

	// Every span of the run names it.
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() == req.SpanContext().SpanID() {
			continue
		}
		requireAttr(t, s, "hxd.session_id", sess.ID)
		requireAttr(t, s, "hxd.run_id", run.RunID)
		for _, k := range contentKeys {
			_, ok := attrsOf(s)[attribute.Key(k)]
			require.False(t, ok, "span %s carries %s without CaptureContent", s.Name(), k)
		}
	}
	text := allAttributeText(rec)
	for _, payload := range []string{"Analyze overdue", "You analyse synthetic invoices", `"account"`, "1,500", "synthetic fixture"} {
		require.NotContains(t, text, payload)
	}

	// The run keeps its attempt's span context.
	row, err := tb.store.RunGet(ctx, run.RunID)
	require.NoError(t, err)
	require.Equal(t, traceparent(ia.SpanContext()), row.TraceContext)
}

// traceparent is the W3C traceparent of sc.
func traceparent(sc trace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// TestTracingCaptureContent: with CaptureContent, prompts, completions and
// tool payloads are in the spans, auto-redacted as exports are.
func TestTracingCaptureContent(t *testing.T) {
	t.Parallel()
	def := oneCallAgent("leaky", model.ToolCall{ID: "c1", Name: "count", Input: json.RawMessage(`{"account":"demo","api_key":"sk-live-123"}`)},
		tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"})
	def.SystemPrompt = "Be brief."
	def.Model.Script[1].Usage = &model.Usage{InputTokens: 12, OutputTokens: 3}
	tb, _, rec := tracedSetup(t, true, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, `{"note":"check the demo account","password":"hunter2"}`)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	awaitEnded(t, rec, "invoke_agent", 1)

	text := allAttributeText(rec)
	require.NotContains(t, text, "sk-live-123")
	require.NotContains(t, text, "hunter2")

	chats := ended(rec, "chat")
	require.Len(t, chats, 2)
	a := attrsOf(chats[0])
	require.Equal(t, "[{\"type\":\"text\",\"content\":\"Be brief.\"}]", a["gen_ai.system_instructions"].AsString())
	in := a["gen_ai.input.messages"].AsString()
	require.Contains(t, in, "check the demo account")
	require.Contains(t, in, `[REDACTED]`)
	require.Contains(t, a["gen_ai.output.messages"].AsString(), `"type":"tool_call"`)
	b := attrsOf(chats[1])
	require.Contains(t, b["gen_ai.input.messages"].AsString(), `"tool_call_response"`)
	require.Contains(t, b["gen_ai.output.messages"].AsString(), `"content":"done"`)
	requireAttr(t, chats[1], "gen_ai.usage.input_tokens", int64(12))
	requireAttr(t, chats[1], "gen_ai.usage.output_tokens", int64(3))

	tools := ended(rec, "execute_tool")
	require.Len(t, tools, 1)
	ta := attrsOf(tools[0])
	require.JSONEq(t, `{"account":"demo","api_key":"[REDACTED]"}`, ta["gen_ai.tool.call.arguments"].AsString())
	require.JSONEq(t, `{"account":"demo","api_key":"[REDACTED]"}`, ta["gen_ai.tool.call.result"].AsString(), "count echoes its input")
}

// TestTracingToolRetries: each tool attempt is an execute_tool span; a
// failed one is in error with outcome failed.
func TestTracingToolRetries(t *testing.T) {
	t.Parallel()
	def := oneCallAgent("flaky", model.ToolCall{ID: "f", Name: "flaky", Input: json.RawMessage(`{}`)},
		tool.Config{Name: "flaky", Kind: "builtin", Builtin: "meet", ReplayPolicy: "safe"})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var calls int
	tb := setupCfg(t, func(cfg *hxruntime.Config) {
		cfg.TracerProvider = tp
		cfg.ToolOptions.Builtins["meet"] = func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
			calls++
			if calls == 1 {
				return tool.Outcome{}, &tool.Failure{Type: "ConnectionError", Message: "refused", Transient: true}
			}
			return tool.Outcome{Result: model.ToolResult{Content: jsonString("ok")}}, nil
		}
	}, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	awaitEnded(t, rec, "invoke_agent", 1)

	tools := ended(rec, "execute_tool")
	require.Len(t, tools, 2)
	require.Equal(t, codes.Error, tools[0].Status().Code)
	requireAttr(t, tools[0], "hxd.tool.outcome", "failed")
	requireAttr(t, tools[0], "error.type", "ConnectionError")
	requireAttr(t, tools[0], "hxd.attempt", int64(1))
	require.Equal(t, codes.Unset, tools[1].Status().Code)
	requireAttr(t, tools[1], "hxd.tool.outcome", "returned")
	requireAttr(t, tools[1], "hxd.attempt", int64(2))
}

// TestTracingResumeLinks: a run whose process went mid-tool is resumed at
// start-up by another process: its new invoke_agent span starts a new
// trace (no request asked for it), linked to the span context saved by
// the first attempt, and is saved in turn. A resume asked for by a request
// is a child of the request's span, linked the same way.
func TestTracingResumeLinks(t *testing.T) {
	t.Parallel()
	recA := tracetest.NewSpanRecorder()
	tpA := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recA))
	a := setupCfg(t, func(cfg *hxruntime.Config) { cfg.TracerProvider = tpA }, gateAgent())
	ctx := context.Background()
	sess, err := a.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "gated", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	rctx, req := requestSpan(tpA, "POST /v1/sessions/{session_id}/runs")
	run, _, err := a.rt.SubmitRun(rctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	req.End()
	require.Eventually(t, func() bool { return a.toolCalls("gate") == 1 }, 5*time.Second, 5*time.Millisecond)

	// The process goes while the tool runs: storage keeps the run running.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, a.rt.Stop(gone))
	first := awaitEnded(t, recA, "invoke_agent", 1)[0]
	row, err := a.store.RunGet(ctx, run.RunID)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusRunning, row.Status)
	require.Equal(t, traceparent(first.SpanContext()), row.TraceContext)

	// Another process on the same database resumes it at start-up, from a
	// context that happens to hold a span: the resume is a root all the same.
	st, err := sqlite.Open(ctx, sqlite.Config{Path: a.path, Logger: hxtest.Logger(t)})
	require.NoError(t, err)
	reg := agent.NewRegistry("gate")
	require.NoError(t, reg.Register(gateAgent()))
	recB := tracetest.NewSpanRecorder()
	tpB := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recB))
	b, err := hxruntime.New(hxruntime.Config{Store: st, Agents: reg, Logger: hxtest.Logger(t), TracerProvider: tpB,
		ToolOptions: tool.Options{WorkDir: t.TempDir(), Builtins: map[string]tool.BuiltinFunc{
			"gate": func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
				return tool.Outcome{Result: model.ToolResult{Content: jsonString("open")}}, nil
			},
		}},
		SleepFunc: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Stop(context.Background()))
		require.NoError(t, st.Close())
	})
	startCtx, startup := requestSpan(tpB, "startup")
	n, err := b.ResumeInterrupted(startCtx)
	startup.End()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	res, err := b.WaitRun(ctx, run.RunID, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)

	second := awaitEnded(t, recB, "invoke_agent", 1)[0]
	require.False(t, second.Parent().IsValid(), "a resume at start-up is the root of a new trace")
	require.NotEqual(t, first.SpanContext().TraceID(), second.SpanContext().TraceID())
	require.NotEqual(t, startup.SpanContext().TraceID(), second.SpanContext().TraceID())
	require.Len(t, second.Links(), 1)
	link := second.Links()[0].SpanContext
	require.Equal(t, first.SpanContext().TraceID(), link.TraceID())
	require.Equal(t, first.SpanContext().SpanID(), link.SpanID())
	require.True(t, link.IsRemote())
	requireAttr(t, second, "hxd.run_id", run.RunID)
	for _, s := range ended(recB, "execute_tool") {
		require.Equal(t, second.SpanContext().SpanID(), s.Parent().SpanID())
	}
	row, err = st.RunGet(ctx, run.RunID)
	require.NoError(t, err)
	require.Equal(t, traceparent(second.SpanContext()), row.TraceContext, "the new attempt's context is saved")
}

// TestTracingResumeByRequest: a resume asked for by a request (here an
// approval with resume) is a child of the request's span, linked to the
// previous attempt's.
func TestTracingResumeByRequest(t *testing.T) {
	t.Parallel()
	def := oneCallAgent("asker", model.ToolCall{ID: "a", Name: "count", Input: json.RawMessage(`{}`)},
		tool.Config{Name: "count", Kind: "builtin", Builtin: "count", Permission: "ask"})
	tb, tp, rec := tracedSetup(t, false, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusAwaitingInput, res.Status)
	first := awaitEnded(t, rec, "invoke_agent", 1)[0]

	rctx, req := requestSpan(tp, "POST /v1/sessions/{session_id}/approvals/{execution_key}")
	_, err = tb.rt.Approve(rctx, hxruntime.ApproveParams{SessionID: sess.ID, ExecutionKey: res.Pending[0].ExecutionKey, Allow: true, Resume: true})
	require.NoError(t, err)
	req.End()
	res = waitRun(t, tb, res.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)

	second := awaitEnded(t, rec, "invoke_agent", 2)[1]
	require.Equal(t, req.SpanContext().SpanID(), second.Parent().SpanID())
	require.Len(t, second.Links(), 1)
	require.Equal(t, first.SpanContext().SpanID(), second.Links()[0].SpanContext.SpanID())
	require.Equal(t, first.SpanContext().TraceID(), second.Links()[0].SpanContext.TraceID())
	row, err := tb.store.RunGet(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, traceparent(second.SpanContext()), row.TraceContext)
}

// TestTracingFailedRunIsInError: a run that fails ends its invoke_agent
// span in error.
func TestTracingFailedRunIsInError(t *testing.T) {
	t.Parallel()
	def := &agent.Definition{
		Name: "doomed", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{{FailAttempts: 99, Text: "never"}}},
	}
	tb, _, rec := tracedSetup(t, false, def)
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusFailed, res.Status)
	ia := awaitEnded(t, rec, "invoke_agent", 1)[0]
	require.Equal(t, codes.Error, ia.Status().Code)
	requireAttr(t, ia, "hxd.run.status", "failed")
	requireAttr(t, ia, "error.type", res.Error.Type)
}

// TestTracingExportSpan: an export runs in an hxd.export span.
func TestTracingExportSpan(t *testing.T) {
	t.Parallel()
	tb, _, rec := tracedSetup(t, false)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.NoError(t, tb.rt.Export(ctx, res.RunID, func(*hxruntime.Incident) error { return nil }))
	exp := awaitEnded(t, rec, "hxd.export", 1)[0]
	requireAttr(t, exp, "hxd.run_id", res.RunID)
	requireAttr(t, exp, "hxd.session_id", sess.ID)
	require.Equal(t, codes.Unset, exp.Status().Code)

	require.Error(t, tb.rt.Export(ctx, "run-missing", func(*hxruntime.Incident) error { return nil }))
	exp = awaitEnded(t, rec, "hxd.export", 2)[1]
	require.Equal(t, codes.Error, exp.Status().Code)
	requireAttr(t, exp, "error.type", "not_found")
	require.Equal(t, "not_found", exp.Status().Description, "the error's type, not its text")
}

// TestTracingOffSavesNoContext: without a TracerProvider a run saves no
// trace context.
func TestTracingOffSavesNoContext(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	row, err := tb.store.RunGet(ctx, res.RunID)
	require.NoError(t, err)
	require.Empty(t, row.TraceContext)
}

// TestTracingConcurrentBatch: the calls of a concurrent batch, run in
// parallel, each get their execute_tool span, children of the attempt's.
func TestTracingConcurrentBatch(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tb := setupCfg(t, func(cfg *hxruntime.Config) {
		cfg.TracerProvider = tp
		withMeet(func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
			return tool.Outcome{Result: model.ToolResult{Content: jsonString(inv.Call.ID)}}, nil
		})(cfg)
	}, batchAgent("batch", true))
	_, run := startRecorded(t, tb, "batch")
	res := waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	ia := awaitEnded(t, rec, "invoke_agent", 1)[0]
	tools := ended(rec, "execute_tool")
	require.Len(t, tools, 3)
	var ids []string
	for _, s := range tools {
		require.Equal(t, ia.SpanContext().SpanID(), s.Parent().SpanID())
		requireAttr(t, s, "hxd.tool.outcome", "returned")
		ids = append(ids, attrsOf(s)["gen_ai.tool.call.id"].AsString())
	}
	slices.Sort(ids)
	require.Equal(t, []string{"a", "b", "c"}, ids)
}

// TestTracingResponseModel: gen_ai.response.model is the model the
// provider named in its reply, else the requested one.
func TestTracingResponseModel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ named, want string }{
		{named: "claude-sonnet-4-5-20250929", want: "claude-sonnet-4-5-20250929"},
		{named: "", want: "claude-sonnet-4-5"},
	} {
		rec := tracetest.NewSpanRecorder()
		tr := hxruntime.NewTracing(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), false)
		_, span := tr.StartChat(t.Context(), hxruntime.ChatAttempt{SessionID: "s", RunID: "r", Provider: "anthropic", Model: "claude-sonnet-4-5", Attempt: 1})
		tr.EndChat(span, "claude-sonnet-4-5", &model.Response{Text: "hi", StopReason: "end_turn", Model: tc.named}, nil)
		ended := rec.Ended()
		require.Len(t, ended, 1)
		var got string
		for _, a := range ended[0].Attributes() {
			if a.Key == "gen_ai.response.model" {
				got = a.Value.AsString()
			}
		}
		require.Equal(t, tc.want, got, "named %q", tc.named)
	}
}
