package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"hxd/internal/agent"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

func TestScriptedRunWithToolCompletes(t *testing.T) {
	def := scriptedAgent("tools", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAllow)},
		model.ScriptStep{Text: "let me echo", ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
		model.ScriptStep{Text: "done"},
	)
	def.ResponseMiddleware = []agent.Middleware{{AppendText: strp(" (mw)")}}
	h := newHarness(t, def, harnessOpts{})
	sub := h.submit(time.Second, "req-1", "run-1", "hello")
	h.run(time.Hour)

	var res SubmitResult
	sub.decode(t, &res)
	if !res.Created || res.Run.RunID != "run-1" || res.Run.Status != runtime.StatusRunning {
		t.Fatalf("submit result = %+v", res)
	}
	r := h.getRun("run-1")
	assertStatus(t, r, runtime.StatusCompleted)
	if r.Output == nil || *r.Output != "done (mw)" {
		t.Fatalf("output = %v", r.Output)
	}
	if r.StopReason == nil || *r.StopReason != "end_turn" {
		t.Fatalf("stop reason = %v", r.StopReason)
	}
	// One activity per model call and per tool call, plus one publish.
	if m, tl, p := h.count(ActivityModel), h.count(ActivityTool), h.count(ActivityPublish); m != 2 || tl != 1 || p != 1 {
		t.Fatalf("activities: model=%d tool=%d publish=%d, want 2/1/1", m, tl, p)
	}
	got := h.sink.types("run-1")
	want := []string{
		runtime.EventTextDelta, runtime.EventTextComplete, // step 1 (model activity)
		runtime.EventToolCallStart,                             // piggybacked on the tool activity
		runtime.EventToolCallComplete, runtime.EventToolResult, // piggybacked on the 2nd model activity
		runtime.EventTextDelta, runtime.EventTextComplete,
		runtime.EventTurnComplete, runtime.EventRunResult, // the final publish
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events = %v\nwant     %v", got, want)
	}
	s := h.getSession()
	if s.Owner != "alice" || s.Busy || s.Status != StatusIdle || !slices.Equal(s.Runs, []string{"run-1"}) ||
		s.LatestRun == nil || s.LatestRun.Status != runtime.StatusCompleted {
		t.Fatalf("session = %+v", s)
	}
	var resultEvent runtime.RunResult
	evs := h.sink.events["run-1"]
	if err := json.Unmarshal(evs[len(evs)-1].Data, &resultEvent); err != nil || resultEvent.Status != runtime.StatusCompleted {
		t.Fatalf("run_result event = %s (%v)", evs[len(evs)-1].Data, err)
	}
	for _, e := range evs {
		if e.SessionID != "s-1" || e.RunID != "run-1" || e.EventID == "" {
			t.Fatalf("event envelope = %+v", e)
		}
	}
}

func TestMaxIterationsStopsRun(t *testing.T) {
	def := scriptedAgent("loop", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAllow)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"1"}`)}},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c2", "echo", `{"text":"2"}`)}},
		model.ScriptStep{Text: "never"},
	)
	def.MaxIterations = 2
	h := newHarness(t, def, harnessOpts{})
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(time.Hour)
	r := h.getRun("run-1")
	assertStatus(t, r, runtime.StatusCompleted)
	if r.StopReason == nil || *r.StopReason != "max_iterations" {
		t.Fatalf("stop reason = %v", r.StopReason)
	}
	if n := h.count(ActivityModel); n != 2 {
		t.Fatalf("model activities = %d, want 2", n)
	}
}

func TestInvalidInputAnsweredInWorkflow(t *testing.T) {
	def := scriptedAgent("answers", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAllow)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":1}`)}},
		model.ScriptStep{Text: "ok"},
	)
	h := newHarness(t, def, harnessOpts{})
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(time.Hour)
	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	if n := h.count(ActivityTool); n != 0 {
		t.Fatalf("tool activities = %d, want 0 (answered in workflow code)", n)
	}
	var results []string
	for _, e := range h.sink.events["run-1"] {
		if e.Type == runtime.EventToolResult {
			results = append(results, string(e.Data))
		}
	}
	if len(results) != 1 || !strings.Contains(results[0], "Invalid tool input") {
		t.Fatalf("tool results = %v", results)
	}
}

func TestModelRetryPublishesAttemptReset(t *testing.T) {
	var def *agent.Definition
	for _, d := range agent.Demo() {
		if d.Name == "invoice-analyst" {
			def = d
		}
	}
	h := newHarness(t, def, harnessOpts{})
	h.submit(time.Second, "req-1", "run-1", "What is overdue?")
	h.run(time.Hour)
	r := h.getRun("run-1")
	assertStatus(t, r, runtime.StatusCompleted)
	if r.Output == nil || *r.Output != "Overdue balance: $1,500. (synthetic fixture)" {
		t.Fatalf("output = %v", r.Output)
	}
	if !r.UsageIncomplete {
		t.Fatal("usage_incomplete = false after a retried model call")
	}
	if n := h.count(ActivityModel); n != 3 {
		t.Fatalf("model activity attempts = %d, want 3 (one retry)", n)
	}
	var reset *runtime.RunEvent
	for _, e := range h.sink.events["run-1"] {
		if e.Type == runtime.EventAttemptReset {
			reset = &e
		}
	}
	if reset == nil || string(reset.Data) != `{"attempt":1}` {
		t.Fatalf("attempt_reset = %+v; events %v", reset, h.sink.types("run-1"))
	}
}

