package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"hxd/internal/runtime/rtstore"
)

// Session SQL.
const (
	sqlSessionInsert = `INSERT INTO sessions
    (id, principal, agent_name, agent_version, agent_config, recording, metadata, created_at, mcp_tools)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING seq`

	// sqlSessionColumns lists the columns scanSession reads; the latest
	// run's status comes from a join on last_run_id.
	sqlSessionColumns = `s.seq, s.id, s.principal, s.agent_name, s.agent_version, s.agent_config,
    s.recording, s.metadata, s.created_at, COALESCE(s.last_run_id, ''), COALESCE(r.status, ''), s.mcp_tools`

	sqlSessionGet = `SELECT ` + sqlSessionColumns + `
FROM sessions s LEFT JOIN runs r ON r.id = s.last_run_id
WHERE s.id = ?`

	sqlSessionList = `SELECT ` + sqlSessionColumns + `
FROM sessions s LEFT JOIN runs r ON r.id = s.last_run_id
WHERE s.principal = ? AND s.seq > ?
    AND (? = '' OR s.agent_name = ?) AND (? = '' OR s.agent_version = ?)
    AND (? = 0 OR COALESCE(r.status, '') = ?)
ORDER BY s.seq
LIMIT ?`

	sqlSessionControlGet = `SELECT control FROM sessions WHERE id = ?`
	sqlSessionControlSet = `UPDATE sessions SET control = ? WHERE id = ?`
	sqlSessionExists     = `SELECT 1 FROM sessions WHERE id = ?`
	// sqlSessionStartRun points the session at a new run and clears its
	// control flag.
	sqlSessionStartRun = `UPDATE sessions SET control = '', last_run_id = ? WHERE id = ?`
	// sqlSessionLastRun skips the page write when nothing changes (the
	// common case: every boundary of one run).
	sqlSessionLastRun = `UPDATE sessions SET last_run_id = ?1 WHERE id = ?2 AND last_run_id IS NOT ?1`
)

// SessionInsert stores a new session and sets row.Seq (and row.CreatedAt,
// to now when zero, truncated to microseconds). Nil AgentConfig is stored
// as JSON null, nil Metadata as {}, nil MCPTools as []. Returns ErrAlreadyExists if the id is
// taken.
func (s *Store) SessionInsert(ctx context.Context, row *rtstore.SessionRow) error {
	if row == nil || row.ID == "" {
		return errors.New("insert session: empty id")
	}
	created := row.CreatedAt
	if created.IsZero() {
		created = now()
	}
	createdText := formatTime(created)
	config := jsonOr(row.AgentConfig, "null")
	meta := jsonOr(row.Metadata, "{}")
	var seq int64
	err := s.ws.sessionInsert.QueryRowContext(ctx,
		row.ID, row.Principal, row.AgentName, row.AgentVersion, config, boolInt(row.Recording), meta, createdText,
		jsonOr(row.MCPTools, "[]"),
	).Scan(&seq)
	if isUniqueViolation(err) {
		return fmt.Errorf("insert session %s: %w", row.ID, rtstore.ErrAlreadyExists)
	}
	if err != nil {
		return s.mapErr(ctx, "insert session "+row.ID, err)
	}
	s.committed()
	row.Seq = seq
	row.CreatedAt, _ = parseTime(createdText)
	row.LastRunID, row.LastRunStatus = "", ""
	return nil
}

// SessionGet returns a session with its latest run id and status.
// Returns ErrNotFound.
func (s *Store) SessionGet(ctx context.Context, id string) (*rtstore.SessionRow, error) {
	row, err := scanSession(s.rs.sessionGet.QueryRowContext(ctx, id))
	if err != nil {
		return nil, s.mapErr(ctx, "get session "+id, err)
	}
	return row, nil
}

