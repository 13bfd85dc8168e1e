package http

import (
	"context"
	"time"

	"hxd/internal/http/api"
	hxruntime "hxd/internal/runtime"
)

// SubmitRun starts a run (202), or returns the existing run of the same
// request id and message (200). With wait > 0 it answers once the run is
// no longer running, or after wait seconds.
func (s *Server) SubmitRun(ctx context.Context, req api.SubmitRunRequestObject) (api.SubmitRunResponseObject, error) {
	requestID, err := submitRequestID(req)
	if err != nil {
		return nil, err
	}
	run, created, err := s.svc.SubmitRun(ctx, hxruntime.SubmitParams{
		SessionID: req.SessionId, Message: req.Body.Message, RequestID: requestID,
		Stream: deref(req.Body.Stream),
	})
	err = ensureRun(run, err)
	if wait := deref(req.Params.Wait); err == nil && wait > 0 && run.Status == hxruntime.StatusRunning {
		run, err = s.svc.WaitRun(ctx, run.RunID, time.Duration(wait)*time.Second)
	}
	if err = ensureRun(run, err); err != nil {
		return nil, err
	}
	if created {
		return api.SubmitRun202JSONResponse(runOut(run)), nil
	}
	return api.SubmitRun200JSONResponse(runOut(run)), nil
}

// submitRequestID is the request id of a submission: the Idempotency-Key
// header or the body's request_id (both given and different → 400).
func submitRequestID(req api.SubmitRunRequestObject) (string, error) {
	if req.Body == nil {
		return "", badRequest("request body is required")
	}
	id, key := deref(req.Body.RequestId), deref(req.Params.IdempotencyKey)
	switch {
	case key == "":
		return id, nil
	case id != "" && id != key:
		return "", badRequest("Idempotency-Key header and request_id differ")
	}
	return key, nil
}

// ListRuns lists the runs of one of the caller's sessions.
func (s *Server) ListRuns(ctx context.Context, req api.ListRunsRequestObject) (api.ListRunsResponseObject, error) {
	page, err := s.svc.ListRuns(ctx, req.SessionId, listParams(req.Params.Cursor, req.Params.Limit))
	if err != nil {
		return nil, err
	}
	out := api.RunList{Items: make([]api.RunResult, 0, len(page.Items)), NextCursor: optString(page.NextCursor)}
	for i := range page.Items {
		out.Items = append(out.Items, runOut(&page.Items[i]))
	}
	return api.ListRuns200JSONResponse(out), nil
}

// GetRun returns a run's result.
func (s *Server) GetRun(ctx context.Context, req api.GetRunRequestObject) (api.GetRunResponseObject, error) {
	run, err := s.svc.GetRun(ctx, req.RunId)
	if err != nil {
		return nil, err
	}
	return api.GetRun200JSONResponse(runOut(run)), nil
}

func runOut(r *hxruntime.RunResult) api.RunResult {
	out := api.RunResult{
		SessionId:  r.SessionID,
		RunId:      r.RunID,
		Output:     r.Output,
		Status:     api.RunStatus(r.Status),
		StopReason: r.StopReason,
		Usage: api.Usage{
			InputTokens:              r.Usage.InputTokens,
			OutputTokens:             r.Usage.OutputTokens,
			CacheReadInputTokens:     r.Usage.CacheReadInputTokens,
			CacheCreationInputTokens: r.Usage.CacheCreationInputTokens,
		},
		Pending:         pendingOut(r.Pending),
		UsageIncomplete: r.UsageIncomplete,
		CreatedAt:       r.CreatedAt.UTC(),
		UpdatedAt:       r.UpdatedAt.UTC(),
	}
	if r.Error != nil {
		out.Error = &api.RunError{Type: r.Error.Type, Message: r.Error.Message}
	}
	return out
}

func pendingOut(in []hxruntime.PendingTool) []api.PendingTool {
	out := make([]api.PendingTool, 0, len(in))
	for _, p := range in {
		t := api.PendingTool{
			Call:           api.ToolCall{Id: p.Call.ID, Name: p.Call.Name, Input: jsonObject(p.Call.Input)},
			Status:         api.PendingToolStatus(p.Status),
			Attempt:        p.Attempt,
			ExecutionKey:   p.ExecutionKey,
			Policy:         api.ReplayPolicy(p.Policy),
			Concurrent:     p.Concurrent,
			TimeoutSeconds: float64(p.TimeoutSeconds),
		}
		if p.Retry != nil {
			t.Retry = &api.ToolRetry{
				Attempts:          p.Retry.Attempts,
				BackoffSeconds:    p.Retry.BackoffSeconds,
				MaxBackoffSeconds: p.Retry.MaxBackoffSeconds,
				RetryErrorResults: p.Retry.RetryErrorResults,
			}
		}
		out = append(out, t)
	}
	return out
}
