package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/tool"
)

// shape is a bar as these tests compare it: lane, step#attempt, outcome,
// whether it ended.
func shape(a hxruntime.TimelineAttempt) string {
	s := fmt.Sprintf("%s %s#%d %s", a.Lane, a.StepID, a.Span.Attempt, a.Span.Outcome)
	if a.Span.EndedAt.IsZero() {
		s += " open"
	}
	return s
}

func shapes(tl *hxruntime.RunTimeline) []string {
	out := []string{}
	for _, a := range tl.Attempts {
		out = append(out, shape(a))
	}
	return out
}

func markTypes(tl *hxruntime.RunTimeline) []string {
	out := []string{}
	for _, m := range tl.Marks {
		out = append(out, m.Type)
	}
	return out
}

// requireOrdered checks the builder's order rules and that every bar
// lies within the run and ends after it starts.
func requireOrdered(t *testing.T, tl *hxruntime.RunTimeline) {
	t.Helper()
	for i, a := range tl.Attempts {
		require.False(t, a.Span.StartedAt.IsZero(), "bar %d has no start", i)
		require.False(t, a.Span.StartedAt.Before(tl.CreatedAt.Add(-1)), "bar %d starts before the run", i)
		if !a.Span.EndedAt.IsZero() {
			require.False(t, a.Span.EndedAt.Before(a.Span.StartedAt), "bar %d ends before it starts", i)
		}
		if i > 0 {
			require.False(t, a.Span.StartedAt.Before(tl.Attempts[i-1].Span.StartedAt), "bars out of order at %d", i)
		}
	}
	for i := 1; i < len(tl.Marks); i++ {
		require.False(t, tl.Marks[i].At.Before(tl.Marks[i-1].At), "marks out of order at %d", i)
	}
}

// TestRunTimelineDemoInvoice: the demo invoice run, recorded or not, shows
// its failed first model attempt (retrying, with its error and wait), the
// retry, its tool bar and the second step; the timeline comes from the
// step and tool rows, so an unrecorded run (no journal) has the same one.
// Another principal gets ErrNotFound.
func TestRunTimelineDemoInvoice(t *testing.T) {
	t.Parallel()
	for _, rec := range []bool{true, false} {
		t.Run(fmt.Sprintf("recording=%v", rec), func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			alice := hxruntime.WithPrincipal(context.Background(), "alice")
			sess, err := tb.rt.CreateSession(alice, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}, Recording: recording(rec)})
			require.NoError(t, err)
			run, _, err := tb.rt.SubmitRun(alice, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("Analyze")})
			require.NoError(t, err)
			res, err := tb.rt.WaitRun(alice, run.RunID, 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, hxruntime.StatusCompleted, res.Status)
			if !rec {
				require.Empty(t, journalOf(t, tb, res.RunID))
			}

			tl, err := tb.rt.RunTimeline(alice, res.RunID)
			require.NoError(t, err)
			require.Equal(t, res.RunID, tl.RunID)
			require.Equal(t, sess.ID, tl.SessionID)
			require.Equal(t, hxruntime.StatusCompleted, tl.Status)
			require.Equal(t, []hxruntime.TimelineLane{{ID: "model", Kind: "model"}, {ID: "tool:overdue_balance", Kind: "tool", Tool: "overdue_balance"}}, tl.Lanes)
			require.Equal(t, []string{
				"model 1#1 retrying", "model 1#2 succeeded", "tool:overdue_balance 1#1 succeeded", "model 2#1 succeeded",
			}, shapes(tl))
			first := tl.Attempts[0].Span
			require.NotNil(t, first.Error)
			require.NotEmpty(t, first.Error.Type)
			require.Positive(t, first.RetryWaitSeconds, "the wait before the retry")
			require.Empty(t, first.Provider, "no fallback chain")
			tool := tl.Attempts[2]
			require.Equal(t, "overdue", tool.CallID)
			require.Equal(t, res.RunID+":1:overdue", tool.ExecutionKey)
			require.Equal(t, "safe", tool.ReplayPolicy)
			// Every retry of a model attempt is announced by attempt_reset.
			require.Equal(t, []string{"attempt_reset", "completed"}, markTypes(tl))
			require.Equal(t, "1", tl.Marks[0].Detail)
			requireOrdered(t, tl)

			// A bar's events are those of its step and attempt: the
			// failed attempt's wait, the tool call's start and result, the
			// answer's text (the retry that asked for the tool has none).
			evs, err := tb.rt.ListEvents(alice, res.RunID, 0, 1000)
			require.NoError(t, err)
			types := func(a hxruntime.TimelineAttempt) []string {
				var out []string
				for _, ev := range evs {
					if ev.StepID == a.StepID && ev.AttemptID == fmt.Sprint(a.Span.Attempt) {
						out = append(out, ev.Type)
					}
				}
				return out
			}
			require.Contains(t, types(tl.Attempts[0]), hxruntime.EventWaiting)
			require.Contains(t, types(tl.Attempts[2]), hxruntime.EventToolCallStart)
			require.Contains(t, types(tl.Attempts[2]), hxruntime.EventToolResult)
			require.Contains(t, types(tl.Attempts[3]), hxruntime.EventTextComplete)

			bob := hxruntime.WithPrincipal(context.Background(), "bob")
			_, err = tb.rt.RunTimeline(bob, res.RunID)
			require.ErrorIs(t, err, hxruntime.ErrNotFound)
			_, err = tb.rt.RunTimeline(alice, "no-such-run")
			require.ErrorIs(t, err, hxruntime.ErrNotFound)
		})
	}
}