func TestModelFailureFailsRunAndResumeRetries(t *testing.T) {
	def := scriptedAgent("fails", nil, model.ScriptStep{Text: "ok", FailAttempts: 2})
	def.Retry = &agent.RetryPolicy{Attempts: 2, BackoffSeconds: 0.1, MaxBackoffSeconds: 1}
	h := newHarness(t, def, harnessOpts{})
	h.submit(time.Second, "req-1", "run-1", "go")
	var failed runtime.RunResult
	h.at(time.Minute, func() { failed = h.getRun("run-1") })
	resume := h.update(2*time.Minute, UpdateControl, "ctl-1", ControlRequest{Action: ActionResume})
	h.run(time.Hour)
	assertStatus(t, failed, runtime.StatusFailed)
	if failed.Error == nil || failed.Error.Type != model.FailureConnection {
		t.Fatalf("error = %+v", failed.Error)
	}
	var cr ControlResult
	resume.decode(t, &cr)
	if cr.RunID == nil || *cr.RunID != "run-1" {
		t.Fatalf("resume = %+v", cr)
	}
	r := h.getRun("run-1")
	assertStatus(t, r, runtime.StatusCompleted)
	if !r.UsageIncomplete {
		t.Fatal("usage_incomplete = false")
	}
}

func TestApprovalAllowAndDeny(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run(map[bool]string{true: "allow", false: "deny"}[allow], func(t *testing.T) {
			def := scriptedAgent("ask", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAsk)},
				model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
				model.ScriptStep{Text: "done"},
			)
			h := newHarness(t, def, harnessOpts{})
			h.submit(time.Second, "req-1", "run-1", "go")
			var waiting runtime.RunResult
			var session SessionInfo
			h.at(time.Minute, func() { waiting, session = h.getRun("run-1"), h.getSession() })
			key := "run-1:1:c1"
			res := h.update(2*time.Minute, UpdateResolve, "res-1", ResolveRequest{Key: key, Allow: &allow, Resume: true})
			h.run(time.Hour)

			assertStatus(t, waiting, runtime.StatusAwaitingInput)
			if len(waiting.Pending) != 1 || waiting.Pending[0].ExecutionKey != key || waiting.Pending[0].Status != runtime.ToolApproval {
				t.Fatalf("pending = %+v", waiting.Pending)
			}
			if !session.Busy || session.Status != string(runtime.StatusAwaitingInput) {
				t.Fatalf("session while waiting = %+v", session)
			}
			var rr ResolveResult
			res.decode(t, &rr)
			assertStatus(t, rr.Run, runtime.StatusCompleted)
			wantTools := map[bool]int{true: 1, false: 0}[allow]
			if n := h.count(ActivityTool); n != wantTools {
				t.Fatalf("tool activities = %d, want %d", n, wantTools)
			}
			types := h.sink.types("run-1")
			if !slices.Contains(types, runtime.EventApprovalRequired) {
				t.Fatalf("no approval_required in %v", types)
			}
			// The second model call sees the tool's result.
			last := h.lastModelInput()
			msgs := last.Request.Messages
			if last.Step != 2 || len(msgs) != 3 {
				t.Fatalf("second model call: step %d, %d messages", last.Step, len(msgs))
			}
			wantResult := map[bool]string{true: `"hi"`, false: `"Permission denied"`}[allow]
			if c := msgs[2].Content; len(c) != 1 || c[0].Type != model.BlockToolResult || string(c[0].Content) != wantResult {
				t.Fatalf("tool result message = %+v, want content %s", msgs[2], wantResult)
			}
		})
	}
}

func TestResolveRejections(t *testing.T) {
	def := scriptedAgent("ask", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAsk)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
		model.ScriptStep{Text: "done"},
	)
	h := newHarness(t, def, harnessOpts{})
	early := h.update(500*time.Millisecond, UpdateResolve, "r0", ResolveRequest{Key: "x", Retry: true})
	h.submit(time.Second, "req-1", "run-1", "go")
	unknown := h.update(time.Minute, UpdateResolve, "r1", ResolveRequest{Key: "nope", Retry: true})
	notUncertain := h.update(time.Minute+time.Second, UpdateResolve, "r2", ResolveRequest{Key: "run-1:1:c1", Retry: true})
	h.run(time.Hour)
	for name, c := range map[string]struct {
		u    *updateResult
		want error
	}{
		"no run":        {early, runtime.ErrUnknownExecutionKey},
		"unknown key":   {unknown, runtime.ErrUnknownExecutionKey},
		"not uncertain": {notUncertain, runtime.ErrResolutionInvalid},
	} {
		if !c.u.rejected || !errors.Is(MapError(c.u.err), c.want) {
			t.Errorf("%s: rejected=%v err=%v, want %v", name, c.u.rejected, c.u.err, c.want)
		}
	}
	if !strings.Contains(MapError(notUncertain.err).Error(), "Tool has no uncertain outcome") {
		t.Errorf("detail = %q", MapError(notUncertain.err).Error())
	}
}

