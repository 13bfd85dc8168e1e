package http_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hxhttp "hxd/internal/http"
	hxruntime "hxd/internal/runtime"
)

// timelineFixture is a timeline with every kind of bar and mark field.
func timelineFixture() *hxruntime.RunTimeline {
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.FixedZone("x", 3600))
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	return &hxruntime.RunTimeline{
		RunID: "run-1", SessionID: "s-1", Status: hxruntime.StatusAwaitingInput, CreatedAt: t0, UpdatedAt: at(9),
		Lanes: []hxruntime.TimelineLane{{ID: "model", Kind: "model"}, {ID: "tool:refund", Kind: "tool", Tool: "refund"}},
		Attempts: []hxruntime.TimelineAttempt{
			{Lane: "model", Kind: "model", StepID: "1", Span: hxruntime.AttemptSpan{
				Attempt: 1, StartedAt: at(0), EndedAt: at(1), Outcome: hxruntime.SpanRetrying,
				Error: &hxruntime.RunError{Type: "RateLimitError", Message: "slow down"}, RetryWaitSeconds: 1.5, Model: "m", Provider: "p",
			}},
			{Lane: "model", Kind: "model", StepID: "1", Span: hxruntime.AttemptSpan{Attempt: 2, StartedAt: at(2.5), Outcome: hxruntime.SpanRunning}},
			{Lane: "tool:refund", Kind: "tool", StepID: "1", Tool: "refund", CallID: "c1", ExecutionKey: "run-1:1:c1", ReplayPolicy: "manual",
				Span:     hxruntime.AttemptSpan{Attempt: 1, StartedAt: at(3), EndedAt: at(4), Outcome: hxruntime.SpanAborted, Resolution: "abort", ResolvedAt: at(5)},
				Approval: &hxruntime.TimelineApproval{RequestedAt: at(2.9), DecidedAt: at(2.95), Approved: hxruntime.Ptr(true)}},
			{Lane: "tool:refund", Kind: "tool", StepID: "2", Tool: "refund", CallID: "c2", ExecutionKey: "run-1:2:c2", ReplayPolicy: "manual",
				Span:     hxruntime.AttemptSpan{Attempt: 1, StartedAt: at(6), Outcome: hxruntime.SpanAwaiting},
				Approval: &hxruntime.TimelineApproval{RequestedAt: at(6)}},
		},
		Marks: []hxruntime.TimelineMark{
			{Type: hxruntime.MarkApprovalGiven, At: at(2.95), StepID: "1", ExecutionKey: "run-1:1:c1"},
			{Type: hxruntime.MarkResolved, At: at(5), StepID: "1", ExecutionKey: "run-1:1:c1", Detail: "abort"},
			{Type: hxruntime.MarkApprovalRequired, At: at(6), StepID: "2", ExecutionKey: "run-1:2:c2"},
		},
	}
}

// TestGetRunTimeline: the handler maps the service's timeline to the
// contract (UTC times, optional fields absent when unset) for the run's
// owner; another principal's request is a 404 not_found problem, as for
// GET /runs/{run_id}, and carries the caller's principal to the service.
func TestGetRunTimeline(t *testing.T) {
	t.Parallel()
	ob := setupOIDC(t, nil)
	ob.svc.RunTimelineFunc = func(ctx context.Context, runID string) (*hxruntime.RunTimeline, error) {
		p, ok := hxhttp.PrincipalFrom(ctx)
		require.True(t, ok)
		require.Equal(t, p.ID, hxruntime.PrincipalFrom(ctx), "the runtime sees the caller")
		if p.Subject != "alice" || runID != "run-1" {
			return nil, fmt.Errorf("run %s: %w", runID, hxruntime.ErrNotFound)
		}
		return timelineFixture(), nil
	}
	resp, body := ob.do(t, request{method: "GET", path: "/runs/run-1/timeline", header: bearer(ob.iss.Token(t, "alice", nil))})
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", body)
	require.JSONEq(t, `{
		"run_id":"run-1","session_id":"s-1","status":"awaiting_input",
		"created_at":"2026-01-05T09:00:00Z","updated_at":"2026-01-05T09:00:09Z",
		"lanes":[{"id":"model","kind":"model"},{"id":"tool:refund","kind":"tool","tool":"refund"}],
		"attempts":[
		 {"lane":"model","kind":"model","step_id":"1","attempt":1,"started_at":"2026-01-05T09:00:00Z","ended_at":"2026-01-05T09:00:01Z",
		  "outcome":"retrying","error":{"type":"RateLimitError","message":"slow down"},"retry_wait_seconds":1.5,"model":"m","provider":"p"},
		 {"lane":"model","kind":"model","step_id":"1","attempt":2,"started_at":"2026-01-05T09:00:02.5Z","outcome":"running"},
		 {"lane":"tool:refund","kind":"tool","step_id":"1","attempt":1,"started_at":"2026-01-05T09:00:03Z","ended_at":"2026-01-05T09:00:04Z",
		  "outcome":"aborted","resolution":"abort","tool":"refund","call_id":"c1","execution_key":"run-1:1:c1","replay_policy":"manual",
		  "approval":{"requested_at":"2026-01-05T09:00:02.9Z","decided_at":"2026-01-05T09:00:02.95Z","approved":true}},
		 {"lane":"tool:refund","kind":"tool","step_id":"2","attempt":1,"started_at":"2026-01-05T09:00:06Z","outcome":"awaiting_approval",
		  "tool":"refund","call_id":"c2","execution_key":"run-1:2:c2","replay_policy":"manual",
		  "approval":{"requested_at":"2026-01-05T09:00:06Z"}}],
		"marks":[
		 {"type":"approval_given","at":"2026-01-05T09:00:02.95Z","step_id":"1","execution_key":"run-1:1:c1"},
		 {"type":"resolved","at":"2026-01-05T09:00:05Z","step_id":"1","execution_key":"run-1:1:c1","detail":"abort"},
		 {"type":"approval_required","at":"2026-01-05T09:00:06Z","step_id":"2","execution_key":"run-1:2:c2"}]
	}`, string(body))

	for _, tc := range []struct{ who, path string }{{"bob", "/runs/run-1/timeline"}, {"alice", "/runs/run-2/timeline"}} {
		resp, body = ob.do(t, request{method: "GET", path: tc.path, header: bearer(ob.iss.Token(t, tc.who, nil))})
		requireProblem(t, resp, body, http.StatusNotFound, "not_found")
		require.NotContains(t, string(body), "s-1", "nothing of the owner's run shows")
	}
	resp, body = ob.do(t, request{method: "GET", path: "/runs/run-1/timeline"})
	requireUnauthorized(t, resp, body, `Bearer realm="hxd"`)
}

// TestGetRunTimelineEmpty: a run without bars (stored before hxd kept
// attempt times) answers empty lists, never null.
func TestGetRunTimelineEmpty(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.svc.RunTimelineFunc = func(ctx context.Context, runID string) (*hxruntime.RunTimeline, error) {
		_, ok := hxhttp.PrincipalFrom(ctx)
		require.True(t, ok)
		return &hxruntime.RunTimeline{RunID: runID, SessionID: "s", Status: hxruntime.StatusCompleted,
			Lanes: []hxruntime.TimelineLane{{ID: "model", Kind: "model"}}}, nil
	}
	resp, body := tb.do(t, request{method: "GET", path: "/runs/old/timeline"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", body)
	require.Contains(t, string(body), `"attempts":[]`)
	require.Contains(t, string(body), `"marks":[]`)
}
