package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
)

// writeStmts are prepared once on the writer connection. Inside a
// transaction txn.stmt binds them to it without preparing again.
type writeStmts struct {
	sessionInsert      *sql.Stmt
	sessionControlSet  *sql.Stmt
	sessionExists      *sql.Stmt
	sessionStartRun    *sql.Stmt
	sessionLastRun     *sql.Stmt
	runInsert          *sql.Stmt
	runGet             *sql.Stmt
	runByRequest       *sql.Stmt
	runUnfinished      *sql.Stmt
	runSeqOf           *sql.Stmt
	runUpdate          *sql.Stmt
	runUpdateSame      *sql.Stmt
	runUpdateKnown     *sql.Stmt
	runUpdateSameKnown *sql.Stmt
	runTraceContext    *sql.Stmt
	snapshotUpsert     *sql.Stmt
	stepUpsert         *sql.Stmt
	approvalUpsert     *sql.Stmt
	toolOutcomeUpsert  *sql.Stmt
	journalMaxSeq      *sql.Stmt
	journalInsert      *sql.Stmt
	journalGetByID     *sql.Stmt
	eventMaxSeq        *sql.Stmt
	eventInsert        *sql.Stmt
	eventGetByID       *sql.Stmt
	artifactPut        *sql.Stmt
	artifactRef        *sql.Stmt
	// journalInsertN[n-1], eventInsertN[n-1] and idsInsertN[n-1] insert n rows.
	journalInsertN [batchRows]*sql.Stmt
	eventInsertN   [batchRows]*sql.Stmt
	idsInsertN     [batchRows]*sql.Stmt
}

// stmtDef pairs a statement field with its SQL.
type stmtDef struct {
	dst   **sql.Stmt
	query string
}

func (w *writeStmts) defs() []stmtDef {
	defs := []stmtDef{
		{&w.sessionInsert, sqlSessionInsert},
		{&w.sessionControlSet, sqlSessionControlSet},
		{&w.sessionExists, sqlSessionExists},
		{&w.sessionStartRun, sqlSessionStartRun},
		{&w.sessionLastRun, sqlSessionLastRun},
		{&w.runInsert, sqlRunInsert},
		{&w.runGet, sqlRunGet},
		{&w.runByRequest, sqlRunByRequest},
		{&w.runUnfinished, sqlRunUnfinished},
		{&w.runSeqOf, sqlRunSeqOf},
		{&w.runUpdate, sqlRunUpdate},
		{&w.runUpdateSame, sqlRunUpdateSameStatus},
		{&w.runUpdateKnown, sqlRunUpdateKnown},
		{&w.runUpdateSameKnown, sqlRunUpdateSameStatusKnown},
		{&w.runTraceContext, sqlRunTraceContext},
		{&w.snapshotUpsert, sqlSnapshotUpsert},
		{&w.stepUpsert, sqlStepUpsert},
		{&w.approvalUpsert, sqlApprovalUpsert},
		{&w.toolOutcomeUpsert, sqlToolOutcomeUpsert},
		{&w.journalMaxSeq, sqlJournalMaxSeq},
		{&w.journalInsert, sqlJournalInsert},
		{&w.journalGetByID, sqlJournalGetByID},
		{&w.eventMaxSeq, sqlEventMaxSeq},
		{&w.eventInsert, sqlEventInsert},
		{&w.eventGetByID, sqlEventGetByID},
		{&w.artifactPut, sqlArtifactPut},
		{&w.artifactRef, sqlArtifactRef},
	}
	for n := 1; n <= batchRows; n++ {
		defs = append(defs,
			stmtDef{&w.journalInsertN[n-1], multiInsert(sqlJournalInsertRows, journalCols, n)},
			stmtDef{&w.eventInsertN[n-1], multiInsert(sqlEventInsertRows, eventCols, n)},
			stmtDef{&w.idsInsertN[n-1], multiInsert(sqlIDsInsertRows, idsCols, n)})
	}
	return defs
}

// batchRows is the most rows one multi-row INSERT writes.
const batchRows = 16

