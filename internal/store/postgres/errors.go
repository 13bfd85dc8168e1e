package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
)

// SQLSTATE codes the store reacts to.
const (
	codeUniqueViolation = "23505"
	// codeFastMiss is raised by hxd_commit (migration 0002) when a
	// boundary's session is not held by its lease or its run is missing:
	// the one-statement commit missed, and nothing was written.
	codeFastMiss             = "HX001"
	codeForeignKeyViolation  = "23503"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeUndefinedTable       = "42P01"
	codeInvalidSchemaName    = "3F000"
	codeInsufficientPriv     = "42501"
)

// mapErr translates a driver error into the rtstore vocabulary, prefixed
// with op: pgx.ErrNoRows → ErrNotFound; what passes (unavailableCode:
// serialization failures, deadlocks, connection failures, the server
// shutting down or refusing writes, a full disk, too many connections or
// open files) and a connection that cannot be made or broke → ErrUnavailable;
// a missing table or schema → ErrSchema; a cancelled statement → the
// context's error. Any other driver error keeps its message (password
// scrubbed) but loses its type, so no pgx type escapes. Errors that are
// already ours pass through wrapped.
func (s *Store) mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if storekit.IsOurs(err) && !isDriverErr(err) {
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
		case pe.Code == codeUndefinedTable || pe.Code == codeInvalidSchemaName:
			return fmt.Errorf("%s: %w: %w (schema %q is missing or incomplete: run `hxd migrate`)",
				op, rtstore.ErrSchema, s.plain(err), s.schema)
		case unavailableCode(pe.Code):
			return fmt.Errorf("%s: %w: %w", op, rtstore.ErrUnavailable, s.plain(err))
		}
		return fmt.Errorf("%s: %w", op, s.plain(err))
	}
	if isConnErr(err) {
		return fmt.Errorf("%s: %w: %w", op, rtstore.ErrUnavailable, s.plain(err))
	}
	return fmt.Errorf("%s: %w", op, s.plain(err))
}

// unavailableCode reports whether a SQLSTATE says the database cannot do
// the work now but may soon: a serialization failure or deadlock (40001,
// 40P01; the transaction is tried again), a statement cancelled by the
// server (57014), any connection exception (class 08), insufficient
// resources (class 53: 53100 disk_full, 53200 out_of_memory, 53300
// too_many_connections, 53000 with EMFILE/ENFILE behind it), the server
// shutting down or starting (57P01 admin_shutdown, 57P02 crash_shutdown,
// 57P03 cannot_connect_now), a session it ended (57P05
// idle_session_timeout), and a server that takes no writes now (25006
// read_only_sql_transaction: a standby before its promotion). Not 57P04
// database_dropped, which waiting does not cure.
func unavailableCode(code string) bool {
	switch code {
	case pgerrcode.SerializationFailure, pgerrcode.DeadlockDetected, pgerrcode.QueryCanceled,
		pgerrcode.ReadOnlySQLTransaction, pgerrcode.AdminShutdown, pgerrcode.CrashShutdown,
		pgerrcode.CannotConnectNow, pgerrcode.IdleSessionTimeout:
		return true
	}
	return pgerrcode.IsConnectionException(code) || pgerrcode.IsInsufficientResources(code)
}

// isConnErr reports errors of an unreachable or broken connection.
func isConnErr(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, puddle.ErrClosedPool)
}

