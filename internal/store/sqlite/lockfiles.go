//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fileLocker is the session locker where open-file-description locks are
// missing (lock_other.go; Linux uses ofdLocker): each held session has a
// file "<sha256(id) hex>.lock" in the lock place with a flock on it (a
// flock, like an OFD lock, belongs to the open file description, so two
// Stores of one file in one process exclude each other). The holder
// removes the file before it lets go, so the folder holds only the files
// of sessions held at the moment (and of those a dead process held until
// their next release); each costs the Store one descriptor while held.
//
// Removing a lock file is safe because a locker that got the flock checks
// that the path still names the file it locked, and starts over if not:
// the holder unlinks the path while it still holds the flock, so whoever
// gets the flock of the unlinked file next sees that the path is gone or
// names another file. Only the holder unlinks, and while it holds the
// flock nobody can replace the file at the path (O_CREATE opens it).
type fileLocker struct {
	f   *os.File // the lock file: the migration lock is a flock on it
	dir string   // the lock place
}

// lockSession takes the flock of the session's file.
func (fl *fileLocker) lockSession(id string) (func() error, bool, error) {
	path := filepath.Join(fl.dir, sessionHex(id)+".lock")
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, fileMode)
		if err != nil {
			return nil, false, fmt.Errorf("open lock file: %w", err)
		}
		ok, err := tryFlock(f)
		if err != nil || !ok {
			_ = f.Close()
			return nil, false, err
		}
		same, err := namesFile(path, f)
		if err != nil {
			_ = f.Close()
			return nil, false, err
		}
		if !same {
			_ = f.Close() // its holder removed it meanwhile
			continue
		}
		return func() error {
			errR := os.Remove(path)
			errC := f.Close()
			if err := errors.Join(errR, errC); err != nil {
				return fmt.Errorf("drop lock file: %w", err)
			}
			return nil
		}, true, nil
	}
}

// lockMigrations takes the flock of the lock file.
func (fl *fileLocker) lockMigrations() (func() error, bool, error) {
	ok, err := tryFlock(fl.f)
	if err != nil || !ok {
		return nil, false, err
	}
	return func() error {
		if err := unix.Flock(int(fl.f.Fd()), unix.LOCK_UN); err != nil {
			return fmt.Errorf("unlock %s: %w", fl.f.Name(), err)
		}
		return nil
	}, true, nil
}

// namesFile tells whether path names the file f has open.
func namesFile(path string, f *os.File) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat lock file: %w", err)
	}
	named, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat lock file: %w", err)
	}
	return os.SameFile(held, named), nil
}

// tryFlock takes a non-blocking exclusive flock; false when someone else
// holds it.
func tryFlock(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		default:
			return false, fmt.Errorf("flock %s: %w", f.Name(), err)
		}
	}
}