// multiInsert appends n rows of cols placeholders to head ("INSERT … VALUES").
func multiInsert(head string, cols, n int) string {
	row := "(" + strings.Repeat("?, ", cols-1) + "?)"
	return head + " " + strings.Repeat(row+", ", n-1) + row
}

func (w *writeStmts) prepare(ctx context.Context, db *sql.DB) error {
	return prepareAll(ctx, db, w.defs())
}

func (w *writeStmts) close() []error { return closeAll(w.defs()) }

// readStmts are prepared on the read pool (once per pooled connection, by
// database/sql).
type readStmts struct {
	sessionGet        *sql.Stmt
	sessionList       *sql.Stmt
	sessionControlGet *sql.Stmt
	runGet            *sql.Stmt
	runList           *sql.Stmt
	runListByStatus   *sql.Stmt
	runRows           *sql.Stmt
	eventListAfter    *sql.Stmt
	journalList       *sql.Stmt
	artifactGet       *sql.Stmt
	artifactOwned     *sql.Stmt
}

func (r *readStmts) defs() []stmtDef {
	return []stmtDef{
		{&r.sessionGet, sqlSessionGet},
		{&r.sessionList, sqlSessionList},
		{&r.sessionControlGet, sqlSessionControlGet},
		{&r.runGet, sqlRunGet},
		{&r.runList, sqlRunList},
		{&r.runListByStatus, sqlRunListByStatus},
		{&r.runRows, sqlRunRows},
		{&r.eventListAfter, sqlEventListAfter},
		{&r.journalList, sqlJournalList},
		{&r.artifactGet, sqlArtifactGet},
		{&r.artifactOwned, sqlArtifactOwned},
	}
}

func (r *readStmts) prepare(ctx context.Context, db *sql.DB) error {
	return prepareAll(ctx, db, r.defs())
}

func (r *readStmts) close() []error { return closeAll(r.defs()) }

func prepareAll(ctx context.Context, db *sql.DB, defs []stmtDef) error {
	for _, d := range defs {
		// The statements live as long as the Store: closeAll closes
		// them when it closes (or when Open fails after preparing some).
		st, err := db.PrepareContext(ctx, d.query) //nolint:sqlclosecheck // kept in *d.dst, closed by closeAll
		if err != nil {
			return fmt.Errorf("prepare %q: %w", d.query, err)
		}
		*d.dst = st
	}
	return nil
}

func closeAll(defs []stmtDef) []error {
	var errs []error
	for _, d := range defs {
		if *d.dst == nil {
			continue
		}
		if err := (*d.dst).Close(); err != nil {
			errs = append(errs, fmt.Errorf("close statement: %w", plain(err)))
		}
	}
	return errs
}

// txn is one writer transaction with its statements bound lazily; runTx
// closes them (closeStmts) once fn has run.
type txn struct {
	tx    *sql.Tx
	s     *Store
	bound map[*sql.Stmt]*sql.Stmt // the Store's statement → bound to tx
	// seq carries a run's known last seqs into and out of applyCommit.
	seq runSeqs
	// rowByRow makes applyCommit insert records and events one at a time,
	// checking each id (after a batch met a known one).
	rowByRow bool
}

// stmt returns st bound to the transaction (cached for the transaction,
// closed by closeStmts). Only queryRow and execRaw use it, so that no
// bound statement outlives the transaction's fn.
func (t *txn) stmt(ctx context.Context, st *sql.Stmt) *sql.Stmt {
	if b, ok := t.bound[st]; ok {
		return b
	}
	b := t.tx.StmtContext(ctx, st)
	t.bound[st] = b
	return b
}

