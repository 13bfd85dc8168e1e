package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// Commit's transactions bypass database/sql: they run on the writer's
// driver connection (sql.Conn.Raw) with driver statements prepared once on
// it, BEGIN IMMEDIATE and COMMIT included (database/sql's BeginTx and
// Commit make the driver parse both on every transaction, and every
// statement through database/sql pays for locks, argument conversion and
// a result wrapper). Every other write still goes through database/sql.
// Errors are the driver's, as database/sql returns them, so mapErr maps
// them alike.

// driverStmts are the writer's driver statements, keyed by the database/sql
// statement they stand for. Only the holder of the writer connection (one
// at a time: the writer pool has one connection) uses them.
type driverStmts struct {
	conn                    any // the driver connection they belong to
	byStmt                  map[*sql.Stmt]driver.Stmt
	begin, commit, rollback driver.Stmt
}

const (
	sqlBeginImmediate = "BEGIN IMMEDIATE"
	sqlCommit         = "COMMIT"
	sqlRollback       = "ROLLBACK"
)

// driverTx is one writer transaction on the driver connection.
type driverTx struct {
	conn driver.Conn
	ds   *driverStmts
	q    map[*sql.Stmt]string // the SQL of each write statement
}

// bind returns the driver statements of conn, preparing the transaction
// statements when conn is new.
func (d *driverStmts) bind(ctx context.Context, conn any) error {
	if d.conn == conn {
		return nil
	}
	// A new connection (the old one is gone with its statements).
	*d = driverStmts{}
	pc, ok := conn.(driver.ConnPrepareContext)
	if !ok {
		return errors.New("sqlite driver connection cannot prepare statements")
	}
	for _, p := range []struct {
		dst   *driver.Stmt
		query string
	}{{&d.begin, sqlBeginImmediate}, {&d.commit, sqlCommit}, {&d.rollback, sqlRollback}} {
		st, err := pc.PrepareContext(ctx, p.query)
		if err != nil {
			d.close()
			return err
		}
		*p.dst = st
	}
	d.conn = conn
	d.byStmt = make(map[*sql.Stmt]driver.Stmt, 32)
	return nil
}

// close finalizes the statements.
func (d *driverStmts) close() []error {
	var errs []error
	for _, st := range append([]driver.Stmt{d.begin, d.commit, d.rollback}, valuesOf(d.byStmt)...) {
		if st == nil {
			continue
		}
		if err := st.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close statement: %w", plain(err)))
		}
	}
	*d = driverStmts{}
	return errs
}