// flaky is a manual builtin that fails (non-transient) until ok is set.
type flaky struct {
	ok    atomic.Bool
	calls atomic.Int32
}

func (f *flaky) fn(_ context.Context, inv tool.Invocation) (tool.Outcome, error) {
	f.calls.Add(1)
	if !f.ok.Load() {
		return tool.Outcome{}, &tool.Failure{Type: "ToolError", Message: "connection reset after send"}
	}
	return tool.Outcome{Result: model.ToolResult{Content: tool.TextContent("sent")}}, nil
}

func manualAgent() *agent.Definition {
	return scriptedAgent("manual", []agent.ToolDef{customTool("send", tool.PolicyManual)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "send", `{}`)}},
		model.ScriptStep{Text: "sent it"},
	)
}

func TestUncertainManualToolResolutions(t *testing.T) {
	key := "run-1:1:c1"
	cases := []struct {
		name string
		req  ResolveRequest
		want runtime.RunStatus
	}{
		{"retry", ResolveRequest{Key: key, Retry: true, Resume: true}, runtime.StatusCompleted},
		{"result", ResolveRequest{Key: key, Result: &model.ToolResult{ToolCallID: "c1", Content: tool.TextContent("verified")}, Resume: true}, runtime.StatusCompleted},
		{"abort", ResolveRequest{Key: key, Abort: true}, runtime.StatusCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &flaky{}
			h := newHarness(t, manualAgent(), harnessOpts{builtins: map[string]tool.BuiltinFunc{"send": f.fn}})
			h.submit(time.Second, "req-1", "run-1", "go")
			var waiting runtime.RunResult
			h.at(time.Minute, func() { waiting = h.getRun("run-1"); f.ok.Store(true) })
			res := h.update(2*time.Minute, UpdateResolve, "res-1", c.req)
			h.run(time.Hour)
			assertStatus(t, waiting, runtime.StatusAwaitingInput)
			if len(waiting.Pending) != 1 || waiting.Pending[0].Status != runtime.ToolUncertain {
				t.Fatalf("pending = %+v", waiting.Pending)
			}
			var rr ResolveResult
			res.decode(t, &rr)
			assertStatus(t, rr.Run, c.want)
			wantCalls := map[string]int32{"retry": 2, "result": 1, "abort": 1}[c.name]
			if n := f.calls.Load(); n != wantCalls {
				t.Fatalf("tool calls = %d, want %d (manual: one attempt per dispatch)", n, wantCalls)
			}
			if !slices.Contains(h.sink.types("run-1"), runtime.EventRecoveryRequired) {
				t.Fatalf("no recovery_required in %v", h.sink.types("run-1"))
			}
			if c.name == "abort" && h.getSession().Busy {
				t.Fatal("session still busy after abort")
			}
		})
	}
}