// isDriverErr reports whether err's chain holds a pgx/pgconn error (such
// errors can wrap context errors and so look like ours).
func isDriverErr(err error) bool {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	return errors.As(err, &pe) || errors.As(err, &ce) || pgconn.Timeout(err)
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
// replaced, so that neither a driver type nor the password escapes. The
// message of a connection string pgx cannot parse is rebuilt with every
// password masked whole: pgx masks them on a best-effort basis, which a
// quoted or escaped value (password='a\' b' keeps " b'") or an unencoded
// '@' or '/' in a URL's password defeats.
func scrub(err error, secret string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	secrets := []string{secret}
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		redacted := *pce
		if isURL(pce.ConnString) {
			redacted.ConnString = redactURL(pce.ConnString)
		} else {
			redacted.ConnString = redactKV(pce.ConnString)
			for _, p := range kvPasswords(pce.ConnString) {
				secrets = append(secrets, pce.ConnString[p.start:p.end], p.val)
				// pgx names a stray word of it ("missing = after …").
				for i, w := range strings.Fields(pce.ConnString[p.start:p.end]) {
					if i > 0 && len(w) >= 3 {
						secrets = append(secrets, w)
					}
				}
			}
		}
		msg = strings.ReplaceAll(msg, pce.Error(), redacted.Error())
	}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		msg = strings.ReplaceAll(msg, s, "xxxxx")
		if esc := url.QueryEscape(s); esc != s {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
		if esc := url.PathEscape(s); esc != s {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
	}
	return &plainError{msg: msg}
}

// isURL reports whether conn is in URL form (else key=value), as pgx
// decides it.
func isURL(conn string) bool {
	return strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://")
}

// urlPassword extracts the password of a connection string (URL or
// key=value form) on a best-effort basis, for scrubbing errors that occur
// before or while pgx parses it.
func urlPassword(conn string) string {
	if isURL(conn) {
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
	// key=value form: the last password keyword wins, as in libpq.
	pw := ""
	for _, p := range kvPasswords(conn) {
		if p.key == "password" {
			pw = p.val
		}
	}
	return pw
}

// kvPassword is the value of a password keyword of a key=value connection
// string: conn[start:end] as written (quotes and escapes included), val
// unescaped.
type kvPassword struct {
	key        string // password or sslpassword
	start, end int
	val        string
}

// kvPasswords returns the values of the password and sslpassword keywords
// of a key=value connection string, read as libpq reads them: a value is
// quoted ('…', a backslash escaping the next byte, so \' does not end it)
// or runs to the next whitespace, a backslash escaping the next byte (so
// "\ " does not end it). It reads malformed input leniently: a word not
// followed by '=' is skipped (after an unquoted password it is taken as
// part of it, to be masked with it), and an unterminated quoted value runs
// to the end.
func kvPasswords(conn string) []kvPassword {
	isSpace := func(c byte) bool { return strings.IndexByte(" \t\n\r\v\f", c) >= 0 }
	skipSpace := func(i int) int {
		for i < len(conn) && isSpace(conn[i]) {
			i++
		}
		return i
	}
	var out []kvPassword
	for i := skipSpace(0); i < len(conn); i = skipSpace(i) {
		k := i
		for i < len(conn) && conn[i] != '=' && !isSpace(conn[i]) {
			i++
		}
		key := conn[k:i]
		if i = skipSpace(i); i == len(conn) || conn[i] != '=' {
			continue // not a keyword=value pair
		}
		i = skipSpace(i + 1)
		start := i
		var val strings.Builder
		if i < len(conn) && conn[i] == '\'' {
			for i++; i < len(conn) && conn[i] != '\''; i++ {
				if conn[i] == '\\' && i+1 < len(conn) {
					i++
				}
				val.WriteByte(conn[i])
			}
			if i < len(conn) {
				i++ // the closing quote
			}
		} else {
			for ; i < len(conn) && !isSpace(conn[i]); i++ {
				if conn[i] == '\\' {
					if i++; i == len(conn) {
						break // libpq drops a trailing backslash
					}
				}
				val.WriteByte(conn[i])
			}
		}
		if key == "password" || key == "sslpassword" {
			end := i
			if start < len(conn) && conn[start] != '\'' {
				// Words after an unquoted value that are no keyword=value
				// pair (libpq refuses them) are most likely the rest of a
				// password with a space that was meant to be quoted.
				for {
					w := skipSpace(end)
					e := w
					for e < len(conn) && conn[e] != '=' && !isSpace(conn[e]) {
						e++
					}
					if e == w || (skipSpace(e) < len(conn) && conn[skipSpace(e)] == '=') {
						break
					}
					end = e
				}
			}
			out = append(out, kvPassword{key: key, start: start, end: end, val: val.String()})
			i = end
		}
	}
	return out
}

// passwordParam matches a password or sslpassword parameter of a URL's
// query, its value up to the next '&'.
var passwordParam = regexp.MustCompile(`([?&](?:ssl)?password=)[^&]*`)

// redactURL returns the connection URL conn with its password and the
// values of its password and sslpassword parameters replaced by xxxxx. The
// password runs from the userinfo's first ':' to the last '@' of the
// authority; when conn does not parse as a URL, to the last '@' of the
// whole string, since an unencoded '@', '/', '?' or '#' in a password is
// what makes a URL unparseable.
func redactURL(conn string) string {
	scheme, rest, _ := strings.Cut(conn, "://")
	authority := rest
	if _, err := url.Parse(conn); err == nil {
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			authority = rest[:i]
		}
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		if c := strings.IndexByte(authority[:at], ':'); c >= 0 {
			rest = rest[:c+1] + "xxxxx" + rest[at:]
		}
	}
	return scheme + "://" + passwordParam.ReplaceAllString(rest, "${1}xxxxx")
}

// redactKV returns the key=value connection string conn with every
// password value, quotes and escapes included, replaced by xxxxx.
func redactKV(conn string) string {
	var b strings.Builder
	last := 0
	for _, p := range kvPasswords(conn) {
		b.WriteString(conn[last:p.start])
		b.WriteString("xxxxx")
		last = p.end
	}
	b.WriteString(conn[last:])
	return b.String()
}
