package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// Journal SQL. payload holds the whole record JSON, seq included. k is
// (runs.seq << 32) + seq, so a run's records are the k range of its seq.
const (
	sqlJournalMaxSeq = `SELECT seq FROM journal WHERE k > (?1 << 32) AND k < ((?1 + 1) << 32) ORDER BY k DESC LIMIT 1`
	// sqlJournalInsert inserts one record; its ids row (sqlIDsInsertRows)
	// goes in with it, and a known id fails that, so the caller looks the
	// id up first.
	sqlJournalInsert = `INSERT INTO journal (k, run_id, seq, id, payload) VALUES (?, ?, ?, ?, ?)`
	// sqlJournalInsertRows heads a multi-row insert of journalCols values
	// per row.
	sqlJournalInsertRows = `INSERT INTO journal (k, run_id, seq, id, payload) VALUES`
	sqlJournalGetByID    = `SELECT j.payload FROM ids i JOIN journal j ON j.k = i.k WHERE i.id = ? AND i.tag = 0`
	sqlJournalList       = `SELECT seq, payload FROM journal
WHERE k > ((SELECT seq FROM runs WHERE id = ?1) << 32) + MIN(MAX(?2, 0), 4294967295)
  AND k < (((SELECT seq FROM runs WHERE id = ?1) + 1) << 32)
ORDER BY k
LIMIT ?3`
)

// sqlIDsInsertRows heads a multi-row insert into ids of idsCols values per
// row (id, tag, k); a known id fails it with a PRIMARY KEY violation.
const sqlIDsInsertRows = `INSERT INTO ids (id, tag, k) VALUES`

// idsCols is the number of values of an ids row; idTag* are its tags.
const (
	idsCols                        = 3
	idTagJournal, idTagEvent int64 = 0, 1
)

// journalCols is the number of values of a journal row.
const journalCols = 5

// seqKey is the k of seq in the run with the given runs.seq.
func seqKey(runSeq, seq int64) int64 { return runSeq<<32 | seq }

// maxSeq is the largest journal or event seq of a run (k leaves 32 bits).
const maxSeq = 1<<32 - 1

// JournalList returns up to limit records of a run with Seq > after, in
// order (all when limit <= 0). An unknown run has no records.
func (s *Store) JournalList(ctx context.Context, runID string, after int64, limit int) ([]journal.Record, error) {
	op := "list journal of run " + runID
	rows, err := s.rs.journalList.QueryContext(ctx, runID, after, limitArg(limit))
	if err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	defer func() { _ = rows.Close() }()
	var out []journal.Record
	for rows.Next() {
		var (
			seq     int64
			payload []byte
		)
		if err := rows.Scan(&seq, &payload); err != nil {
			return nil, s.mapErr(ctx, op, err)
		}
		var rec journal.Record
		if err := json.Unmarshal(payload, &rec); err != nil {
			return nil, fmt.Errorf("%s: decode record %d: %w", op, seq, err)
		}
		rec.Seq = seq
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.mapErr(ctx, op, err)
	}
	return out, nil
}

// journalAppender appends records of one run inside a transaction. It reads
// the last seq once and counts from there.
type journalAppender struct {
	t      *txn
	runID  string
	runSeq int64 // runs.seq of the run
	last   int64 // last seq of the run; -1 until read
}

// append inserts rec with the next seq, or skips it when a record with its
// id is stored with equal content. Returns ErrForeignRecord or
// ErrRecordConflict.
func (j *journalAppender) append(ctx context.Context, rec journal.Record) error {
	t := j.t
	if rec.RunID != j.runID {
		return foreignRecord(rec.ID, rec.RunID, j.runID)
	}
	if err := j.load(ctx); err != nil {
		return err
	}
	if j.last >= maxSeq {
		return fmt.Errorf("journal of run %s is full (%d records)", j.runID, j.last)
	}
	rec.Seq = j.last + 1
	data, err := marshalJSON(&rec)
	if err != nil {
		return fmt.Errorf("encode journal record %s: %w", rec.ID, err)
	}
	var stored []byte
	err = t.queryRow(ctx, t.s.ws.journalGetByID, rec.ID).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		k := seqKey(j.runSeq, rec.Seq)
		if _, err := t.exec(ctx, "insert journal record", t.s.ws.journalInsert, k, j.runID, rec.Seq, rec.ID, string(data)); err != nil {
			return err
		}
		if _, err := t.exec(ctx, "insert journal record id", t.s.ws.idsInsertN[0], rec.ID, idTagJournal, k); err != nil {
			return err
		}
		j.last = rec.Seq
		return nil
	}
	if err != nil {
		return t.s.mapErr(ctx, "read journal record "+rec.ID, err)
	}
	// The id is known: identical content is a re-send, anything else a conflict.
	var old journal.Record
	if err := json.Unmarshal(stored, &old); err != nil {
		return fmt.Errorf("decode stored journal record %s: %w", rec.ID, err)
	}
	if !journal.SameContent(&old, &rec) {
		return fmt.Errorf("journal record %s: %w", rec.ID, rtstore.ErrRecordConflict)
	}
	return nil
}

