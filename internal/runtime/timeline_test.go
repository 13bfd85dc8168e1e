package runtime_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
)

// t0 is the start of every table run's clock.
var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func span(n int, from, to float64, outcome string) hxruntime.AttemptSpan {
	sp := hxruntime.AttemptSpan{Attempt: n, StartedAt: at(from), Outcome: outcome}
	if to > 0 {
		sp.EndedAt = at(to)
	}
	return sp
}

func entry(step int, name, id, policy string, spans ...hxruntime.AttemptSpan) hxruntime.ToolEntry {
	return hxruntime.ToolEntry{
		Call: model.ToolCall{ID: id, Name: name}, ExecutionKey: fmt.Sprintf("run-1:%d:%s", step, id),
		Policy: policy, Attempt: len(spans), Attempts: spans,
	}
}

func runResultEvent(step string, s float64, status hxruntime.RunStatus, errMsg string) hxruntime.RunEvent {
	data := map[string]any{"status": status}
	if errMsg != "" {
		data["error"] = map[string]any{"type": "X", "message": errMsg}
	}
	raw, _ := json.Marshal(data)
	return hxruntime.RunEvent{Type: hxruntime.EventRunResult, Data: raw, StepID: step, CreatedAt: at(s)}
}

// bar is an attempt as the tests compare it: lane/step/attempt/outcome,
// then its times in seconds from t0 (end "-" while open) and extras.
func bar(a hxruntime.TimelineAttempt) string {
	end := "-"
	if !a.Span.EndedAt.IsZero() {
		end = fmt.Sprint(a.Span.EndedAt.Sub(t0).Seconds())
	}
	s := fmt.Sprintf("%s %s#%d %s %v..%s", a.Lane, a.StepID, a.Span.Attempt, a.Span.Outcome, a.Span.StartedAt.Sub(t0).Seconds(), end)
	if a.Span.RetryWaitSeconds > 0 {
		s += fmt.Sprintf(" wait=%v", a.Span.RetryWaitSeconds)
	}
	if a.Span.Error != nil {
		s += " err=" + a.Span.Error.Type
	}
	if a.Span.Resolution != "" {
		s += " resolution=" + a.Span.Resolution
	}
	if ap := a.Approval; ap != nil {
		s += fmt.Sprintf(" approval@%v", ap.RequestedAt.Sub(t0).Seconds())
		if ap.Approved != nil {
			s += fmt.Sprintf(" decided@%v approved=%v", ap.DecidedAt.Sub(t0).Seconds(), *ap.Approved)
		}
	}
	return s
}

func mark(m hxruntime.TimelineMark) string {
	s := fmt.Sprintf("%s@%v", m.Type, m.At.Sub(t0).Seconds())
	if m.ExecutionKey != "" {
		s += " " + m.ExecutionKey
	}
	if m.Detail != "" {
		s += " " + m.Detail
	}
	return s
}

