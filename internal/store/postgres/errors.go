package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"hxd/internal/runtime/rtstore"
)

// SQLSTATE codes the store reacts to.
const (
	codeUniqueViolation           = "23505"
	codeInvalidTextRepresentation = "22P02"
	codeForeignKeyViolation       = "23503"
	codeSerializationFailure      = "40001"
	codeDeadlockDetected          = "40P01"
	codeUndefinedTable            = "42P01"
	codeInvalidSchemaName         = "3F000"
	codeInsufficientPriv          = "42501"
	codeQueryCanceled             = "57014"
)

// mapErr translates a driver error into the rtstore vocabulary, prefixed
// with op: pgx.ErrNoRows → ErrNotFound; serialization failures, deadlocks,
// connection failures, server shutdown and resource exhaustion →
// ErrUnavailable; a missing table or schema → ErrSchema; a cancelled
// statement → the context's error. Any other driver error keeps its message
// (password scrubbed) but loses its type, so no pgx type escapes. Errors
// that are already ours pass through wrapped.
func (s *Store) mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if isOurs(err) && !isDriverErr(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, rtstore.ErrNotFound)
	}
	if ctx != nil && ctx.Err() != nil {
		return fmt.Errorf("%s: %w: %w", op, ctx.Err(), s.plain(err))
	}
	if s.closed.Load() {
		return fmt.Errorf("%s: %w: store closed", op, rtstore.ErrUnavailable)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == codeSerializationFailure || pe.Code == codeDeadlockDetected:
			return fmt.Errorf("%s: %w: %w", op, rtstore.ErrUnavailable, s.plain(err))
		case pe.Code == codeUndefinedTable || pe.Code == codeInvalidSchemaName:
			return fmt.Errorf("%s: %w: %w (schema %q is missing or incomplete: run `hxd migrate`)",
				op, rtstore.ErrSchema, s.plain(err), s.schema)
		case pe.Code == codeQueryCanceled,
			strings.HasPrefix(pe.Code, "08"),  // connection exception
			strings.HasPrefix(pe.Code, "53"),  // insufficient resources (too many connections, disk full)
			strings.HasPrefix(pe.Code, "57P"): // operator intervention (shutdown, cannot connect now)
			return fmt.Errorf("%s: %w: %w", op, rtstore.ErrUnavailable, s.plain(err))
		}
		return fmt.Errorf("%s: %w", op, s.plain(err))
	}
	if isConnErr(err) {
		return fmt.Errorf("%s: %w: %w", op, rtstore.ErrUnavailable, s.plain(err))
	}
	return fmt.Errorf("%s: %w", op, s.plain(err))
}

// isConnErr reports errors of an unreachable or broken connection.
func isConnErr(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "closed pool") || strings.Contains(err.Error(), "conn closed")
}

// isDriverErr reports whether err's chain holds a pgx/pgconn error (such
// errors can wrap context errors and so look like ours).
func isDriverErr(err error) bool {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	return errors.As(err, &pe) || errors.As(err, &ce) || pgconn.Timeout(err)
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

// sqlState returns err's SQLSTATE, "" when it is not a server error.
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isNoRows reports pgx.ErrNoRows.
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// isUniqueViolation reports a unique or primary-key violation, optionally
// of the named constraint ("" = any).
func isUniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != codeUniqueViolation {
		return false
	}
	return constraint == "" || pe.ConstraintName == constraint
}

// plainError carries a foreign error's message without its type.
type plainError struct{ msg string }

func (e *plainError) Error() string { return e.msg }

// plain strips err down to its message, scrubbed of the password.
func (s *Store) plain(err error) error { return scrub(err, s.secret) }

// scrub strips err down to its message with every occurrence of secret
// replaced, so that neither a driver type nor the password escapes.
func scrub(err error, secret string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, "xxxxx")
		if esc := url.QueryEscape(secret); esc != secret {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
		if esc := url.PathEscape(secret); esc != secret {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
	}
	return &plainError{msg: msg}
}

// urlPassword extracts the password of a connection string (URL or
// key=value form) on a best-effort basis, for scrubbing errors that occur
// before or while pgx parses it.
func urlPassword(conn string) string {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		if u, err := url.Parse(conn); err == nil {
			if u.User != nil {
				if p, ok := u.User.Password(); ok {
					return p
				}
			}
			return u.Query().Get("password")
		}
		// Unparseable URL: take what sits between "user:" and the last '@'
		// of the authority.
		rest := conn[strings.Index(conn, "://")+3:]
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			rest = rest[:i]
		}
		at := strings.LastIndexByte(rest, '@')
		if at < 0 {
			return ""
		}
		if _, p, ok := strings.Cut(rest[:at], ":"); ok {
			if u, err := url.PathUnescape(p); err == nil {
				return u
			}
			return p
		}
		return ""
	}
	// key=value form: password=secret or password='se cret'.
	i := strings.Index(conn, "password")
	for i >= 0 {
		rest := strings.TrimLeft(conn[i+len("password"):], " \t")
		if strings.HasPrefix(rest, "=") {
			rest = strings.TrimLeft(rest[1:], " \t")
			if strings.HasPrefix(rest, "'") {
				var b strings.Builder
				for j := 1; j < len(rest); j++ {
					switch {
					case rest[j] == '\\' && j+1 < len(rest):
						j++
						b.WriteByte(rest[j])
					case rest[j] == '\'':
						return b.String()
					default:
						b.WriteByte(rest[j])
					}
				}
				return b.String()
			}
			if end := strings.IndexAny(rest, " \t\n"); end >= 0 {
				return rest[:end]
			}
			return rest
		}
		next := strings.Index(conn[i+1:], "password")
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return ""
}
