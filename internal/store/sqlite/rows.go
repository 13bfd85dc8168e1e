package sqlite

import (
	"context"

	"hxd/internal/runtime/rtstore"
)

// sqlRunRows reads a run's step and tool rows in one statement (one
// consistent read): kind (rtstore.RowStep, RowOutcome, RowPending), id,
// payload.
const sqlRunRows = `SELECT 's', id, payload FROM steps WHERE run_id = ?1
UNION ALL SELECT 'o', id, payload FROM tool_outcomes WHERE run_id = ?1
UNION ALL SELECT 'a', id, payload FROM approvals WHERE run_id = ?1`

// RunRowsGet returns a run's step and tool rows; an unknown run has none.
func (s *Store) RunRowsGet(ctx context.Context, runID string) (*rtstore.RunRows, error) {
	op := "read rows of run " + runID
	rows, err := s.rs.runRows.QueryContext(ctx, runID)
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	defer func() { _ = rows.Close() }()
	var c rtstore.RunRowsCollector
	for rows.Next() {
		var (
			kind, id string
			payload  []byte
		)
		if err := rows.Scan(&kind, &id, &payload); err != nil {
			return nil, s.mapErr(ctx, op, err)
		}
		c.Add(kind, id, payload)
	}
	if err := rows.Err(); err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return c.Rows(), nil
}