// TestBuildTimeline: the pure builder turns stored attempt spans, tool
// entries, resumptions and events into lanes, bars and marks.
func TestBuildTimeline(t *testing.T) {
	t.Parallel()
	failed := func(sp hxruntime.AttemptSpan, typ string, wait float64) hxruntime.AttemptSpan {
		sp.Error, sp.RetryWaitSeconds = &hxruntime.RunError{Type: typ, Message: typ + " happened"}, wait
		return sp
	}
	approved := func(e hxruntime.ToolEntry, req, dec float64, ok bool) hxruntime.ToolEntry {
		e.ApprovalRequestedAt = at(req)
		if dec > 0 {
			e.ApprovalDecidedAt = at(dec)
			if ok {
				e.Approved = hxruntime.Ptr(true)
			}
		}
		return e
	}
	resolved := func(sp hxruntime.AttemptSpan, how string, when float64, outcome string) hxruntime.AttemptSpan {
		sp.Resolution, sp.ResolvedAt, sp.Outcome = how, at(when), outcome
		return sp
	}
	for _, tc := range []struct {
		name      string
		src       hxruntime.TimelineSource
		lanes     []string
		bars      []string
		marks     []string
		lastModel string // optional: the model of the last model bar
	}{
		{
			name: "model retry with its wait, then a tool call",
			src: hxruntime.TimelineSource{
				Status: hxruntime.StatusCompleted,
				Steps: []hxruntime.StepSpans{
					{StepID: "1", Attempts: []hxruntime.AttemptSpan{failed(span(1, 0.1, 0.2, hxruntime.SpanFailed), "ConnectionError", 1.5), span(2, 1.7, 2, hxruntime.SpanSucceeded)}},
					{StepID: "2", Attempts: []hxruntime.AttemptSpan{span(1, 3, 3.5, hxruntime.SpanSucceeded)}},
				},
				Tools:  []hxruntime.ToolEntry{entry(1, "overdue_balance", "c1", "safe", span(1, 2.1, 2.5, hxruntime.SpanSucceeded))},
				Events: []hxruntime.RunEvent{runResultEvent("2", 3.6, hxruntime.StatusCompleted, "")},
			},
			lanes: []string{"model", "tool:overdue_balance"},
			bars: []string{
				"model 1#1 retrying 0.1..0.2 wait=1.5 err=ConnectionError",
				"model 1#2 succeeded 1.7..2",
				"tool:overdue_balance 1#1 succeeded 2.1..2.5",
				"model 2#1 succeeded 3..3.5",
			},
			marks: []string{"completed@3.6"},
		},
		{
			name: "tool retries keep their numbers and waits; the last failure fails",
			src: hxruntime.TimelineSource{
				Status: hxruntime.StatusFailed,
				Tools: []hxruntime.ToolEntry{entry(1, "fetch", "c1", "safe",
					failed(span(1, 1, 2, hxruntime.SpanFailed), "Timeout", 0.5),
					failed(span(2, 2.5, 3, hxruntime.SpanFailed), "Timeout", 1),
					failed(span(3, 4, 5, hxruntime.SpanFailed), "Timeout", 0))},
				Events: []hxruntime.RunEvent{runResultEvent("1", 5.1, hxruntime.StatusFailed, "Timeout happened")},
			},
			lanes: []string{"model", "tool:fetch"},
			bars: []string{
				"tool:fetch 1#1 retrying 1..2 wait=0.5 err=Timeout",
				"tool:fetch 1#2 retrying 2.5..3 wait=1 err=Timeout",
				"tool:fetch 1#3 failed 4..5 err=Timeout",
			},
			marks: []string{"failed@5.1 Timeout happened"},
		},
		{
			name: "attempt_reset: the lost attempt is reset, whether stored open or reset",
			src: hxruntime.TimelineSource{
				Status: hxruntime.StatusRunning,
				Steps: []hxruntime.StepSpans{
					{StepID: "1", Attempts: []hxruntime.AttemptSpan{span(1, 0, 0, hxruntime.SpanRunning), span(2, 5, 0, hxruntime.SpanRunning)}},
					{StepID: "2", Attempts: []hxruntime.AttemptSpan{span(1, 6, 9, hxruntime.SpanReset), span(2, 9, 0, hxruntime.SpanRunning)}},
				},
				Events: []hxruntime.RunEvent{{Type: hxruntime.EventAttemptReset, Data: json.RawMessage(`{"attempt":1}`), StepID: "1", CreatedAt: at(5)}},
			},
			lanes: []string{"model"},
			bars:  []string{"model 1#1 reset 0..-", "model 1#2 running 5..-", "model 2#1 reset 6..9", "model 2#2 running 9..-"},
			marks: []string{"attempt_reset@5 1"},
		},
		{
			name: "uncertain, resolved with retry, then succeeded",
			src: hxruntime.TimelineSource{
				Status: hxruntime.StatusCompleted,
				Tools: []hxruntime.ToolEntry{entry(1, "pay", "c1", "manual",
					resolved(span(1, 1, 2, hxruntime.SpanUncertain), "retry", 4, hxruntime.SpanUncertain),
					span(2, 5, 6, hxruntime.SpanSucceeded))},
				Resumptions: []hxruntime.Resumption{{At: at(4.5), From: hxruntime.StatusAwaitingInput}},
			},
			lanes: []string{"model", "tool:pay"},
			bars:  []string{"tool:pay 1#1 retrying 1..2 resolution=retry", "tool:pay 1#2 succeeded 5..6"},
			marks: []string{"resolved@4 run-1:1:c1 retry", "resumed@4.5 awaiting_input"},
		},
		{
			name: "uncertain awaiting a resolve, and one aborted",
			src: hxruntime.TimelineSource{
				Status: hxruntime.StatusCancelled,
				Tools: []hxruntime.ToolEntry{
					entry(1, "pay", "c1", "manual", span(1, 1, 2, hxruntime.SpanUncertain)),
					entry(2, "pay", "c2", "manual", resolved(span(1, 3, 4, hxruntime.SpanUncertain), "abort", 7, hxruntime.SpanAborted)),
				},
			},
			lanes: []string{"model", "tool:pay"},
			bars:  []string{"tool:pay 1#1 uncertain 1..2", "tool:pay 2#1 aborted 3..4 resolution=abort"},
			marks: []string{"resolved@7 run-1:2:c2 abort"},
		},
		{
			name: "approvals: awaited, given, declined",
			src: hxruntime.TimelineSource{
				Status: hxruntime.StatusAwaitingInput,
				Tools: []hxruntime.ToolEntry{
					approved(entry(1, "remind", "c1", "idempotent", span(1, 5, 6, hxruntime.SpanSucceeded)), 1, 4, true),
					approved(entry(1, "refund", "c2", "manual"), 1.5, 4.5, false),
					approved(entry(2, "remind", "c3", "idempotent"), 8, 0, false),
				},
				Events: []hxruntime.RunEvent{
					{Type: hxruntime.EventApprovalRequired, Data: json.RawMessage(`{"execution_key":"run-1:1:c1"}`), StepID: "1", CreatedAt: at(1)},
					{Type: hxruntime.EventApprovalRequired, Data: json.RawMessage(`{"execution_key":"run-1:2:c3"}`), StepID: "2", CreatedAt: at(8)},
					runResultEvent("2", 8, hxruntime.StatusAwaitingInput, ""),
				},
			},
			lanes: []string{"model", "tool:refund", "tool:remind"},
			bars: []string{
				"tool:refund 1#1 declined 1.5..4.5 approval@1.5 decided@4.5 approved=false",
				"tool:remind 1#1 succeeded 5..6 approval@1 decided@4 approved=true",
				"tool:remind 2#1 awaiting_approval 8..- approval@8",
			},
			marks: []string{"approval_required@1 run-1:1:c1", "approval_given@4 run-1:1:c1", "approval_declined@4.5 run-1:1:c2", "approval_required@8 run-1:2:c3"},
		},
		{
			name: "cancelled mid-call, after a pause and a resume",
			src: hxruntime.TimelineSource{
				Status: hxruntime.StatusCancelled,
				Steps: []hxruntime.StepSpans{
					{StepID: "1", Attempts: []hxruntime.AttemptSpan{span(1, 0, 1, hxruntime.SpanSucceeded)}},
					{StepID: "2", Attempts: []hxruntime.AttemptSpan{span(1, 6, 7, hxruntime.SpanCancelled)}},
				},
				Tools:       []hxruntime.ToolEntry{entry(1, "slow", "c1", "safe", span(1, 1, 2, hxruntime.SpanSucceeded))},
				Resumptions: []hxruntime.Resumption{{At: at(5), From: hxruntime.StatusPaused}},
				Events: []hxruntime.RunEvent{
					runResultEvent("1", 2.5, hxruntime.StatusPaused, ""),
					runResultEvent("2", 7, hxruntime.StatusCancelled, ""),
					{Type: hxruntime.EventTextDelta, Data: json.RawMessage(`"hi"`), StepID: "1", CreatedAt: at(0.5)},
				},
			},
			lanes: []string{"model", "tool:slow"},
			bars:  []string{"model 1#1 succeeded 0..1", "tool:slow 1#1 succeeded 1..2", "model 2#1 cancelled 6..7"},
			marks: []string{"paused@2.5", "resumed@5 paused", "cancelled@7"},
		},
		{
			name: "cancelled while an approval was awaited: the bar ends cancelled",
			src: hxruntime.TimelineSource{
				Status: hxruntime.StatusCancelled,
				Tools:  []hxruntime.ToolEntry{approved(entry(1, "remind", "c1", "idempotent"), 1, 0, false)},
				Events: []hxruntime.RunEvent{runResultEvent("1", 1, hxruntime.StatusAwaitingInput, ""), runResultEvent("1", 3, hxruntime.StatusCancelled, "")},
			},
			lanes: []string{"model", "tool:remind"},
			bars:  []string{"tool:remind 1#1 cancelled 1..3 approval@1"},
			marks: []string{"cancelled@3"},
		},
		{
			name: "rows from before attempt times: no bars, never an error",
			src: hxruntime.TimelineSource{
				Status: hxruntime.StatusCompleted,
				Steps:  []hxruntime.StepSpans{{StepID: "1"}},
				Tools:  []hxruntime.ToolEntry{{Call: model.ToolCall{ID: "c1", Name: "old"}, ExecutionKey: "run-1:1:c1", Status: hxruntime.ToolCompleted, Attempt: 1}},
				Events: []hxruntime.RunEvent{runResultEvent("1", 3, hxruntime.StatusCompleted, "")},
			},
			lanes: []string{"model"},
			bars:  []string{},
			marks: []string{"completed@3"},
		},
		{
			name: "lanes in the order of each tool's first call, bars by start then lane",
			src: hxruntime.TimelineSource{
				Status: hxruntime.StatusCompleted,
				Steps:  []hxruntime.StepSpans{{StepID: "1", Attempts: []hxruntime.AttemptSpan{span(1, 0, 1, hxruntime.SpanSucceeded)}}},
				Tools: []hxruntime.ToolEntry{
					entry(1, "zeta", "c1", "safe", span(1, 1, 3, hxruntime.SpanSucceeded)),
					entry(1, "alpha", "c2", "safe", span(1, 1, 2, hxruntime.SpanSucceeded)),
					entry(1, "beta", "c3", "safe", span(1, 0.5, 2, hxruntime.SpanSucceeded)),
				},
			},
			lanes: []string{"model", "tool:beta", "tool:zeta", "tool:alpha"},
			bars: []string{
				"model 1#1 succeeded 0..1", "tool:beta 1#1 succeeded 0.5..2",
				"tool:zeta 1#1 succeeded 1..3", "tool:alpha 1#1 succeeded 1..2",
			},
			marks: []string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := tc.src
			src.RunID, src.SessionID, src.CreatedAt, src.UpdatedAt = "run-1", "s-1", t0, at(10)
			tl := hxruntime.BuildTimeline(&src)
			require.Equal(t, "run-1", tl.RunID)
			require.Equal(t, src.Status, tl.Status)
			var lanes, bars, marks []string
			for _, l := range tl.Lanes {
				lanes = append(lanes, l.ID)
				if l.Kind == hxruntime.LaneTool {
					require.Equal(t, "tool:"+l.Tool, l.ID)
				}
			}
			bars, marks = []string{}, []string{}
			for _, a := range tl.Attempts {
				bars = append(bars, bar(a))
				require.Equal(t, strings.HasPrefix(a.Lane, "tool:"), a.Kind == hxruntime.LaneTool, a.Lane)
			}
			for _, m := range tl.Marks {
				marks = append(marks, mark(m))
			}
			require.Equal(t, tc.lanes, lanes)
			require.Equal(t, tc.bars, bars)
			require.Equal(t, tc.marks, marks)
		})
	}
}