func TestToolActivityFailureManualUncertainOthersRetried(t *testing.T) {
	t.Run("manual", func(t *testing.T) {
		h := newHarness(t, manualAgent(), harnessOpts{builtins: map[string]tool.BuiltinFunc{"send": (&flaky{}).fn}})
		h.env.OnActivity(ActivityTool, mock.Anything, mock.Anything).Return((*ToolOutput)(nil), errors.New("worker lost"))
		h.submit(time.Second, "req-1", "run-1", "go")
		h.run(time.Hour)
		r := h.getRun("run-1")
		assertStatus(t, r, runtime.StatusAwaitingInput)
		if len(r.Pending) != 1 || r.Pending[0].Status != runtime.ToolUncertain || r.Pending[0].Attempt != 1 {
			t.Fatalf("pending = %+v", r.Pending)
		}
		if n := h.count(ActivityTool); n != 1 {
			t.Fatalf("tool activity attempts = %d, want 1 for a manual tool", n)
		}
	})
	t.Run("safe", func(t *testing.T) {
		def := scriptedAgent("safe", []agent.ToolDef{customTool("fetch", tool.PolicySafe)},
			model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "fetch", `{}`)}},
			model.ScriptStep{Text: "fetched"},
		)
		var calls atomic.Int32
		h := newHarness(t, def, harnessOpts{builtins: map[string]tool.BuiltinFunc{"fetch": func(context.Context, tool.Invocation) (tool.Outcome, error) {
			calls.Add(1)
			return tool.Outcome{Result: model.ToolResult{Content: tool.TextContent("data")}}, nil
		}}})
		var lost atomic.Bool
		lost.Store(true)
		acts := NewActivities(WorkerDeps{Agents: h.reg, Events: h.sink, ToolOptions: tool.Options{Builtins: map[string]tool.BuiltinFunc{"fetch": func(context.Context, tool.Invocation) (tool.Outcome, error) {
			calls.Add(1)
			return tool.Outcome{Result: model.ToolResult{Content: tool.TextContent("data")}}, nil
		}}}})
		h.env.OnActivity(ActivityTool, mock.Anything, mock.Anything).Return(func(ctx context.Context, in ToolInput) (*ToolOutput, error) {
			if lost.Load() {
				return nil, errors.New("worker lost")
			}
			return acts.Tool(ctx, in)
		})
		h.submit(time.Second, "req-1", "run-1", "go")
		var failed runtime.RunResult
		h.at(time.Minute, func() { failed = h.getRun("run-1"); lost.Store(false) })
		resume := h.update(2*time.Minute, UpdateControl, "ctl-1", ControlRequest{Action: ActionResume})
		h.run(time.Hour)
		assertStatus(t, failed, runtime.StatusFailed)
		if failed.Error == nil || !strings.Contains(failed.Error.Message, "worker lost") {
			t.Fatalf("error = %+v", failed.Error)
		}
		var cr ControlResult
		resume.decode(t, &cr)
		assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
		if n := h.count(ActivityTool); n != 4 {
			t.Fatalf("tool activity attempts = %d, want 3 (retried) + 1 after resume", n)
		}
		if calls.Load() != 1 {
			t.Fatalf("tool calls = %d", calls.Load())
		}
	})
}

func TestToolFailureRetriedThenErrorResult(t *testing.T) {
	def := scriptedAgent("transient", []agent.ToolDef{customTool("fetch", tool.PolicyIdempotent)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "fetch", `{}`)}},
		model.ScriptStep{Text: "gave up"},
	)
	var calls atomic.Int32
	h := newHarness(t, def, harnessOpts{builtins: map[string]tool.BuiltinFunc{"fetch": func(context.Context, tool.Invocation) (tool.Outcome, error) {
		calls.Add(1)
		return tool.Outcome{}, &tool.Failure{Type: "TransientToolError", Message: "503", Transient: true}
	}}})
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(time.Hour)
	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	if calls.Load() != 3 {
		t.Fatalf("tool calls = %d, want 3 (retry.attempts)", calls.Load())
	}
	found := false
	for _, e := range h.sink.events["run-1"] {
		found = found || (e.Type == runtime.EventToolResult && strings.Contains(string(e.Data), "Tool execution error: 503"))
	}
	if !found {
		t.Fatalf("no error result event: %v", h.sink.types("run-1"))
	}
}

func TestSubmitDedupeConflictBusy(t *testing.T) {
	h := newHarness(t, manualAgent(), harnessOpts{builtins: map[string]tool.BuiltinFunc{"send": (&flaky{}).fn}})
	first := h.submit(time.Second, "req-1", "run-1", "go")
	// A second update ID for the same request (as after continue-as-new,
	// when the server no longer remembers the update ID).
	again := h.update(time.Minute, UpdateSubmit, "req-1-again", SubmitRequest{Message: json.RawMessage(`"go"`), RequestID: "req-1", RunID: "run-x"})
	conflict := h.update(time.Minute+time.Second, UpdateSubmit, "req-1-conflict", SubmitRequest{Message: json.RawMessage(`"other"`), RequestID: "req-1", RunID: "run-y"})
	busy := h.submit(time.Minute+2*time.Second, "req-2", "run-2", "next")
	invalid := h.update(time.Minute+3*time.Second, UpdateSubmit, "req-3", SubmitRequest{Message: json.RawMessage(`"  "`), RequestID: "req-3", RunID: "run-3"})
	h.run(time.Hour)
	var a, b SubmitResult
	first.decode(t, &a)
	again.decode(t, &b)
	if !a.Created || b.Created || b.Run.RunID != "run-1" {
		t.Fatalf("first = %+v, again = %+v", a, b)
	}
	for name, c := range map[string]struct {
		u    *updateResult
		want error
	}{
		"conflict": {conflict, runtime.ErrRequestConflict},
		"busy":     {busy, runtime.ErrSessionBusy},
		"invalid":  {invalid, runtime.ErrInvalidMessage},
	} {
		if !c.u.rejected || !errors.Is(MapError(c.u.err), c.want) {
			t.Errorf("%s: rejected=%v err=%v, want %v", name, c.u.rejected, c.u.err, c.want)
		}
	}
	if s := h.getSession(); len(s.Runs) != 1 {
		t.Fatalf("runs = %v", s.Runs)
	}
}

