package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"hxd/internal/runtime/rtstore"
)

// mapErr translates a driver or database/sql error into the rtstore
// vocabulary, prefixed with op: sql.ErrNoRows → ErrNotFound, SQLITE_BUSY and
// SQLITE_LOCKED or a closed store → ErrUnavailable, an interrupted statement
// → the context's error. Any other driver error keeps its message but loses
// its type, so no driver error type escapes the package. Errors that are
// already ours pass through wrapped.
func (s *Store) mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, rtstore.ErrNotFound)
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone) || isClosedErr(err) {
		return fmt.Errorf("%s: %w: %w", op, rtstore.ErrUnavailable, plain(err))
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%s: %w: %w", op, rtstore.ErrUnavailable, plain(se))
		case sqlite3.SQLITE_INTERRUPT:
			if ctx != nil && ctx.Err() != nil {
				return fmt.Errorf("%s: %w", op, ctx.Err())
			}
		}
		return fmt.Errorf("%s: %w", op, plain(se))
	}
	if isOurs(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if ctx != nil && ctx.Err() != nil {
		return fmt.Errorf("%s: %w: %w", op, ctx.Err(), plain(err))
	}
	// Unknown origin (driver internals, golang-migrate): keep the text only.
	return fmt.Errorf("%s: %w", op, plain(err))
}

// isOurs reports whether err is safe to pass through with its chain: one of
// the rtstore sentinels or a context error.
func isOurs(err error) bool {
	for _, target := range []error{
		rtstore.ErrNotFound, rtstore.ErrAlreadyExists, rtstore.ErrSessionBusy,
		rtstore.ErrRequestConflict, rtstore.ErrRecordConflict, rtstore.ErrForeignRecord,
		rtstore.ErrLeaseLost, rtstore.ErrUnavailable, rtstore.ErrSchema,
		context.Canceled, context.DeadlineExceeded,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY
// constraint failure.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// isKnownID reports whether err is a PRIMARY KEY failure of a batched
// insert: a known journal record or event id (ids), or a taken k (journal,
// events), which the row-by-row retry reports as such.
func isKnownID(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// plainError carries a foreign error's message without its type.
type plainError struct{ msg string }

func (e *plainError) Error() string { return e.msg }

// plain strips err down to its message so that no driver type escapes.
func plain(err error) error {
	if err == nil {
		return nil
	}
	return &plainError{msg: err.Error()}
}

// isClosedErr reports database/sql's (unexported) errors for a closed pool or
// statement: the store was closed.
func isClosedErr(err error) bool {
	msg := err.Error()
	return msg == "sql: database is closed" || msg == "sql: statement is closed"
}
