package http

import (
	"context"
	"encoding/json"

	"hxd/internal/agent"
	"hxd/internal/http/api"
	hxruntime "hxd/internal/runtime"
)

// CreateSession creates a session for the caller: 201, 409 session_exists,
// 422 unknown_agent.
func (s *Server) CreateSession(ctx context.Context, req api.CreateSessionRequestObject) (api.CreateSessionResponseObject, error) {
	b := req.Body
	if b == nil {
		return nil, badRequest("request body is required")
	}
	p := hxruntime.CreateSessionParams{
		Agent:     agent.Ref{Name: b.Agent.Name, Version: b.Agent.Version},
		Recording: b.Recording,
		SessionID: deref(b.SessionId),
	}
	if b.Metadata != nil {
		p.Metadata = *b.Metadata
	}
	sess, err := s.svc.CreateSession(ctx, p)
	if err != nil {
		return nil, err
	}
	return api.CreateSession201JSONResponse(sessionOut(sess)), nil
}

// ListSessions lists the caller's sessions, one page at a time.
func (s *Server) ListSessions(ctx context.Context, req api.ListSessionsRequestObject) (api.ListSessionsResponseObject, error) {
	p, err := sessionListParams(req.Params)
	if err != nil {
		return nil, err
	}
	page, err := s.svc.ListSessions(ctx, p)
	if err != nil {
		return nil, err
	}
	out := api.SessionList{Items: make([]api.Session, 0, len(page.Items)), NextCursor: optString(page.NextCursor)}
	for i := range page.Items {
		out.Items = append(out.Items, sessionOut(&page.Items[i]))
	}
	return api.ListSessions200JSONResponse(out), nil
}

// GetSession returns one of the caller's sessions.
func (s *Server) GetSession(ctx context.Context, req api.GetSessionRequestObject) (api.GetSessionResponseObject, error) {
	sess, err := s.svc.GetSession(ctx, req.SessionId)
	if err != nil {
		return nil, err
	}
	return api.GetSession200JSONResponse(sessionOut(sess)), nil
}

func sessionOut(s *hxruntime.Session) api.Session {
	out := api.Session{
		SessionId: s.ID,
		Agent:     api.AgentRef{Name: s.Agent.Name, Version: s.Agent.Version},
		Recording: s.Recording,
		Metadata:  jsonObject(s.Metadata),
		CreatedAt: s.CreatedAt.UTC(),
		McpTools:  mcpToolsOut(s.MCPTools),
	}
	if s.LatestRun != nil {
		out.LatestRun = &api.RunRef{RunId: s.LatestRun.RunID, Status: api.RunStatus(s.LatestRun.Status)}
	}
	return out
}

// listParams converts the contract's paging parameters.
func listParams(cursor *string, limit *int) hxruntime.ListParams {
	return hxruntime.ListParams{Cursor: deref(cursor), Limit: deref(limit)}
}

// jsonObject is raw, or {} when raw is empty or null.
func jsonObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