// closeStmts closes the statements bound to the transaction: a bound
// statement only unregisters from the Store's (the connection's prepared
// statement stays with it).
func (t *txn) closeStmts() error {
	var errs []error
	for _, b := range t.bound {
		if err := b.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	clear(t.bound)
	return errors.Join(errs...)
}

// queryRow runs a write statement in the transaction and returns its
// first row (sql.ErrNoRows from Scan when none).
func (t *txn) queryRow(ctx context.Context, st *sql.Stmt, args ...any) scanner {
	return t.stmt(ctx, st).QueryRowContext(ctx, args...) //nolint:sqlclosecheck // bound to t: runTx closes it (closeStmts)
}

// execRaw runs a write statement in the transaction and returns the rows
// it changed, with the driver's error.
func (t *txn) execRaw(ctx context.Context, st *sql.Stmt, args ...any) (int64, error) {
	res, err := t.stmt(ctx, st).ExecContext(ctx, args...) //nolint:sqlclosecheck // bound to t: runTx closes it (closeStmts)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// exec is execRaw with the error mapped and prefixed by op.
func (t *txn) exec(ctx context.Context, op string, st *sql.Stmt, args ...any) (int64, error) {
	n, err := t.execRaw(ctx, st, args...)
	if err != nil {
		return 0, t.s.mapErr(ctx, op, err)
	}
	return n, nil
}

// inTx runs fn in one writer transaction (BEGIN IMMEDIATE) and commits it,
// or rolls back when fn fails. Errors come back mapped and prefixed by op.
//
// ctx bounds the wait for the writer and the write lock; once the
// transaction runs, database/sql rolls it back when ctx ends (the next
// statement then fails). fn gets an uncancellable ctx for its statements:
// they are short, and a cancellable one makes the driver start a
// watcher goroutine per statement, a measurable cost on the hot path.
func (s *Store) inTx(ctx context.Context, op string, fn func(ctx context.Context, t *txn) error) error {
	return s.runTx(ctx, op, func() (*sql.Tx, func(), error) {
		tx, err := s.w.BeginTx(ctx, nil)
		return tx, func() {}, err
	}, fn)
}

// inBoundaryTx is inTx for the transactions of boundaries (Commit,
// RunInsert), which nothing watches: ctx bounds the wait for the writer
// connection; the wait for the write lock is bounded by the busy timeout,
// and a ctx that ended by then fails the transaction before fn runs; a
// ctx that ends while fn runs rolls it back instead of committing. A
// transaction begun with a cancellable ctx would cost every boundary two
// goroutines, database/sql's and the driver's, each watching ctx.
func (s *Store) inBoundaryTx(ctx context.Context, op string, fn func(ctx context.Context, t *txn) error) error {
	return s.runTx(ctx, op, func() (*sql.Tx, func(), error) {
		conn, err := s.w.Conn(ctx)
		if err != nil {
			return nil, nil, err
		}
		tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
		if err == nil && ctx.Err() != nil {
			_ = tx.Rollback()
			err = ctx.Err()
		}
		if err != nil {
			_ = conn.Close()
			return nil, nil, err
		}
		return tx, func() { _ = conn.Close() }, nil
	}, fn)
}

// runTx is inTx with the transaction begun by begin, which also returns
// what to do once it has ended.
func (s *Store) runTx(ctx context.Context, op string, begin func() (*sql.Tx, func(), error), fn func(ctx context.Context, t *txn) error) error {
	tx, done, err := begin()
	if err != nil {
		return s.mapErr(ctx, op+": begin", err)
	}
	defer done()
	t := &txn{tx: tx, s: s, bound: make(map[*sql.Stmt]*sql.Stmt, 16)}
	err = fn(context.WithoutCancel(ctx), t)
	if cerr := t.closeStmts(); err == nil && cerr != nil {
		err = fmt.Errorf("close statements: %w", cerr)
	}
	if err != nil {
		_ = tx.Rollback()
		if ctxErr := ctx.Err(); ctxErr != nil && (errors.Is(err, rtstore.ErrUnavailable) || !storekit.IsOurs(err)) {
			// database/sql rolled back under us: say why.
			return fmt.Errorf("%s: %w: %w", op, ctxErr, plain(err))
		}
		return s.mapErr(ctx, op, err)
	}
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback()
		return s.mapErr(ctx, op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.mapErr(ctx, op+": commit", err)
	}
	s.committed()
	return nil
}