// TestRunTimelineApproval: the demo reminder waits for its approval (an
// open awaiting_approval bar), is approved and completes: the tool's bar
// then carries the approval and the marks show it required and given.
func TestRunTimelineApproval(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "invoice-reminder", Version: "v1"}})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "Remind")
	require.Equal(t, hxruntime.StatusAwaitingInput, res.Status)
	tl, err := tb.rt.RunTimeline(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, []string{"model 1#1 succeeded", "tool:send_reminder 1#1 awaiting_approval open"}, shapes(tl))
	require.NotNil(t, tl.Attempts[1].Approval)
	require.Nil(t, tl.Attempts[1].Approval.Approved)
	require.Equal(t, []string{"approval_required"}, markTypes(tl))
	require.Equal(t, res.Pending[0].ExecutionKey, tl.Marks[0].ExecutionKey)

	_, err = tb.rt.Approve(ctx, hxruntime.ApproveParams{SessionID: sess.ID, ExecutionKey: res.Pending[0].ExecutionKey, Allow: true, Resume: true})
	require.NoError(t, err)
	res = waitRun(t, tb, res.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	tl, err = tb.rt.RunTimeline(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, []string{"model 1#1 succeeded", "tool:send_reminder 1#1 succeeded", "model 2#1 succeeded"}, shapes(tl))
	ap := tl.Attempts[1].Approval
	require.NotNil(t, ap)
	require.True(t, *ap.Approved)
	require.False(t, ap.DecidedAt.Before(ap.RequestedAt))
	require.Equal(t, []string{"approval_required", "approval_given", "resumed", "completed"}, markTypes(tl))
	requireOrdered(t, tl)
}

