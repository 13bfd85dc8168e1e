package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// Journal SQL. payload holds the whole record JSON, seq included, as the
// exact text hxd wrote (a json column).
const (
	sqlJournalList = `SELECT seq, payload FROM journal
WHERE run_id = $1 AND seq > $2
ORDER BY seq
LIMIT $3`
)

// JournalList returns up to limit records of a run with Seq > after, in
// order (all when limit <= 0). An unknown run has no records.
func (s *Store) JournalList(ctx context.Context, runID string, after int64, limit int) ([]journal.Record, error) {
	op := "list journal of run " + runID
	if err := s.checkOpen(op); err != nil {
		return nil, err
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, sqlJournalList, runID, after, limitArg(limit))
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	recs, err := collectRecords(rows)
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return recs, nil
}

// collectRecords decodes journal rows (seq, payload).
func collectRecords(rows pgx.Rows) ([]journal.Record, error) {
	var (
		out     []journal.Record
		seq     int64
		payload []byte
	)
	_, err := pgx.ForEachRow(rows, []any{&seq, &payload}, func() error {
		var rec journal.Record
		if err := json.Unmarshal(payload, &rec); err != nil {
			return fmt.Errorf("decode record %d: %w", seq, err)
		}
		rec.Seq = seq
		out = append(out, rec)
		return nil
	})
	return out, err
}

// RunSnapshot reads the run and its journal in one REPEATABLE READ, read
// only transaction (a consistent cut: every statement sees one snapshot)
// and hands both to fn. The records are read in pages of 1000 as fn
// iterates. Returns ErrNotFound for an unknown run, else fn's error.
func (s *Store) RunSnapshot(ctx context.Context, runID string, fn func(*rtstore.RunRow, func(func(journal.Record) error) error) error) error {
	op := "snapshot run " + runID
	if err := s.checkOpen(op); err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: sqlBeginSnapshot})
	if err != nil {
		return s.mapErr(ctx, op, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	run, err := scanRun(tx.QueryRow(ctx, sqlRunGet, runID))
	if err != nil {
		return s.mapErr(ctx, op, err)
	}
	records := func(yield func(journal.Record) error) error {
		const page = 1000
		var after int64
		for {
			rows, err := tx.Query(ctx, sqlJournalList, runID, after, page)
			if err != nil {
				return s.mapErr(ctx, op+": read journal", err)
			}
			recs, err := collectRecords(rows)
			if err != nil {
				return s.mapErr(ctx, op+": read journal", err)
			}
			for _, rec := range recs {
				if err := yield(rec); err != nil {
					return err
				}
				after = rec.Seq
			}
			if len(recs) < page {
				return nil
			}
		}
	}
	return fn(run, records)
}

// jsonBuffers are marshalJSON's encoding buffers.
var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// marshalJSON encodes v compactly without HTML escaping, so stored JSON
// keeps the bytes of raw payloads. It encodes into a pooled buffer and
// returns an exact copy: one allocation, however large v.
func marshalJSON(v any) (string, error) {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			jsonBuffers.Put(buf)
		}
	}()
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}
