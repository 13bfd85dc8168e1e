package temporal

import (
	"context"
	"encoding/base64"

	"hxd/internal/runtime"
)

// maxListScan bounds the sessions one ListSessions call examines while
// looking for matches of a filter; a page that reaches it ends early (fewer
// than limit items, with a next cursor), so a selective filter never turns
// one request into a scan of every session.
const maxListScan = 1000

// ListSessions pages the caller's sessions through the visibility API
// (newest first). The cursor is the visibility page token.
//
// The session's agent and latest run live in its workflow (get_session),
// not in search attributes, so the filters are applied while paging: each
// visibility page asks for at most the matches still missing, so every
// match of a fetched page fits in this page and the next page token is
// where the listing continues. A page is full (limit matches) unless the
// listing ends or maxListScan sessions were examined; a short page with a
// next cursor is then possible, and following the cursor still skips and
// repeats nothing.
func (e *Engine) ListSessions(ctx context.Context, p runtime.SessionListParams) (runtime.Page[runtime.Session], error) {
	limit := clampLimit(p.Limit)
	var token []byte
	if p.Cursor != "" {
		var err error
		if token, err = base64.RawURLEncoding.DecodeString(p.Cursor); err != nil || len(token) == 0 {
			return runtime.Page[runtime.Session]{}, invalidCursor()
		}
	}
	page := runtime.Page[runtime.Session]{Items: []runtime.Session{}}
	for scanned := 0; ; {
		need := limit - len(page.Items)
		sessions, next, err := e.listSessionsPage(ctx, need, token)
		if err != nil {
			return runtime.Page[runtime.Session]{}, err
		}
		scanned += need
		for i := range sessions {
			if sessionMatches(&sessions[i], &p) {
				page.Items = append(page.Items, sessions[i])
			}
		}
		token = next
		if token == nil || len(page.Items) == limit || scanned >= maxListScan {
			break
		}
	}
	if token != nil {
		page.NextCursor = base64.RawURLEncoding.EncodeToString(token)
	}
	return page, nil
}

// sessionMatches reports whether s passes p's filters.
func sessionMatches(s *runtime.Session, p *runtime.SessionListParams) bool {
	if p.AgentName != "" && s.Agent.Name != p.AgentName {
		return false
	}
	if p.AgentVersion != "" && s.Agent.Version != p.AgentVersion {
		return false
	}
	switch {
	case p.NoRun:
		return s.LatestRun == nil
	case p.Status != "":
		return s.LatestRun != nil && s.LatestRun.Status == p.Status
	}
	return true
}