// slowTool mocks the tool activity: it completes after d of workflow time.
func slowTool(h *harness, d time.Duration) {
	acts := NewActivities(WorkerDeps{Agents: h.reg, Events: h.sink, ToolOptions: tool.Options{Builtins: h.builtins}})
	h.env.OnActivity(ActivityTool, mock.Anything, mock.Anything).After(d).Return(func(ctx context.Context, in ToolInput) (*ToolOutput, error) {
		return acts.Tool(ctx, in)
	})
}

func TestPauseAtNextBoundaryThenResume(t *testing.T) {
	def := scriptedAgent("pause", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAllow)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
		model.ScriptStep{Text: "done"},
	)
	h := newHarness(t, def, harnessOpts{})
	slowTool(h, time.Minute)
	h.submit(time.Second, "req-1", "run-1", "go")
	pause := h.update(10*time.Second, UpdateControl, "ctl-1", ControlRequest{Action: ActionPaused})
	var paused runtime.RunResult
	h.at(10*time.Minute, func() { paused = h.getRun("run-1") })
	resume := h.update(11*time.Minute, UpdateControl, "ctl-2", ControlRequest{Action: ActionResume})
	h.run(time.Hour)
	var pr ControlResult
	pause.decode(t, &pr)
	if pr.Run == nil || pr.Run.Status != runtime.StatusRunning {
		t.Fatalf("pause answered %+v; the tool call was still in flight", pr.Run)
	}
	assertStatus(t, paused, runtime.StatusPaused)
	var rr ControlResult
	resume.decode(t, &rr)
	if rr.RunID == nil || *rr.RunID != "run-1" {
		t.Fatalf("resume = %+v", rr)
	}
	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	if n := h.count(ActivityModel); n != 2 {
		t.Fatalf("model activities = %d", n)
	}
}

func TestCancelInterruptsInFlightManualTool(t *testing.T) {
	h := newHarness(t, manualAgent(), harnessOpts{builtins: map[string]tool.BuiltinFunc{"send": (&flaky{}).fn}})
	slowTool(h, time.Hour)
	h.submit(time.Second, "req-1", "run-1", "go")
	cancel := h.update(10*time.Second, UpdateControl, "ctl-1", ControlRequest{Action: ActionCancelled})
	next := h.submit(time.Minute, "req-2", "run-2", "again")
	h.run(2 * time.Hour)
	var cr ControlResult
	cancel.decode(t, &cr)
	if cr.Run == nil {
		t.Fatal("cancel returned no run")
	}
	assertStatus(t, *cr.Run, runtime.StatusCancelled)
	if len(cr.Run.Pending) != 1 || cr.Run.Pending[0].Status != runtime.ToolUncertain {
		t.Fatalf("pending after cancel = %+v", cr.Run.Pending)
	}
	var sr SubmitResult
	next.decode(t, &sr)
	if !sr.Created {
		t.Fatal("a new run after cancel was refused")
	}
}

func TestDefinitionMismatchRefused(t *testing.T) {
	def := scriptedAgent("drift", nil, model.ScriptStep{Text: "hi"})
	changed := scriptedAgent("drift", nil, model.ScriptStep{Text: "hi"})
	changed.SystemPrompt = "a different prompt"
	h := newHarness(t, def, harnessOpts{workerDef: changed})
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(time.Hour)
	r := h.getRun("run-1")
	assertStatus(t, r, runtime.StatusFailed)
	if r.Error == nil || r.Error.Message != AgentMismatchMessage {
		t.Fatalf("error = %+v", r.Error)
	}
	if n := h.count(ActivityModel); n != 1 {
		t.Fatalf("model activity attempts = %d, want 1 (non-retryable)", n)
	}
}

func TestContinueAsNewCarriesSession(t *testing.T) {
	def := scriptedAgent("can", nil, model.ScriptStep{Text: "first"}, model.ScriptStep{Text: "second"})
	h := newHarness(t, def, harnessOpts{})
	h.submit(time.Second, "req-1", "run-1", "one")
	h.at(time.Minute, func() { h.env.SetContinueAsNewSuggested(true) })
	// Any update wakes the workflow so it sees the suggestion.
	h.update(time.Minute+time.Second, UpdateControl, "ctl-1", ControlRequest{Action: ActionPaused})
	h.env.ExecuteWorkflow(SessionWorkflow, h.input)
	var can *workflow.ContinueAsNewError
	if err := h.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow error = %v, want continue-as-new", err)
	}
	if can.WorkflowType.Name != WorkflowType {
		t.Fatalf("continued as %q", can.WorkflowType.Name)
	}
	var next SessionInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.SessionID != "s-1" || next.Owner != "alice" || !slices.Equal(next.RunOrder, []string{"run-1"}) ||
		next.Runs["run-1"].State.Status != runtime.StatusCompleted || next.Requests["req-1"].RunID != "run-1" || next.EventSeq == 0 {
		t.Fatalf("carried session = %+v", next)
	}

	// The next run of the continued workflow sees the conversation so far
	// and the old request is still deduplicated.
	h2 := newHarness(t, def, harnessOpts{})
	h2.input = next
	dup := h2.submit(time.Second, "req-1", "run-z", "one")
	sub := h2.submit(2*time.Second, "req-2", "run-2", "two")
	h2.run(time.Hour)
	var d, s SubmitResult
	dup.decode(t, &d)
	sub.decode(t, &s)
	if d.Created || d.Run.RunID != "run-1" || !s.Created {
		t.Fatalf("dup = %+v, second = %+v", d, s)
	}
	r := h2.getRun("run-2")
	assertStatus(t, r, runtime.StatusCompleted)
	if r.Output == nil || *r.Output != "first" {
		// the scripted model answers by step: step 1 of run 2 is script[0]
		t.Fatalf("output = %v", r.Output)
	}
	if old := h2.getRun("run-1"); old.Status != runtime.StatusCompleted || old.Output == nil || *old.Output != "first" {
		t.Fatalf("old run = %+v", old)
	}
}

