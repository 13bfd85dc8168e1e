package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hxd/internal/runtime/rtstore"
)

// Session SQL.
const (
	sqlSessionInsert = `INSERT INTO sessions
    (id, principal, agent_name, agent_version, agent_config, recording, metadata, created_at, mcp_tools)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING seq`

	// sqlSessionColumns lists the columns scanSession reads; the latest
	// run's status comes from a join on last_run_id.
	sqlSessionColumns = `s.seq, s.id, s.principal, s.agent_name, s.agent_version, s.agent_config,
    s.recording, s.metadata, s.created_at, COALESCE(s.last_run_id, ''), COALESCE(r.status, ''), s.mcp_tools`

	sqlSessionGet = `SELECT ` + sqlSessionColumns + `
FROM sessions s LEFT JOIN runs r ON r.id = s.last_run_id
WHERE s.id = $1`

	sqlSessionList = `SELECT ` + sqlSessionColumns + `
FROM sessions s LEFT JOIN runs r ON r.id = s.last_run_id
WHERE s.principal = $1 AND s.seq > $2
    AND ($4::text = '' OR s.agent_name = $4) AND ($5::text = '' OR s.agent_version = $5)
    AND ($6::int = 0 OR COALESCE(r.status, '') = $7::text)
ORDER BY s.seq
LIMIT $3`

	sqlSessionControlGet = `SELECT control FROM sessions WHERE id = $1`
	sqlSessionControlSet = `UPDATE sessions SET control = $1 WHERE id = $2`
)

// SessionInsert stores a new session and sets row.Seq (and row.CreatedAt,
// to now when zero, truncated to microseconds). Nil AgentConfig is stored
// as JSON null, nil Metadata as {}, nil MCPTools as []. Returns ErrAlreadyExists if the id is
// taken.
func (s *Store) SessionInsert(ctx context.Context, row *rtstore.SessionRow) error {
	if row == nil || row.ID == "" {
		return errors.New("insert session: empty id")
	}
	op := "insert session " + row.ID
	if err := s.checkOpen(op); err != nil {
		return err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	created := row.CreatedAt
	if created.IsZero() {
		created = now()
	}
	created = dbTime(created)
	var seq int64
	err := s.pool.QueryRow(ctx, sqlSessionInsert,
		row.ID, row.Principal, row.AgentName, row.AgentVersion, jsonOr(row.AgentConfig, "null"),
		row.Recording, jsonOr(row.Metadata, "{}"), created, jsonOr(row.MCPTools, "[]"),
	).Scan(&seq)
	if isUniqueViolation(err, "") {
		return fmt.Errorf("%s: %w", op, rtstore.ErrAlreadyExists)
	}
	if err != nil {
		return s.mapErr(ctx, op, err)
	}
	row.Seq = seq
	row.CreatedAt = created
	row.LastRunID, row.LastRunStatus = "", ""
	return nil
}

// SessionGet returns a session with its latest run id and status.
// Returns ErrNotFound.
func (s *Store) SessionGet(ctx context.Context, id string) (*rtstore.SessionRow, error) {
	op := "get session " + id
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	row, err := scanSession(s.pool.QueryRow(ctx, sqlSessionGet, id))
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return row, nil
}

// SessionList returns p.Principal's sessions with Seq > p.After in Seq
// order, at most p.Limit (all when Limit <= 0).
func (s *Store) SessionList(ctx context.Context, p *rtstore.SessionListParams) ([]*rtstore.SessionRow, error) {
	if p == nil {
		return nil, errors.New("list sessions: nil params")
	}
	const op = "list sessions"
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	statusOn, status := p.LatestRun.Args()
	rows, err := s.pool.Query(ctx, sqlSessionList, p.Principal, p.After, limitArg(p.Limit),
		p.AgentName, p.AgentVersion, statusOn, status)
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*rtstore.SessionRow, error) {
		return scanSession(r)
	})
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// SessionControlGet returns the control flag ("" | "paused" |
// "cancelled"). Returns ErrNotFound.
func (s *Store) SessionControlGet(ctx context.Context, id string) (string, error) {
	op := "get session control " + id
	if err := s.checkOpen(op); err != nil {
		return "", err
	}
	if control, ok := s.ctl.get(id); ok {
		return control, nil
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	var control string
	if err := s.pool.QueryRow(ctx, sqlSessionControlGet, id).Scan(&control); err != nil {
		return "", s.mapErr(ctx, op, err)
	}
	return control, nil
}

// SessionControlSet sets the control flag. It needs no lease: it is how
// others signal the owner. Returns ErrNotFound, or an error for a value
// other than "", "paused" and "cancelled".
func (s *Store) SessionControlSet(ctx context.Context, id, control string) error {
	op := "set session control " + id
	switch control {
	case rtstore.ControlNone, rtstore.ControlPaused, rtstore.ControlCancelled:
	default:
		return fmt.Errorf("%s: invalid value %q", op, control)
	}
	if err := s.checkOpen(op); err != nil {
		return err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	s.ctl.forget(id)
	defer s.ctl.forget(id)
	ct, err := s.pool.Exec(ctx, sqlSessionControlSet, control, id)
	if err != nil {
		return s.mapErr(ctx, op, err)
	}
	if ct.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", op, rtstore.ErrNotFound)
	}
	return nil
}

// scanSession reads the columns of sqlSessionColumns.
func scanSession(row pgx.Row) (*rtstore.SessionRow, error) {
	var (
		r            rtstore.SessionRow
		config, meta []byte
		mcpTools     []byte
		created      time.Time
		lastStatus   string
	)
	if err := row.Scan(&r.Seq, &r.ID, &r.Principal, &r.AgentName, &r.AgentVersion, &config,
		&r.Recording, &meta, &created, &r.LastRunID, &lastStatus, &mcpTools); err != nil {
		return nil, err
	}
	r.CreatedAt = created.UTC()
	r.AgentConfig = config
	r.Metadata = meta
	r.MCPTools = mcpTools
	r.LastRunStatus = rtstore.RunStatus(lastStatus)
	return &r, nil
}

// jsonOr returns raw as a string, or def when raw is empty.
func jsonOr(raw []byte, def string) string {
	if len(raw) == 0 {
		return def
	}
	return string(raw)
}