// TestRunTimelineDeclinedAndRetriedTool: a tool retried by its policy
// shows each attempt with its number and wait; a declined approval a
// closed declined bar; and a step whose calls were all answered without
// a call keeps its model attempt closed in its steps row (the next step
// replaced the state's).
func TestRunTimelineDeclinedAndRetriedTool(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"content":"ok"}`))
	}))
	t.Cleanup(flaky.Close)
	def := &agent.Definition{
		Name: "mixed", Version: "v1", MaxIterations: 10,
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "u", Name: "denied", Input: json.RawMessage(`{}`)}}},
			{ToolCalls: []model.ToolCall{{ID: "f", Name: "flaky", Input: json.RawMessage(`{}`)}}},
			{ToolCalls: []model.ToolCall{{ID: "a", Name: "asked", Input: json.RawMessage(`{}`)}}},
			{Text: "done"},
		}},
		Tools: []agent.ToolDef{
			{Config: tool.Config{Name: "denied", Kind: "builtin", Builtin: "count", Permission: "deny"}},
			{Config: tool.Config{Name: "flaky", Kind: "webhook", URL: flaky.URL, ReplayPolicy: "safe",
				Retry: &tool.Retry{Attempts: 3, BackoffSeconds: 0.5, MaxBackoffSeconds: 1}}},
			{Config: tool.Config{Name: "asked", Kind: "builtin", Builtin: "count", Permission: "ask"}},
		},
	}
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref()})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusAwaitingInput, res.Status)
	_, err = tb.rt.Approve(ctx, hxruntime.ApproveParams{SessionID: sess.ID, ExecutionKey: res.Pending[0].ExecutionKey, Allow: false, Resume: true})
	require.NoError(t, err)
	res = waitRun(t, tb, res.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)

	tl, err := tb.rt.RunTimeline(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, []string{
		"model 1#1 succeeded",
		"model 2#1 succeeded",
		"tool:flaky 2#1 retrying", "tool:flaky 2#2 retrying", "tool:flaky 2#3 succeeded",
		"model 3#1 succeeded",
		"tool:asked 3#1 declined",
		"model 4#1 succeeded",
	}, shapes(tl))
	for _, a := range tl.Attempts[2:4] {
		require.Positive(t, a.Span.RetryWaitSeconds)
		require.Equal(t, "TransientToolError", a.Span.Error.Type)
	}
	require.False(t, *tl.Attempts[6].Approval.Approved)
	require.Equal(t, []string{"model", "tool:flaky", "tool:asked"}, []string{tl.Lanes[0].ID, tl.Lanes[1].ID, tl.Lanes[2].ID})
	require.Equal(t, []string{"approval_required", "approval_declined", "resumed", "completed"}, markTypes(tl))
	requireOrdered(t, tl)
}

// TestRunTimelineCancelAndPause: a run paused while a tool call is in
// flight stops at the next boundary and is resumed; cancelled while its
// next call is in flight, that bar ends cancelled. The marks show the
// pause, the resume and the cancel in order.
func TestRunTimelineCancelAndPause(t *testing.T) {
	t.Parallel()
	held, release := make(chan struct{}), make(chan struct{})
	hold := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(held)
		<-release
		_, _ = w.Write([]byte(`{"content":"held"}`))
	}))
	t.Cleanup(hold.Close)
	def := &agent.Definition{
		Name: "blocker", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "h", Name: "hold", Input: json.RawMessage(`{}`)}}},
			{ToolCalls: []model.ToolCall{{ID: "b", Name: "block", Input: json.RawMessage(`{}`)}}},
			{Text: "never"},
		}},
		Tools: []agent.ToolDef{
			{Config: tool.Config{Name: "hold", Kind: "webhook", URL: hold.URL, ReplayPolicy: "safe"}},
			{Config: tool.Config{Name: "block", Kind: "builtin", Builtin: "block", ReplayPolicy: "safe"}},
		},
	}
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref()})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	<-held
	paused := make(chan error, 1)
	go func() {
		_, err := tb.rt.Pause(ctx, sess.ID)
		paused <- err
	}()
	key := hxruntime.SessionKey(hxruntime.LocalPrincipal, sess.ID)
	require.Eventually(t, func() bool {
		ctl, err := tb.store.SessionControlGet(ctx, key)
		return err == nil && ctl == "paused"
	}, 10*time.Second, 5*time.Millisecond)
	close(release)
	require.NoError(t, <-paused)
	res := waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusPaused, res.Status)

	_, err = tb.rt.Resume(ctx, sess.ID, hxruntime.ResumeParams{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tb.toolCalls("block") == 1 }, 10*time.Second, 5*time.Millisecond)
	_, err = tb.rt.Cancel(ctx, sess.ID)
	require.NoError(t, err)
	res = waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCancelled, res.Status)

	tl, err := tb.rt.RunTimeline(ctx, run.RunID)
	require.NoError(t, err)
	require.Equal(t, []string{
		"model 1#1 succeeded", "tool:hold 1#1 succeeded", "model 2#1 succeeded", "tool:block 2#1 cancelled",
	}, shapes(tl))
	require.Equal(t, []string{"paused", "resumed", "cancelled"}, markTypes(tl))
	requireOrdered(t, tl)
}
