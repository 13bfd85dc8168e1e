package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hxd/internal/runtime/rtstore"
)

// Event SQL. payload holds the RunEvent JSON with its cursor.
const (
	sqlEventListAfter = `SELECT payload, created_at FROM events
WHERE run_id = $1 AND seq > $2
ORDER BY seq
LIMIT $3`
)

// EventListAfter returns up to limit events of a run with cursor > after,
// in order (all when limit <= 0). An unknown run has no events.
func (s *Store) EventListAfter(ctx context.Context, runID string, after int64, limit int) ([]rtstore.RunEvent, error) {
	op := "list events of run " + runID
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, sqlEventListAfter, runID, after, limitArg(limit))
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	var (
		out     []rtstore.RunEvent
		payload []byte
		created time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&payload, &created}, func() error {
		var ev rtstore.RunEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return fmt.Errorf("decode event: %w", err)
		}
		ev.CreatedAt = created.UTC()
		out = append(out, ev)
		return nil
	})
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return out, nil
}