func TestPublishFailureNeverBlocksDurableWork(t *testing.T) {
	def := scriptedAgent("nosink", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAllow)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
		model.ScriptStep{Text: "done"},
	)
	h := newHarness(t, def, harnessOpts{})
	h.sink.fail = true
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(time.Hour)
	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	if n := h.count(ActivityPublish); n != 3 {
		t.Fatalf("publish attempts = %d, want 3", n)
	}
}

func TestMapError(t *testing.T) {
	for _, sentinel := range []error{
		runtime.ErrSessionBusy, runtime.ErrRequestConflict, runtime.ErrUnknownExecutionKey,
		runtime.ErrNotAwaitingResolution, runtime.ErrResolutionInvalid, runtime.ErrInvalidMessage, runtime.ErrNotFound,
	} {
		err := MapError(newAppError(sentinel, "detail"))
		if !errors.Is(err, sentinel) || err.Error() != "detail" {
			t.Errorf("MapError(%v) = %v", sentinel, err)
		}
	}
	plain := errors.New("x")
	if MapError(plain) != plain || MapError(nil) != nil { //nolint:errorlint // identity: an unmapped error comes back as itself
		t.Error("MapError changed an unmapped error")
	}
}

func TestSessionDeadlineCancelsRun(t *testing.T) {
	def := scriptedAgent("deadline", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAllow)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
		model.ScriptStep{Text: "too late"},
	)
	def.MaxSessionDurationSeconds = 30
	h := newHarness(t, def, harnessOpts{})
	slowTool(h, time.Minute) // the tool call returns after the deadline
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(2 * time.Hour)
	r := h.getRun("run-1")
	assertStatus(t, r, runtime.StatusCancelled)
	if r.StopReason == nil || *r.StopReason != "timeout" || r.Error == nil || r.Error.Type != "TimeoutError" {
		t.Fatalf("stop reason %v, error %+v", r.StopReason, r.Error)
	}
	if n := h.count(ActivityModel); n != 1 {
		t.Fatalf("model activities = %d, want 1 (no call after the deadline)", n)
	}
}

// meetTool is the builtin "meet" whose calls each wait (at most
// 5s) until n calls are in flight at once, and answer "met" or "alone".
func meetTool(concurrent bool, n int) (agent.ToolDef, map[string]tool.BuiltinFunc) {
	var mu sync.Mutex
	inFlight, arrived := 0, make(chan struct{})
	fn := func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
		mu.Lock()
		inFlight++
		if inFlight == n {
			close(arrived)
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		text := "met"
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
			text = "alone"
		}
		return tool.Outcome{Result: model.ToolResult{Content: tool.TextContent(text)}}, nil
	}
	def := agent.ToolDef{Config: tool.Config{Name: "meet", Kind: tool.KindBuiltin, Builtin: "meet", ReplayPolicy: tool.PolicySafe, Concurrent: concurrent}}
	return def, map[string]tool.BuiltinFunc{"meet": fn}
}

// TestConcurrentToolsRunInParallel: the tool activities of an
// all-concurrent batch run at the same time, and the next model call gets
// every result in call order.
func TestConcurrentToolsRunInParallel(t *testing.T) {
	td, builtins := meetTool(true, 3)
	def := scriptedAgent("meet", []agent.ToolDef{td},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("a", "meet", `{}`), toolCall("b", "meet", `{}`), toolCall("c", "meet", `{}`)}},
		model.ScriptStep{Text: "done"},
	)
	h := newHarness(t, def, harnessOpts{builtins: builtins})
	h.submit(time.Second, "req-1", "run-1", "hello")
	h.run(time.Hour)
	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	if n := h.count(ActivityTool); n != 3 {
		t.Fatalf("tool activities = %d, want 3", n)
	}
	var got []string
	for _, m := range h.lastModelInput().Request.Messages {
		for _, b := range m.Content {
			if b.ToolUseID != "" {
				got = append(got, b.ToolUseID+"="+string(b.Content))
			}
		}
	}
	if want := []string{`a="met"`, `b="met"`, `c="met"`}; !slices.Equal(got, want) {
		t.Fatalf("tool results = %v, want %v (calls that ran alone did not run in parallel)", got, want)
	}
}

