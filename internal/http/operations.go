package http

import (
	"context"
	"errors"

	"hxd/internal/http/api"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
)

// PauseSession asks the session's running run to pause and answers the
// latest run ({run: null} when there is none).
func (s *Server) PauseSession(ctx context.Context, req api.PauseSessionRequestObject) (api.PauseSessionResponseObject, error) {
	run, err := s.svc.Pause(ctx, req.SessionId)
	if err != nil {
		return nil, err
	}
	return api.PauseSession200JSONResponse(controlOut(run)), nil
}

// CancelSession cancels the session's unfinished run and answers the
// latest run ({run: null} when there is none).
func (s *Server) CancelSession(ctx context.Context, req api.CancelSessionRequestObject) (api.CancelSessionResponseObject, error) {
	run, err := s.svc.Cancel(ctx, req.SessionId)
	if err != nil {
		return nil, err
	}
	return api.CancelSession200JSONResponse(controlOut(run)), nil
}

// ResumeSession resumes the latest unfinished run: {run_id}, or
// {run_id: null} when nothing is resumable.
func (s *Server) ResumeSession(ctx context.Context, req api.ResumeSessionRequestObject) (api.ResumeSessionResponseObject, error) {
	var p hxruntime.ResumeParams
	if req.Body != nil {
		p.Recording = req.Body.Recording
	}
	runID, err := s.svc.Resume(ctx, req.SessionId, p)
	if err != nil {
		return nil, err
	}
	return api.ResumeSession200JSONResponse{RunId: optString(runID)}, nil
}

// ListPending lists the tools of the latest run awaiting a decision.
func (s *Server) ListPending(ctx context.Context, req api.ListPendingRequestObject) (api.ListPendingResponseObject, error) {
	items, err := s.svc.Pending(ctx, req.SessionId)
	if err != nil {
		return nil, err
	}
	return api.ListPending200JSONResponse{Items: pendingOut(items), NextCursor: nil}, nil
}

// ApproveTool decides a tool awaiting approval and answers the run.
func (s *Server) ApproveTool(ctx context.Context, req api.ApproveToolRequestObject) (api.ApproveToolResponseObject, error) {
	if req.Body == nil {
		return nil, badRequest("request body is required")
	}
	run, err := s.svc.Approve(ctx, hxruntime.ApproveParams{
		SessionID: req.SessionId, ExecutionKey: req.ExecutionKey,
		Allow: req.Body.Allow, Resume: deref(req.Body.Resume),
	})
	if err = ensureRun(run, err); err != nil {
		return nil, err
	}
	return api.ApproveTool200JSONResponse(runOut(run)), nil
}

// ResolveTool decides an uncertain outcome (exactly one of result, retry,
// abort; else 422 resolution_invalid) and answers the run.
func (s *Server) ResolveTool(ctx context.Context, req api.ResolveToolRequestObject) (api.ResolveToolResponseObject, error) {
	b := req.Body
	if b == nil {
		return nil, badRequest("request body is required")
	}
	p := hxruntime.ResolveParams{
		SessionID: req.SessionId, ExecutionKey: req.ExecutionKey,
		Retry: deref(b.Retry), Abort: deref(b.Abort), Resume: deref(b.Resume),
	}
	if r := b.Result; r != nil {
		p.Result = &model.ToolResult{ToolCallID: r.ToolCallId, Content: r.Content, IsError: deref(r.IsError)}
	}
	if countTrue(p.Result != nil, p.Retry, p.Abort) != 1 {
		return nil, &hxruntime.PublicError{Err: hxruntime.ErrResolutionInvalid, Detail: "Choose exactly one of result, retry, abort"}
	}
	run, err := s.svc.Resolve(ctx, p)
	if err = ensureRun(run, err); err != nil {
		return nil, err
	}
	return api.ResolveTool200JSONResponse(runOut(run)), nil
}

func controlOut(run *hxruntime.RunResult) api.ControlResult {
	if run == nil {
		return api.ControlResult{Run: nil}
	}
	out := runOut(run)
	return api.ControlResult{Run: &out}
}

// ensureRun turns a nil run without error into an (internal) error.
func ensureRun(run *hxruntime.RunResult, err error) error {
	if err == nil && run == nil {
		return errors.New("service returned no run")
	}
	return err
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
