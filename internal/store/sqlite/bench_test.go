package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// BenchmarkRawCommit is the floor: one single-row INSERT per transaction
// through the same DSN (pragmas, BEGIN IMMEDIATE, one connection).
func BenchmarkRawCommit(b *testing.B) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", writerDSN(filepath.Join(b.TempDir(), "raw.db")))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	ins, err := db.PrepareContext(ctx, `INSERT INTO t (v) VALUES (?)`)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ins.Close() }()
	b.ReportAllocs()
	for b.Loop() {
		if err := rawCommit(ctx, db, ins); err != nil {
			b.Fatal(err)
		}
	}
}

// rawCommit commits one row through ins bound to a transaction, closing
// the bound statement as hxd's transactions do.
func rawCommit(ctx context.Context, db *sql.DB, ins *sql.Stmt) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	st := tx.StmtContext(ctx, ins)
	defer func() { _ = st.Close() }()
	if _, err := st.ExecContext(ctx, "x"); err != nil {
		return err
	}
	return tx.Commit()
}

// BenchmarkCommit is a typical recorded boundary: ~2 KB state, a step, three
// records (boundary, boundary, checkpoint) and two events with records.
func BenchmarkCommit(b *testing.B) {
	// Like the runtime: an uncancellable context bounded by a timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	s, err := Open(ctx, Config{Path: filepath.Join(b.TempDir(), "hxd.db"), AutoMigrate: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()

	sessionID, runID := "ses-bench", "run-bench"
	if err := s.SessionInsert(ctx, &rtstore.SessionRow{ID: sessionID, Principal: "bench", Recording: true}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.RunInsert(ctx, &rtstore.RunInsertParams{Run: rtstore.RunRow{
		ID: runID, SessionID: sessionID, RequestID: "r", MessageDigest: "d", Phase: "start",
	}}); err != nil {
		b.Fatal(err)
	}
	lease, err := s.SessionLock(ctx, sessionID)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = lease.Release(ctx) }()

	state, err := json.Marshal(map[string]any{
		"run_id": runID, "session_id": sessionID, "iterations": 3, "phase": "prepare_model",
		"messages": []map[string]string{{"role": "user", "text": strings.Repeat("lorem ipsum ", 160)}},
	})
	if err != nil {
		b.Fatal(err)
	}
	rec := func(kind journal.Kind, payload string) journal.Record {
		return journal.Record{
			Version: 1, ID: uuid.NewString(), Kind: kind, RecordedAt: journal.Timestamp(time.Now()),
			SessionID: sessionID, RunID: runID, StepID: "3", AttemptID: "1", Payload: json.RawMessage(payload),
		}
	}
	ev := func(typ string) rtstore.PendingEvent {
		r := rec(journal.KindEvent, "")
		return rtstore.PendingEvent{
			Event: rtstore.RunEvent{
				Type: typ, Data: json.RawMessage(`{"text":"The invoice total is 42.00 EUR."}`),
				SessionID: sessionID, RunID: runID, StepID: "3", AttemptID: "1", EventID: uuid.NewString(),
			},
			Record: &r,
		}
	}
	b.ReportMetric(float64(len(state)), "state_bytes")
	b.ReportAllocs()
	for b.Loop() {
		c := &rtstore.Commit{
			SessionID: sessionID, RunID: runID, Lease: lease,
			Status: rtstore.StatusRunning, Phase: "prepare_model", State: state,
			StepID: "3", Step: json.RawMessage(`{"iteration":3,"attempt":1,"usage":{"input_tokens":812,"output_tokens":64}}`),
			Records: []journal.Record{
				rec(journal.KindModelResponse, `{"raw":{"id":"msg_1","content":[{"type":"text","text":"The invoice total is 42.00 EUR."}]}}`),
				rec(journal.KindModelCompleted, `{"usage":{"input_tokens":812,"output_tokens":64},"stop_reason":"end_turn"}`),
				rec(journal.KindCheckpoint, `{"phase":"prepare_model","iterations":3}`),
			},
			Events: []rtstore.PendingEvent{ev("text_complete"), ev("turn_complete")},
		}
		if err := s.Commit(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}
