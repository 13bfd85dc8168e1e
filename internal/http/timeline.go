package http

import (
	"context"
	"time"

	"hxd/internal/http/api"
	hxruntime "hxd/internal/runtime"
)

// GetRunTimeline returns a run's timeline (owner only, else 404).
func (s *Server) GetRunTimeline(ctx context.Context, req api.GetRunTimelineRequestObject) (api.GetRunTimelineResponseObject, error) {
	tl, err := s.svc.RunTimeline(ctx, req.RunId)
	if err != nil {
		return nil, err
	}
	return api.GetRunTimeline200JSONResponse(timelineOut(tl)), nil
}

func timelineOut(tl *hxruntime.RunTimeline) api.RunTimeline {
	out := api.RunTimeline{
		RunId: tl.RunID, SessionId: tl.SessionID, Status: api.RunStatus(tl.Status),
		CreatedAt: tl.CreatedAt.UTC(), UpdatedAt: tl.UpdatedAt.UTC(),
		Lanes:    make([]api.TimelineLane, 0, len(tl.Lanes)),
		Attempts: make([]api.TimelineAttempt, 0, len(tl.Attempts)),
		Marks:    make([]api.TimelineMark, 0, len(tl.Marks)),
	}
	for _, l := range tl.Lanes {
		out.Lanes = append(out.Lanes, api.TimelineLane{Id: l.ID, Kind: api.TimelineLaneKind(l.Kind), Tool: optString(l.Tool)})
	}
	for i := range tl.Attempts {
		out.Attempts = append(out.Attempts, attemptOut(&tl.Attempts[i]))
	}
	for _, m := range tl.Marks {
		out.Marks = append(out.Marks, api.TimelineMark{
			Type: api.TimelineMarkType(m.Type), At: m.At.UTC(), StepId: optString(m.StepID),
			ExecutionKey: optString(m.ExecutionKey), Detail: optString(m.Detail),
		})
	}
	return out
}

func attemptOut(a *hxruntime.TimelineAttempt) api.TimelineAttempt {
	sp := &a.Span
	out := api.TimelineAttempt{
		Lane: a.Lane, Kind: api.TimelineAttemptKind(a.Kind), StepId: a.StepID, Attempt: max(sp.Attempt, 1),
		StartedAt: sp.StartedAt.UTC(), EndedAt: optTime(sp.EndedAt), Outcome: api.TimelineAttemptOutcome(sp.Outcome),
		Model: optString(sp.Model), Provider: optString(sp.Provider),
		Tool: optString(a.Tool), CallId: optString(a.CallID), ExecutionKey: optString(a.ExecutionKey), ReplayPolicy: optString(a.ReplayPolicy),
	}
	if sp.Error != nil {
		out.Error = &api.RunError{Type: sp.Error.Type, Message: sp.Error.Message}
	}
	if sp.RetryWaitSeconds > 0 {
		out.RetryWaitSeconds = &sp.RetryWaitSeconds
	}
	if sp.Resolution != "" {
		r := api.TimelineAttemptResolution(sp.Resolution)
		out.Resolution = &r
	}
	if ap := a.Approval; ap != nil {
		out.Approval = &api.TimelineApproval{RequestedAt: ap.RequestedAt.UTC(), DecidedAt: optTime(ap.DecidedAt), Approved: ap.Approved}
	}
	return out
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