// TestSessionDeadlineStopsRetries: a tool whose attempts keep failing is
// not started again once the session deadline has passed (the deadline
// bounds the activity with its retries, not only each attempt).
func TestSessionDeadlineStopsRetries(t *testing.T) {
	tl := echoTool(tool.PolicySafe, tool.PermissionAllow)
	tl.Retry = &tool.Retry{Attempts: 20, BackoffSeconds: 0.1, MaxBackoffSeconds: 0.1}
	def := scriptedAgent("deadline-retries", []agent.ToolDef{tl},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
		model.ScriptStep{Text: "too late"},
	)
	def.MaxSessionDurationSeconds = 30
	h := newHarness(t, def, harnessOpts{})
	var attempts atomic.Int32
	h.env.OnActivity(ActivityTool, mock.Anything, mock.Anything).After(5 * time.Second).Return(func(ctx context.Context, in ToolInput) (*ToolOutput, error) {
		attempts.Add(1)
		return nil, temporal.NewApplicationError("busy", "TransientToolError")
	})
	h.submit(time.Second, "req-1", "run-1", "go")
	h.run(2 * time.Hour)
	assertStatus(t, h.getRun("run-1"), runtime.StatusCancelled)
	// 5 s an attempt: at most 7 start within the 30 s (the tool allows 20).
	if n := attempts.Load(); n < 2 || n > 7 {
		t.Fatalf("%d tool attempts, want retries within the 30s deadline only", n)
	}
}

// TestNoToolStartedAfterDeadline: once the session deadline has passed
// (here while the first call of a batch ran), the next call of the batch is
// not started (no tool_call_start, its entry stays prepared, never
// uncertain), as the local engine calls no tool after a cancel or the
// deadline (runEntry).
func TestNoToolStartedAfterDeadline(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "patched", true: "legacy"}[legacy], func(t *testing.T) {
			legacyCallAfterInterrupt = legacy
			defer func() { legacyCallAfterInterrupt = false }()
			def := scriptedAgent("deadline-batch", []agent.ToolDef{customTool("send", tool.PolicyManual)},
				model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "send", `{}`), toolCall("c2", "send", `{}`)}},
				model.ScriptStep{Text: "too late"},
			)
			def.MaxSessionDurationSeconds = 30
			f := &flaky{}
			f.ok.Store(true)
			h := newHarness(t, def, harnessOpts{builtins: map[string]tool.BuiltinFunc{"send": f.fn}})
			slowTool(h, time.Minute) // the first call returns after the deadline
			h.submit(time.Second, "req-1", "run-1", "go")
			h.run(2 * time.Hour)
			r := h.getRun("run-1")
			assertStatus(t, r, runtime.StatusCancelled)
			if r.StopReason == nil || *r.StopReason != "timeout" {
				t.Fatalf("stop reason = %v", r.StopReason)
			}
			starts := 0
			for _, e := range h.sink.events["run-1"] {
				if e.Type == runtime.EventToolCallStart {
					starts++
				}
			}
			if legacy {
				// Before PatchNoCallAfterInterrupt: c2 was opened, never ran.
				if len(r.Pending) != 1 || r.Pending[0].Status != runtime.ToolUncertain || starts != 2 {
					t.Fatalf("legacy: pending = %+v, %d tool_call_start events", r.Pending, starts)
				}
				return
			}
			if len(r.Pending) != 0 {
				t.Fatalf("pending = %+v, want none (the second call never started)", r.Pending)
			}
			if starts != 1 || h.count(ActivityTool) != 1 {
				t.Fatalf("%d tool_call_start events, %d tool activities, want 1 and 1: %v", starts, h.count(ActivityTool), h.sink.types("run-1"))
			}
		})
	}
}

// attemptsAcrossResume runs a one-call agent of td whose tool activity
// fails with lose(in, attempt) until the run has failed; then the run is
// resumed and its call succeeds. It returns the entry attempt of every
// tool activity attempt, in order.
func attemptsAcrossResume(t *testing.T, td agent.ToolDef, lose func(in ToolInput, attempt int) error) []int {
	t.Helper()
	def := scriptedAgent("safe", []agent.ToolDef{td},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "fetch", `{}`)}},
		model.ScriptStep{Text: "fetched"},
	)
	fetch := func(context.Context, tool.Invocation) (tool.Outcome, error) {
		return tool.Outcome{Result: model.ToolResult{Content: tool.TextContent("data")}}, nil
	}
	h := newHarness(t, def, harnessOpts{builtins: map[string]tool.BuiltinFunc{"fetch": fetch}})
	acts := NewActivities(WorkerDeps{Agents: h.reg, Events: h.sink, ToolOptions: tool.Options{Builtins: map[string]tool.BuiltinFunc{"fetch": fetch}}})
	var mu sync.Mutex
	var attempts []int
	var lost atomic.Bool
	lost.Store(true)
	h.env.OnActivity(ActivityTool, mock.Anything, mock.Anything).Return(func(ctx context.Context, in ToolInput) (*ToolOutput, error) {
		n := in.Entry.Attempt + int(activity.GetInfo(ctx).Attempt) - 1
		mu.Lock()
		attempts = append(attempts, n)
		mu.Unlock()
		if lost.Load() {
			return nil, lose(in, n)
		}
		return acts.Tool(ctx, in)
	})
	h.submit(time.Second, "req-1", "run-1", "go")
	h.at(time.Minute, func() { assertStatus(t, h.getRun("run-1"), runtime.StatusFailed); lost.Store(false) })
	h.update(2*time.Minute, UpdateControl, "ctl-1", ControlRequest{Action: ActionResume})
	h.run(time.Hour)
	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	return attempts
}