// load reads the run's last seq unless known.
func (j *journalAppender) load(ctx context.Context) error {
	if j.last >= 0 {
		return nil
	}
	t := j.t
	err := t.queryRow(ctx, t.s.ws.journalMaxSeq, j.runSeq).Scan(&j.last)
	if errors.Is(err, sql.ErrNoRows) {
		j.last, err = 0, nil
	}
	if err != nil {
		return t.s.mapErr(ctx, "read journal seq", err)
	}
	return nil
}

// marshalJSON encodes v compactly without HTML escaping, so stored JSON
// keeps the bytes of raw payloads.
func marshalJSON(v any) ([]byte, error) {
	var e rowEncoder
	return e.encode(v)
}

// rowEncoder encodes the rows of one commit as marshalJSON does into one
// growing buffer, sparing a buffer and an encoder per row. A returned
// slice stays valid: the buffer is only ever appended to.
type rowEncoder struct {
	buf []byte
	enc *json.Encoder
}

// Write appends p (the encoder's output).
func (e *rowEncoder) Write(p []byte) (int, error) {
	e.buf = append(e.buf, p...)
	return len(p), nil
}

// encode encodes v and returns its JSON (without the encoder's newline).
func (e *rowEncoder) encode(v any) ([]byte, error) {
	if e.enc == nil {
		e.enc = json.NewEncoder(e)
		e.enc.SetEscapeHTML(false)
	}
	start := len(e.buf)
	if err := e.enc.Encode(v); err != nil {
		e.buf = e.buf[:start]
		return nil, err
	}
	end := len(e.buf)
	if end > start && e.buf[end-1] == '\n' {
		end--
	}
	// Capped, so an append to the result never writes into the buffer.
	return e.buf[start:end:end], nil
}

// RunSnapshot reads the run and its journal in one read transaction (a
// consistent cut: a WAL reader sees one snapshot) and hands both to fn.
// Returns ErrNotFound for an unknown run, else fn's error.
func (s *Store) RunSnapshot(ctx context.Context, runID string, fn func(*rtstore.RunRow, func(func(journal.Record) error) error) error) error {
	op := "snapshot run " + runID
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return s.mapErr(ctx, op, err)
	}
	defer func() { _ = tx.Rollback() }()
	get := tx.StmtContext(ctx, s.rs.runGet)
	defer func() { _ = get.Close() }()
	run, err := scanRun(get.QueryRowContext(ctx, runID))
	if err != nil {
		return s.mapErr(ctx, op, err)
	}
	records := func(yield func(journal.Record) error) error {
		const page = 1000
		var after int64
		for {
			recs, err := s.journalPage(ctx, tx, runID, after, page)
			if err != nil {
				return fmt.Errorf("%s: %w", op, err)
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

// journalPage reads up to limit records with seq > after inside tx.
func (s *Store) journalPage(ctx context.Context, tx *sql.Tx, runID string, after int64, limit int) ([]journal.Record, error) {
	list := tx.StmtContext(ctx, s.rs.journalList)
	defer func() { _ = list.Close() }()
	rows, err := list.QueryContext(ctx, runID, after, limit)
	if err != nil {
		return nil, s.mapErr(ctx, "read journal", err)
	}
	defer func() { _ = rows.Close() }()
	var recs []journal.Record
	for rows.Next() {
		var (
			seq     int64
			payload []byte
		)
		if err := rows.Scan(&seq, &payload); err != nil {
			return nil, s.mapErr(ctx, "read journal", err)
		}
		var rec journal.Record
		if err := json.Unmarshal(payload, &rec); err != nil {
			return nil, fmt.Errorf("decode record %d: %w", seq, err)
		}
		rec.Seq = seq
		recs = append(recs, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.mapErr(ctx, "read journal", err)
	}
	return recs, nil
}