func valuesOf(m map[*sql.Stmt]driver.Stmt) []driver.Stmt {
	out := make([]driver.Stmt, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// stmt returns the driver statement of st, prepared on first use.
func (t *driverTx) stmt(ctx context.Context, st *sql.Stmt) (driver.Stmt, error) {
	if ds, ok := t.ds.byStmt[st]; ok {
		return ds, nil
	}
	q, ok := t.q[st]
	if !ok {
		return nil, errors.New("statement is not a write statement")
	}
	ds, err := t.conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	t.ds.byStmt[st] = ds
	return ds, nil
}

// namedValues converts args as database/sql does for a driver without its
// own converter.
func namedValues(args []any) ([]driver.NamedValue, error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		switch a.(type) {
		case nil, int64, string, []byte, float64, bool:
		default:
			v, err := driver.DefaultParameterConverter.ConvertValue(a)
			if err != nil {
				return nil, fmt.Errorf("argument %d: %w", i+1, err)
			}
			a = v
		}
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return nv, nil
}

// exec runs st and returns the rows it changed.
func (t *driverTx) exec(ctx context.Context, st *sql.Stmt, args []any) (int64, error) {
	ds, err := t.stmt(ctx, st)
	if err != nil {
		return 0, err
	}
	nv, err := namedValues(args)
	if err != nil {
		return 0, err
	}
	res, err := ds.(driver.StmtExecContext).ExecContext(ctx, nv)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// queryRow runs st and reads its first row, as sql.Row does.
func (t *driverTx) queryRow(ctx context.Context, st *sql.Stmt, args []any) *driverRow {
	ds, err := t.stmt(ctx, st)
	if err != nil {
		return &driverRow{err: err}
	}
	nv, err := namedValues(args)
	if err != nil {
		return &driverRow{err: err}
	}
	rows, err := ds.(driver.StmtQueryContext).QueryContext(ctx, nv)
	if err != nil {
		return &driverRow{err: err}
	}
	vals := make([]driver.Value, len(rows.Columns()))
	err = rows.Next(vals)
	if errors.Is(err, io.EOF) {
		err = sql.ErrNoRows
	}
	// As sql.Row.Scan: the statement's own error (say, a constraint of an
	// UPDATE … RETURNING) can come at its reset, by Close.
	if cerr := rows.Close(); cerr != nil && (err == nil || errors.Is(err, sql.ErrNoRows)) {
		err = cerr
	}
	if err != nil {
		return &driverRow{err: err}
	}
	return &driverRow{vals: vals}
}

// driverRow is one row read on the driver connection.
type driverRow struct {
	vals []driver.Value
	err  error
}

// Scan copies the row into dest (*int64, *string or *[]byte), as sql.Row's
// Scan does for those types.
func (r *driverRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("sql: expected %d destination arguments in Scan, not %d", len(r.vals), len(dest))
	}
	for i, v := range r.vals {
		if err := assign(dest[i], v); err != nil {
			return fmt.Errorf("sql: Scan error on column index %d: %w", i, err)
		}
	}
	return nil
}

func assign(dst any, v driver.Value) error {
	switch d := dst.(type) {
	case *int64:
		if n, ok := v.(int64); ok {
			*d = n
			return nil
		}
	case *string:
		switch x := v.(type) {
		case string:
			*d = x
			return nil
		case []byte:
			*d = string(x)
			return nil
		}
	case *[]byte:
		switch x := v.(type) {
		case string:
			*d = []byte(x)
			return nil
		case []byte:
			*d = append([]byte(nil), x...)
			return nil
		case nil:
			*d = nil
			return nil
		}
	}
	return fmt.Errorf("unsupported Scan, storing driver.Value type %T into type %T", v, dst)
}

// inDriverTx is inTx on the writer's driver connection: BEGIN IMMEDIATE,
// fn, COMMIT (ROLLBACK when fn or COMMIT fails). ctx bounds the wait for
// the writer connection; the wait for the write lock is bounded by the
// busy timeout, and a ctx that ended meanwhile rolls back. fn gets an
// uncancellable ctx, and a ctx that ends while fn runs rolls the
// transaction back, as inTx. (A statement run with a ctx that can end
// costs a goroutine in the driver, which watches it to interrupt the
// statement; none of these statements needs one.)
func (s *Store) inDriverTx(ctx context.Context, op string, fn func(ctx context.Context, t *txn) error) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return s.mapErr(ctx, op+": begin", err)
	}
	defer func() { _ = conn.Close() }()
	var out error
	err = conn.Raw(func(dc any) error {
		out = s.driverTx(ctx, op, dc, fn)
		return nil
	})
	if err != nil {
		return s.mapErr(ctx, op, err)
	}
	return out
}

func (s *Store) driverTx(ctx context.Context, op string, dc any, fn func(ctx context.Context, t *txn) error) error {
	ds := &s.drv
	if err := ds.bind(ctx, dc); err != nil {
		return s.mapErr(ctx, op+": begin", err)
	}
	bg := context.WithoutCancel(ctx)
	_, err := ds.begin.(driver.StmtExecContext).ExecContext(bg, nil)
	if err == nil {
		err = ctx.Err() // it ended while BEGIN waited for the lock
	}
	if err != nil {
		s.driverRollback()
		return s.mapErr(ctx, op+": begin", err)
	}
	t := &txn{s: s, d: &driverTx{conn: dc.(driver.Conn), ds: ds, q: s.ws.queries}}
	if err := fn(bg, t); err != nil {
		s.driverRollback()
		return s.mapErr(ctx, op, err)
	}
	if err := ctx.Err(); err != nil {
		s.driverRollback()
		return s.mapErr(ctx, op, err)
	}
	if _, err := ds.commit.(driver.StmtExecContext).ExecContext(bg, nil); err != nil {
		// A failed COMMIT can leave the transaction open.
		s.driverRollback()
		return s.mapErr(ctx, op+": commit", err)
	}
	s.committed()
	return nil
}

// driverRollback ends the open transaction, if any (an error means there
// was none, or the connection is gone).
func (s *Store) driverRollback() {
	_, _ = s.drv.rollback.(driver.StmtExecContext).ExecContext(context.Background(), nil)
}

// closeDriverStmts finalizes the driver statements (before the writer
// closes: an unfinalized statement keeps its connection open).
func (s *Store) closeDriverStmts() []error {
	if s.drv.conn == nil || s.w == nil {
		return nil
	}
	conn, err := s.w.Conn(context.Background())
	if err != nil {
		return []error{fmt.Errorf("close statements: %w", plain(err))}
	}
	defer func() { _ = conn.Close() }()
	var errs []error
	_ = conn.Raw(func(dc any) error {
		if dc == s.drv.conn {
			errs = s.drv.close()
		}
		return nil
	})
	return errs
}
