package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
)

// Event SQL. payload holds the RunEvent JSON with its cursor. k is
// (runs.seq << 32) + seq, so a run's events are the k range of its seq.
const (
	sqlEventMaxSeq = `SELECT seq FROM events WHERE k > (?1 << 32) AND k < ((?1 + 1) << 32) ORDER BY k DESC LIMIT 1`
	// sqlEventInsert inserts one event; its ids row (sqlIDsInsertRows) goes
	// in with it, and a known id fails that, so the caller looks the id up
	// first.
	sqlEventInsert = `INSERT INTO events (k, run_id, seq, event_id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)`
	// sqlEventInsertRows heads a multi-row insert of eventCols values per
	// row.
	sqlEventInsertRows = `INSERT INTO events (k, run_id, seq, event_id, payload, created_at) VALUES`
	sqlEventGetByID    = `SELECT e.run_id, e.seq FROM ids i JOIN events e ON e.k = i.k WHERE i.id = ? AND i.tag = 1`
	sqlEventListAfter  = `SELECT payload, created_at FROM events
WHERE k > ((SELECT seq FROM runs WHERE id = ?1) << 32) + MIN(MAX(?2, 0), 4294967295)
  AND k < (((SELECT seq FROM runs WHERE id = ?1) + 1) << 32)
ORDER BY k
LIMIT ?3`
)

// eventCols is the number of values of an event row.
const eventCols = 6

// EventListAfter returns up to limit events of a run with cursor > after,
// in order (all when limit <= 0). An unknown run has no events.
func (s *Store) EventListAfter(ctx context.Context, runID string, after int64, limit int) ([]rtstore.RunEvent, error) {
	op := "list events of run " + runID
	rows, err := s.rs.eventListAfter.QueryContext(ctx, runID, after, limitArg(limit))
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	defer func() { _ = rows.Close() }()
	var out []rtstore.RunEvent
	for rows.Next() {
		var (
			payload []byte
			created string
		)
		if err := rows.Scan(&payload, &created); err != nil {
			return nil, s.mapErr(ctx, op, err)
		}
		var ev rtstore.RunEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("%s: decode event: %w", op, err)
		}
		if ev.CreatedAt, err = parseTime(created); err != nil {
			return nil, fmt.Errorf("%s: decode event %s: %w", op, ev.EventID, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// eventAppender appends events of one run inside a transaction. It reads
// the last seq once and counts from there; a skipped duplicate consumes no
// seq.
type eventAppender struct {
	t      *txn
	runID  string
	runSeq int64 // runs.seq of the run
	last   int64 // last seq of the run; -1 until read
}

// append inserts ev with the next cursor and returns its stored JSON, the
// cursor and true; for a known event id it inserts nothing and returns the
// stored cursor (ev.Cursor when the event belongs to another run) and
// false.
func (e *eventAppender) append(ctx context.Context, ev rtstore.RunEvent) (payload []byte, cursor string, inserted bool, err error) {
	t := e.t
	if err := e.load(ctx); err != nil {
		return nil, "", false, err
	}
	if e.last >= maxSeq {
		return nil, "", false, fmt.Errorf("event stream of run %s is full (%d events)", e.runID, e.last)
	}
	seq := e.last + 1
	original := ev.Cursor
	ev.Cursor = storekit.FormatCursor(seq)
	data, err := marshalJSON(&ev)
	if err != nil {
		return nil, "", false, fmt.Errorf("encode event %s: %w", ev.EventID, err)
	}
	var (
		runID     string
		storedSeq int64
	)
	err = t.queryRow(ctx, t.s.ws.eventGetByID, ev.EventID).Scan(&runID, &storedSeq)
	if errors.Is(err, sql.ErrNoRows) {
		k := seqKey(e.runSeq, seq)
		if _, err := t.exec(ctx, "insert event", t.s.ws.eventInsert, k, e.runID, seq, ev.EventID, string(data), formatTime(now())); err != nil {
			return nil, "", false, err
		}
		if _, err := t.exec(ctx, "insert event id", t.s.ws.idsInsertN[0], ev.EventID, idTagEvent, k); err != nil {
			return nil, "", false, err
		}
		e.last = seq
		return data, ev.Cursor, true, nil
	}
	if err != nil {
		return nil, "", false, t.s.mapErr(ctx, "read event "+ev.EventID, err)
	}
	// Known: a re-send of this run's event keeps its cursor.
	if runID == e.runID {
		return nil, storekit.FormatCursor(storedSeq), false, nil
	}
	return nil, original, false, nil
}

// load reads the run's last seq unless known.
func (e *eventAppender) load(ctx context.Context) error {
	if e.last >= 0 {
		return nil
	}
	t := e.t
	err := t.queryRow(ctx, t.s.ws.eventMaxSeq, e.runSeq).Scan(&e.last)
	if errors.Is(err, sql.ErrNoRows) {
		e.last, err = 0, nil
	}
	if err != nil {
		return t.s.mapErr(ctx, "read event seq", err)
	}
	return nil
}