// TestAttemptSpans: the helpers both engines call open and close spans;
// closing is a no-op once closed, so a later outcome never overwrites the
// first, and times are kept in UTC.
func TestAttemptSpans(t *testing.T) {
	t.Parallel()
	local := time.FixedZone("x", 3600)
	e := &hxruntime.ToolEntry{Attempt: 1}
	hxruntime.BeginToolSpan(e, at(1).In(local))
	hxruntime.EndToolSpan(e, at(2), hxruntime.SpanFailed, &hxruntime.RunError{Type: "T", Message: "m"})
	hxruntime.SetToolSpanWait(e, 1500*time.Millisecond)
	hxruntime.EndToolSpan(e, at(3), hxruntime.SpanSucceeded, nil) // already closed
	require.Equal(t, []hxruntime.AttemptSpan{{
		Attempt: 1, StartedAt: at(1), EndedAt: at(2), Outcome: hxruntime.SpanFailed,
		Error: &hxruntime.RunError{Type: "T", Message: "m"}, RetryWaitSeconds: 1.5,
	}}, e.Attempts)
	require.Equal(t, time.UTC, e.Attempts[0].StartedAt.Location())

	hxruntime.RequestApproval(e, at(4))
	hxruntime.RequestApproval(e, at(5)) // the first request counts
	require.Equal(t, at(4), e.ApprovalRequestedAt)

	st := &hxruntime.RunState{Attempt: 1}
	hxruntime.ResetModelSpan(st, at(0)) // nothing open: no-op
	require.Empty(t, st.ModelAttempts)

	// Bounded: the newest 100 spans and resumptions are kept.
	for i := range 150 {
		hxruntime.NoteResumed(st, at(float64(i)), hxruntime.StatusPaused)
		e.Attempt++
		hxruntime.BeginToolSpan(e, at(float64(i)))
	}
	require.Len(t, st.Resumptions, 100)
	require.Equal(t, at(149), st.Resumptions[99].At)
	require.Len(t, e.Attempts, 100)
	require.Equal(t, e.Attempt, e.Attempts[99].Attempt)

	// Old rows decode without the new fields; new fields are omitted
	// when unset, so an entry without them encodes as before.
	raw, err := json.Marshal(hxruntime.ToolEntry{ExecutionKey: "k"})
	require.NoError(t, err)
	require.NotContains(t, string(raw), "attempts")
	require.NotContains(t, string(raw), "approval_")
	var old hxruntime.ToolEntry
	require.NoError(t, json.Unmarshal([]byte(`{"call":{"id":"c1","name":"x"},"status":"completed","attempt":1,"execution_key":"k"}`), &old))
	require.Empty(t, old.Attempts)
}
