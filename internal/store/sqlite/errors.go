package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"syscall"

	"modernc.org/sqlite"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
)

// SQLite result codes (https://www.sqlite.org/rescode.html), as
// (*sqlite.Error).Code returns them: the low byte is the primary code, the
// bits above it name an extended code. They are part of SQLite's stable
// C API.
const (
	codeBusy                 = 5
	codeLocked               = 6
	codeInterrupt            = 9
	codeIOErr                = 10
	codeFull                 = 13
	codeCantOpen             = 14
	codeConstraint           = 19
	codeConstraintPrimaryKey = codeConstraint | 6<<8
	codeConstraintUnique     = codeConstraint | 8<<8
)

// mapErr translates a driver or database/sql error into the rtstore
// vocabulary, prefixed with op: sql.ErrNoRows → ErrNotFound; a database
// that is locked or full, or cannot be written or opened for lack of disk
// space or file descriptors (transientCode), an OS error saying so
// (shortageErrno) or a closed store → ErrUnavailable; an interrupted
// statement → the context's error. Any other driver error keeps its
// message but loses its type, so no driver error type escapes the
// package. Errors that are already ours pass through wrapped.
func (s *Store) mapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, rtstore.ErrNotFound)
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone) || s.down.Load() {
		return fmt.Errorf("%s: %w: %w", op, rtstore.ErrUnavailable, plain(err))
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		if ok, cause := transientCode(se.Code(), s.shortage); ok {
			if cause != nil {
				return fmt.Errorf("%s: %w: %w (%w)", op, rtstore.ErrUnavailable, plain(se), cause)
			}
			return fmt.Errorf("%s: %w: %w", op, rtstore.ErrUnavailable, plain(se))
		}
		if se.Code()&0xff == codeInterrupt && ctx != nil && ctx.Err() != nil {
			return fmt.Errorf("%s: %w", op, ctx.Err())
		}
		return fmt.Errorf("%s: %w", op, plain(se))
	}
	if errno, ok := shortageErrno(err); ok {
		return fmt.Errorf("%s: %w: %w (%w)", op, rtstore.ErrUnavailable, plain(err), errno)
	}
	if storekit.IsOurs(err) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if ctx != nil && ctx.Err() != nil {
		return fmt.Errorf("%s: %w: %w", op, ctx.Err(), plain(err))
	}
	// Unknown origin (driver internals, golang-migrate): keep the text only.
	return fmt.Errorf("%s: %w", op, plain(err))
}

// transientCode reports whether a SQLite result code (extended or primary)
// means that storage is unavailable for now, and what the OS is short of
// when that is known: SQLITE_BUSY and SQLITE_LOCKED (another connection
// holds the lock past the busy timeout) and SQLITE_FULL (the file system
// is full: the unix VFS reports ENOSPC so, or the database reached
// max_page_count) always; an I/O error (SQLITE_IOERR_*) or a file SQLite
// could not open (SQLITE_CANTOPEN) only while shortage reports the OS out
// of disk space or file descriptors, since both codes also stand for
// faults that waiting does not cure (a failing disk, a missing folder, a
// permission). SQLite keeps the errno behind them to itself, hence the
// probe.
func transientCode(code int, shortage func() error) (bool, error) {
	switch code & 0xff {
	case codeBusy, codeLocked, codeFull:
		return true, nil
	case codeIOErr, codeCantOpen:
		if cause := shortage(); cause != nil {
			return true, cause
		}
	}
	return false, nil
}

// lowSpace is the free space below which the database's file system
// counts as full for an I/O error (shortage): a boundary commit appends
// well under a MiB to the WAL.
const lowSpace = 8 << 20

// shortage probes the OS for what a failed SQLite write or open may have
// lacked: syscall.EMFILE or ENFILE when this process cannot open a file
// now, syscall.ENOSPC when the database's file system has less than
// lowSpace bytes or no inodes left for it; nil when neither. It is cheap
// (one open and one statfs) and runs only after an I/O or open error.
func (s *Store) shortage() error {
	if err := s.descriptors(); err != nil {
		return err
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &fs); err == nil {
		if fs.Bavail*uint64(fs.Bsize) < lowSpace || (fs.Files > 0 && fs.Ffree == 0) {
			return syscall.ENOSPC
		}
	}
	return nil
}

// descriptors returns syscall.EMFILE or ENFILE when this process cannot
// open a file now (it opens the database's folder), else nil.
func (s *Store) descriptors() error {
	f, err := os.Open(s.dir)
	if err != nil {
		if errno, ok := shortageErrno(err); ok {
			return errno
		}
		return nil
	}
	_ = f.Close()
	return nil
}

// shortageErrno returns the errno of an OS error saying that the disk is
// full (ENOSPC, EDQUOT) or that no file descriptor is left (EMFILE,
// ENFILE): conditions that pass, so storage is unavailable meanwhile.
func shortageErrno(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return 0, false
	}
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE, syscall.ENFILE:
		return errno, true
	}
	return 0, false
}

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY
// constraint failure.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	return se.Code() == codeConstraintUnique || se.Code() == codeConstraintPrimaryKey
}

// isKnownID reports whether err is a PRIMARY KEY failure of a batched
// insert: a known journal record or event id (ids), or a taken k (journal,
// events), which the row-by-row retry reports as such.
func isKnownID(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == codeConstraintPrimaryKey
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
