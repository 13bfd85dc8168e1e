package temporal

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"hxd/internal/agent"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// timelineOf queries what the workflow keeps for a run's timeline and
// builds it as Engine.RunTimeline does, with the events the sink got.
func (h *harness) timelineOf(runID string) *runtime.RunTimeline {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(QueryGetTimeline, runID)
	if err != nil {
		h.t.Fatalf("get_timeline %s: %v", runID, err)
	}
	var src runtime.TimelineSource
	if err := v.Get(&src); err != nil {
		h.t.Fatal(err)
	}
	for _, ev := range h.sink.events[runID] {
		if runtime.MarkEvent(ev.Type) {
			src.Events = append(src.Events, ev)
		}
	}
	return runtime.BuildTimeline(&src)
}

func barShapes(tl *runtime.RunTimeline) []string {
	out := []string{}
	for _, a := range tl.Attempts {
		s := fmt.Sprintf("%s %s#%d %s", a.Lane, a.StepID, a.Span.Attempt, a.Span.Outcome)
		if a.Span.EndedAt.IsZero() {
			s += " open"
		}
		if a.Approval != nil {
			s += " approval"
		}
		out = append(out, s)
	}
	return out
}

func markNames(tl *runtime.RunTimeline) []string {
	out := []string{}
	for _, m := range tl.Marks {
		out = append(out, m.Type)
	}
	return out
}

// TestTimelineDemoInvoice: the workflow keeps the attempts of every step
// (RunRecord.Steps/Tools for the earlier ones) with workflow times; the
// model attempts Temporal retried inside one activity show as one bar,
// numbered as the last attempt.
func TestTimelineDemoInvoice(t *testing.T) {
	var def *agent.Definition
	for _, d := range agent.Demo() {
		if d.Name == "invoice-analyst" {
			def = d
		}
	}
	h := newHarness(t, def, harnessOpts{})
	h.submit(time.Second, "req-1", "run-1", "What is overdue?")
	var tl *runtime.RunTimeline
	h.at(time.Hour-time.Second, func() { tl = h.timelineOf("run-1") })
	h.run(time.Hour)
	if tl.Status != runtime.StatusCompleted || tl.RunID != "run-1" || tl.SessionID != "s-1" {
		t.Fatalf("timeline run = %+v", tl)
	}
	want := []string{"model 1#2 succeeded", "tool:overdue_balance 1#1 succeeded", "model 2#1 succeeded"}
	if got := barShapes(tl); !slices.Equal(got, want) {
		t.Fatalf("bars = %v\nwant   %v", got, want)
	}
	if len(tl.Lanes) != 2 || tl.Lanes[1].ID != "tool:overdue_balance" {
		t.Fatalf("lanes = %+v", tl.Lanes)
	}
	for i, a := range tl.Attempts {
		if a.Span.StartedAt.IsZero() || a.Span.EndedAt.Before(a.Span.StartedAt) ||
			(i > 0 && a.Span.StartedAt.Before(tl.Attempts[i-1].Span.StartedAt)) {
			t.Fatalf("bar %d times = %+v", i, a.Span)
		}
	}
}

// TestTimelineApproval: a call waiting for its approval is an open
// awaiting_approval bar; approved and resumed, the run's tool bar carries
// the approval and the marks show it required, given and the resume.
func TestTimelineApproval(t *testing.T) {
	def := scriptedAgent("ask", []agent.ToolDef{echoTool(tool.PolicySafe, tool.PermissionAsk)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "echo", `{"text":"hi"}`)}},
		model.ScriptStep{Text: "done"},
	)
	h := newHarness(t, def, harnessOpts{})
	h.submit(time.Second, "req-1", "run-1", "go")
	var waiting, done *runtime.RunTimeline
	h.at(time.Minute, func() { waiting = h.timelineOf("run-1") })
	allow := true
	h.update(2*time.Minute, UpdateResolve, "res-1", ResolveRequest{Key: "run-1:1:c1", Allow: &allow, Resume: true})
	h.at(time.Hour-time.Second, func() { done = h.timelineOf("run-1") })
	h.run(time.Hour)

	if got, want := barShapes(waiting), []string{"model 1#1 succeeded", "tool:echo 1#1 awaiting_approval open approval"}; !slices.Equal(got, want) {
		t.Fatalf("bars while waiting = %v\nwant %v", got, want)
	}
	if got, want := barShapes(done), []string{"model 1#1 succeeded", "tool:echo 1#1 succeeded approval", "model 2#1 succeeded"}; !slices.Equal(got, want) {
		t.Fatalf("bars = %v\nwant   %v", got, want)
	}
	// The sink's events carry no created_at (Redis assigns it): only the
	// marks the workflow keeps itself are checked here.
	if got := markNames(done); !slices.Contains(got, "approval_given") || !slices.Contains(got, "resumed") {
		t.Fatalf("marks = %v, want approval_given and resumed among them", got)
	}
}
