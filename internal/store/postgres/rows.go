package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"hxd/internal/runtime/rtstore"
)

// sqlRunRows reads a run's step and tool rows in one statement (one
// snapshot): kind (rtstore.RowStep, RowOutcome, RowPending), id, payload.
const sqlRunRows = `SELECT 's'::text, id, payload::text FROM steps WHERE run_id = $1
UNION ALL SELECT 'o'::text, id, payload::text FROM tool_outcomes WHERE run_id = $1
UNION ALL SELECT 'a'::text, id, payload::text FROM approvals WHERE run_id = $1`

// RunRowsGet returns a run's step and tool rows; an unknown run has none.
func (s *Store) RunRowsGet(ctx context.Context, runID string) (*rtstore.RunRows, error) {
	op := "read rows of run " + runID
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, sqlRunRows, runID)
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	var (
		c        rtstore.RunRowsCollector
		kind, id string
		payload  []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&kind, &id, &payload}, func() error {
		c.Add(kind, id, payload)
		return nil
	})
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return c.Rows(), nil
}
