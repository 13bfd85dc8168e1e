package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"hxd/internal/mcp"
	"hxd/internal/runtime/rtstore"
)

// CreateSession stores a new session bound to the calling principal,
// under its key (SessionKey): a caller-chosen id is taken only when the
// principal has a session of that id. Errors: ErrUnknownAgent,
// ErrSessionExists; for an agent with MCP servers, whose tools are
// discovered and pinned here, *mcp.UnavailableError (mcp.ErrUnavailable)
// and ErrMCPTools.
func (r *Runtime) CreateSession(ctx context.Context, p CreateSessionParams) (*Session, error) {
	b, err := r.bind(p.Agent)
	if err != nil {
		return nil, err
	}
	id := p.SessionID
	if id == "" {
		id = r.cfg.NewIDFunc()
	}
	meta := p.Metadata
	if len(bytes.TrimSpace(meta)) == 0 || string(bytes.TrimSpace(meta)) == "null" {
		meta = json.RawMessage(`{}`)
	}
	pinned, err := r.pinMCP(ctx, b)
	if err != nil {
		return nil, err
	}
	principal := PrincipalFrom(ctx)
	// A deleted session's id is never taken again while its tombstone
	// stands (its owner gets ErrGone).
	if err := r.gone(ctx, rtstore.TombstoneSession, SessionKey(principal, id), rtstore.ErrNotFound); !errors.Is(err, rtstore.ErrNotFound) {
		return nil, fmt.Errorf("create session: %w", err)
	}
	row := &rtstore.SessionRow{
		MCPTools: pinned,
		ID:       SessionKey(principal, id), Principal: principal, AgentName: p.Agent.Name, AgentVersion: p.Agent.Version,
		AgentConfig: b.config, Recording: p.Recording != nil && *p.Recording, Metadata: meta,
		CreatedAt: r.cfg.NowFunc().UTC(),
	}
	if err := r.store.SessionInsert(ctx, row); err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	return sessionView(row), nil
}

// GetSession returns a session of the calling principal. Errors: ErrNotFound.
func (r *Runtime) GetSession(ctx context.Context, id string) (*Session, error) {
	row, err := r.ownedSession(ctx, id)
	if err != nil {
		return nil, err
	}
	return sessionView(row), nil
}

// ListSessions pages the calling principal's sessions that match p's
// filters (applied by the store, before the page limit).
func (r *Runtime) ListSessions(ctx context.Context, p SessionListParams) (Page[Session], error) {
	after, limit, err := pageParams(p.ListParams)
	if err != nil {
		return Page[Session]{}, err
	}
	rows, err := r.store.SessionList(ctx, &rtstore.SessionListParams{
		Principal: PrincipalFrom(ctx), ListParams: rtstore.ListParams{After: after, Limit: limit + 1},
		AgentName: p.AgentName, AgentVersion: p.AgentVersion,
		LatestRun: rtstore.SessionStatusFilter{Status: p.Status, NoRun: p.NoRun},
	})
	if err != nil {
		return Page[Session]{}, fmt.Errorf("list sessions: %w", err)
	}
	page := Page[Session]{Items: []Session{}}
	for i, row := range rows {
		if i == limit {
			page.NextCursor = strconv.FormatInt(rows[i-1].Seq, 10)
			break
		}
		page.Items = append(page.Items, *sessionView(row))
	}
	return page, nil
}

// ownedSession returns the calling principal's session of that id (the
// id the caller knows); any other case is ErrNotFound, so existence never
// leaks. The row's ID is the session's key.
func (r *Runtime) ownedSession(ctx context.Context, id string) (*rtstore.SessionRow, error) {
	return r.ownedSessionKey(ctx, SessionKey(PrincipalFrom(ctx), id))
}

// ownedSessionKey returns the session stored under key if the calling
// principal owns it, else ErrNotFound.
func (r *Runtime) ownedSessionKey(ctx context.Context, key string) (*rtstore.SessionRow, error) {
	row, err := r.store.SessionGet(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("session: %w", r.gone(ctx, rtstore.TombstoneSession, key, err))
	}
	if row.Principal != PrincipalFrom(ctx) {
		return nil, fmt.Errorf("session: %w", ErrNotFound)
	}
	return row, nil
}

func sessionView(row *rtstore.SessionRow) *Session {
	s := &Session{
		ID: SessionIDOf(row.ID), Recording: row.Recording, Metadata: row.Metadata, CreatedAt: row.CreatedAt.UTC(),
	}
	s.Agent.Name, s.Agent.Version = row.AgentName, row.AgentVersion
	s.MCPTools, _ = pinnedTools(row.MCPTools)
	if s.MCPTools == nil {
		s.MCPTools = []mcp.PinnedTool{}
	}
	if row.LastRunID != "" {
		s.LatestRun = &RunRef{RunID: row.LastRunID, Status: row.LastRunStatus}
	}
	return s
}

// pageParams decodes a cursor and clamps the limit (default 50, max 1000).
func pageParams(p ListParams) (after int64, limit int, err error) {
	limit = p.Limit
	if limit <= 0 {
		limit = 50
	}
	if limit > 1000 {
		limit = 1000
	}
	if p.Cursor != "" {
		after, err = strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil || after < 0 {
			return 0, 0, publicErr(ErrInvalidCursor, "cursor is not one this server issued")
		}
	}
	return after, limit, nil
}

// messageDigest identifies a submitted message for request idempotency.
func messageDigest(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(mustJSON(x), mustJSON(y))
}
