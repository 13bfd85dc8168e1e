package temporal

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"hxd/internal/agent"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// notEligible reports whether an update was refused as ErrTypeNotEligible.
func refusedNotEligible(u *updateResult) bool {
	var app *temporal.ApplicationError
	return u.rejected && errors.As(u.err, &app) && app.Type() == ErrTypeNotEligible
}

// TestRetireFinishedSession: the retire update refuses a session without
// a run and one whose run finished after the cutoff; it retires a
// finished one, after which every other update and query is refused as
// not found, get_retired lists the runs with their request ids, and the
// workflow completes.
func TestRetireFinishedSession(t *testing.T) {
	def := scriptedAgent("plain", nil, model.ScriptStep{Text: "done"})
	h := newHarness(t, def, harnessOpts{})
	far := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	empty := h.update(time.Second, UpdateRetire, "retire-0", RetireRequest{FinishedBefore: far})
	h.submit(2*time.Second, "req-1", "run-1", "go")
	h.submit(time.Minute, "req-2", "run-2", "again")
	early := h.update(2*time.Minute, UpdateRetire, "retire-1", RetireRequest{FinishedBefore: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)})
	// At once: the retire and a submit (which the completing workflow
	// refuses or never takes).
	retire, after := &updateResult{}, &updateResult{}
	h.at(3*time.Minute, func() {
		for _, u := range []struct {
			res      *updateResult
			name, id string
			arg      any
		}{
			{retire, UpdateRetire, "retire-2", RetireRequest{FinishedBefore: far}},
			{after, UpdateSubmit, "req-3", SubmitRequest{Message: []byte(`"more"`), RequestID: "req-3", RunID: "run-3"}},
		} {
			h.env.UpdateWorkflow(u.name, u.id, &testsuite.TestUpdateCallback{
				OnAccept: func() {},
				OnReject: func(err error) { u.res.done, u.res.rejected, u.res.err = true, true, err },
				OnComplete: func(v any, err error) {
					u.res.done, u.res.err, u.res.value = true, err, v
				},
			}, u.arg)
		}
	})
	h.run(time.Hour)

	if !refusedNotEligible(empty) || !refusedNotEligible(early) {
		t.Fatalf("no run: %+v; too recent: %+v", empty, early)
	}
	var res RetireResult
	retire.decode(t, &res)
	want := []RetiredRun{{RunID: "run-1", RequestID: "req-1"}, {RunID: "run-2", RequestID: "req-2"}}
	if !res.Retired || res.Owner != "alice" || res.SessionID != "s-1" || len(res.Runs) != 2 || res.Runs[0] != want[0] || res.Runs[1] != want[1] {
		t.Fatalf("retired = %+v", res)
	}
	if after.done && (!after.rejected || !errors.Is(MapError(after.err), runtime.ErrNotFound)) {
		t.Fatalf("submit after retire: %+v", after)
	}
	if !h.env.IsWorkflowCompleted() || h.env.GetWorkflowError() != nil {
		t.Fatalf("the retired workflow completes: %v", h.env.GetWorkflowError())
	}
	if _, err := h.env.QueryWorkflow(QueryGetSession); !errors.Is(MapError(err), runtime.ErrNotFound) {
		t.Fatalf("get_session after retire: %v", err)
	}
	if _, err := h.env.QueryWorkflow(QueryGetRun, "run-1"); !errors.Is(MapError(err), runtime.ErrNotFound) {
		t.Fatalf("get_run after retire: %v", err)
	}
	v, err := h.env.QueryWorkflow(QueryGetRetired)
	if err != nil {
		t.Fatal(err)
	}
	var got RetireResult
	if err := v.Get(&got); err != nil || !got.Retired || len(got.Runs) != 2 {
		t.Fatalf("get_retired = %+v, %v", got, err)
	}
}

// TestRetireNeverUnfinished: a running run (a tool call in flight), a run
// awaiting an approval and a failed run are never retired.
func TestRetireNeverUnfinished(t *testing.T) {
	far := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Run("running", func(t *testing.T) {
		def := scriptedAgent("slow", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAllow)},
			model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
			model.ScriptStep{Text: "done"},
		)
		h := newHarness(t, def, harnessOpts{})
		slowTool(h, 10*time.Minute)
		h.submit(time.Second, "req-1", "run-1", "go")
		retire := h.update(time.Minute, UpdateRetire, "retire-1", RetireRequest{FinishedBefore: far})
		var after runtime.RunResult
		h.at(20*time.Minute, func() { after = h.getRun("run-1") })
		h.run(time.Hour)
		if !refusedNotEligible(retire) {
			t.Fatalf("retire of a running run: %+v", retire)
		}
		assertStatus(t, after, runtime.StatusCompleted)
	})
	t.Run("awaiting approval", func(t *testing.T) {
		def := scriptedAgent("ask", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAsk)},
			model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
			model.ScriptStep{Text: "done"},
		)
		h := newHarness(t, def, harnessOpts{})
		h.submit(time.Second, "req-1", "run-1", "go")
		retire := h.update(time.Minute, UpdateRetire, "retire-1", RetireRequest{FinishedBefore: far})
		var waiting runtime.RunResult
		h.at(2*time.Minute, func() { waiting = h.getRun("run-1") })
		h.run(time.Hour)
		assertStatus(t, waiting, runtime.StatusAwaitingInput)
		if !refusedNotEligible(retire) {
			t.Fatalf("retire of an awaiting run: %+v", retire)
		}
	})
}