// SessionList returns p.Principal's sessions with Seq > p.After in Seq
// order, at most p.Limit (all when Limit <= 0).
func (s *Store) SessionList(ctx context.Context, p *rtstore.SessionListParams) ([]*rtstore.SessionRow, error) {
	if p == nil {
		return nil, errors.New("list sessions: nil params")
	}
	statusOn, status := p.LatestRun.Args()
	rows, err := s.rs.sessionList.QueryContext(ctx, p.Principal, p.After,
		p.AgentName, p.AgentName, p.AgentVersion, p.AgentVersion, statusOn, status, limitArg(p.Limit))
	if err != nil {
		return nil, s.mapErr(ctx, "list sessions", err)
	}
	defer func() { _ = rows.Close() }()
	var out []*rtstore.SessionRow
	for rows.Next() {
		row, err := scanSession(rows)
		if err != nil {
			return nil, s.mapErr(ctx, "list sessions", err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, s.mapErr(ctx, "list sessions", err)
	}
	return out, nil
}

// SessionControlGet returns the control flag ("" | "paused" |
// "cancelled"). Returns ErrNotFound.
//
// For a session this Store holds the lock of, a value read before is
// returned without a query as long as nobody wrote the flag since
// (control.go).
func (s *Store) SessionControlGet(ctx context.Context, id string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("get session control %s: %w", id, err)
	}
	cached, ok, l, nonce := s.cachedControl(id)
	if ok {
		return cached, nil
	}
	var control string
	if err := s.rs.sessionControlGet.QueryRowContext(ctx, id).Scan(&control); err != nil {
		return "", s.mapErr(ctx, "get session control "+id, err)
	}
	if l != nil {
		l.storeControl(control, nonce)
	}
	return control, nil
}

// SessionControlSet sets the control flag. Returns ErrNotFound, or an
// error for a value other than "", "paused" and "cancelled".
func (s *Store) SessionControlSet(ctx context.Context, id, control string) error {
	switch control {
	case rtstore.ControlNone, rtstore.ControlPaused, rtstore.ControlCancelled:
	default:
		return fmt.Errorf("set session control %s: invalid value %q", id, control)
	}
	res, err := s.ws.sessionControlSet.ExecContext(ctx, control, id)
	if err != nil {
		return s.mapErr(ctx, "set session control "+id, err)
	}
	s.committed()
	n, err := res.RowsAffected()
	if err != nil {
		return s.mapErr(ctx, "set session control "+id, err)
	}
	if n == 0 {
		return fmt.Errorf("set session control %s: %w", id, rtstore.ErrNotFound)
	}
	return s.signalControl(id)
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// scanSession reads the columns of sqlSessionColumns.
func scanSession(sc scanner) (*rtstore.SessionRow, error) {
	var (
		row                   rtstore.SessionRow
		config, meta, created string
		mcpTools              string
		recording             int64
		lastStatus            string
	)
	if err := sc.Scan(&row.Seq, &row.ID, &row.Principal, &row.AgentName, &row.AgentVersion, &config,
		&recording, &meta, &created, &row.LastRunID, &lastStatus, &mcpTools); err != nil {
		return nil, err
	}
	t, err := parseTime(created)
	if err != nil {
		return nil, err
	}
	row.CreatedAt = t
	row.AgentConfig = []byte(config)
	row.Metadata = []byte(meta)
	row.MCPTools = []byte(mcpTools)
	row.Recording = recording != 0
	row.LastRunStatus = rtstore.RunStatus(lastStatus)
	return &row, nil
}

// jsonOr returns raw as a string, or def when raw is empty.
func jsonOr(raw []byte, def string) string {
	if len(raw) == 0 {
		return def
	}
	return string(raw)
}

// boolInt stores a bool as 0 or 1.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// sessionMustExist returns ErrNotFound unless the session exists.
func (t *txn) sessionMustExist(ctx context.Context, id string) error {
	var one int64
	err := t.queryRow(ctx, t.s.ws.sessionExists, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %s: %w", id, rtstore.ErrNotFound)
	}
	if err != nil {
		return t.s.mapErr(ctx, "check session "+id, err)
	}
	return nil
}