// TestToolAttemptsOnlyGrow: the attempt numbers of an entry only grow: a
// tool activity lost on every attempt (a lost worker) leaves the entry at
// its last attempt, so the call a resume makes is the next one, never a
// repeat.
func TestToolAttemptsOnlyGrow(t *testing.T) {
	attempts := attemptsAcrossResume(t, customTool("fetch", tool.PolicySafe), func(ToolInput, int) error {
		return errors.New("worker lost")
	})
	if want := []int{1, 2, 3, 4}; !slices.Equal(attempts, want) {
		t.Fatalf("tool attempts = %v, want %v", attempts, want)
	}
}

// TestWorkerShutdownDuringToolIsNoCancel: a tool call whose context ends
// because its worker shuts down (not because the run was cancelled) is a
// lost call, as before: a manual tool becomes uncertain and waits for a
// decision, a safe one fails the run resumably. It never cancels the run,
// as the local engine's shutdown leaves the run as it is.
func TestWorkerShutdownDuringToolIsNoCancel(t *testing.T) {
	for _, policy := range []string{tool.PolicyManual, tool.PolicySafe} {
		t.Run(policy, func(t *testing.T) {
			bg, shutdown := context.WithCancelCause(context.Background())
			defer shutdown(nil)
			def := scriptedAgent("shutdown", []agent.ToolDef{customTool("send", policy)},
				model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "send", `{}`)}},
				model.ScriptStep{Text: "sent it"},
			)
			h := newHarness(t, def, harnessOpts{builtins: map[string]tool.BuiltinFunc{"send": func(ctx context.Context, _ tool.Invocation) (tool.Outcome, error) {
				shutdown(worker.ErrWorkerShutdown) // the worker stops during the call
				<-ctx.Done()
				return tool.Outcome{}, ctx.Err()
			}}})
			h.env.SetWorkerOptions(worker.Options{BackgroundActivityContext: bg})
			h.submit(time.Second, "req-1", "run-1", "go")
			h.run(time.Hour)
			r := h.getRun("run-1")
			if r.StopReason != nil {
				t.Fatalf("stop reason = %q, want none: a worker shutdown is no cancel", *r.StopReason)
			}
			if policy == tool.PolicyManual {
				assertStatus(t, r, runtime.StatusAwaitingInput)
				if len(r.Pending) != 1 || r.Pending[0].Status != runtime.ToolUncertain {
					t.Fatalf("pending = %+v", r.Pending)
				}
				return
			}
			assertStatus(t, r, runtime.StatusFailed)
			if r.Error == nil || !strings.Contains(r.Error.Message, "worker is now shutdown") {
				t.Fatalf("error = %+v", r.Error)
			}
		})
	}
}

// TestToolAttemptsGrowAfterTimeout: a tool activity whose last attempt
// timed out (a lost worker) after an earlier attempt failed leaves its
// entry at that last attempt. The server hands the workflow the timeout
// with the earlier attempt's failure as its cause (RetryLastFailure); its
// details name the earlier attempt, not the last one, so a resume must not
// take them and repeat the last attempt's number.
func TestToolAttemptsGrowAfterTimeout(t *testing.T) {
	td := customTool("fetch", tool.PolicySafe)
	td.Retry = &tool.Retry{Attempts: 2, BackoffSeconds: 0.1, MaxBackoffSeconds: 0.1}
	attempts := attemptsAcrossResume(t, td, func(in ToolInput, n int) error {
		// Attempt 1 fails retryably, as the tool activity reports it;
		// attempt 2 is lost: the server times it out, with attempt 1's
		// failure as the cause.
		first := temporal.NewApplicationErrorWithOptions("503", "TransientToolError", temporal.ApplicationErrorOptions{Details: []any{in.Entry.Attempt}})
		if n == in.Entry.Attempt {
			return first
		}
		return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, first)
	})
	if want := []int{1, 2, 3}; !slices.Equal(attempts, want) {
		t.Fatalf("tool attempts = %v, want %v", attempts, want)
	}
}
