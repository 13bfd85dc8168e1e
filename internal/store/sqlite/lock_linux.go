package sqlite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// newSessionLocker returns the Linux locker: open-file-description locks
// on bytes of the one lock file (lockSession, doc.go).
func newSessionLocker(f *os.File, _ string) sessionLocker {
	return &ofdLocker{f: f, held: make(map[int64]struct{})}
}

// ofdLocker locks one byte of the lock file per session with
// open-file-description locks (F_OFD_SETLK, Linux 3.15 and later). Such a
// lock belongs to the Store's open file description rather than to the
// process (as a classic fcntl lock would): two Stores of one file in one
// process exclude each other, closing another descriptor of the file does
// not drop it, and the OS drops it when the process dies. A Store holds
// one descriptor however many sessions it drives.
type ofdLocker struct {
	f *os.File

	mu   sync.Mutex
	held map[int64]struct{} // the bytes this Store holds
}

// lockSession locks the session's byte (sessionByte).
func (o *ofdLocker) lockSession(id string) (func() error, bool, error) {
	return o.lockByte(sessionByte(id))
}

// lockMigrations locks migrationByte.
func (o *ofdLocker) lockMigrations() (func() error, bool, error) {
	return o.lockByte(migrationByte)
}

// lockByte takes an exclusive lock of byte off without waiting. The OS
// would let this Store take a byte it already holds (the lock is its own),
// so a byte held for another session of this Store is refused here: two
// sessions sharing a byte give a false busy, never two owners.
func (o *ofdLocker) lockByte(off int64) (func() error, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, mine := o.held[off]; mine {
		return nil, false, nil
	}
	ok, err := o.setLock(unix.F_WRLCK, off)
	if err != nil || !ok {
		return nil, false, err
	}
	o.held[off] = struct{}{}
	var once sync.Once
	var errU error
	return func() error {
		once.Do(func() { errU = o.unlockByte(off) })
		return errU
	}, true, nil
}

// unlockByte drops the lock of byte off. On failure the byte stays held
// (and refused to this Store) until the Store closes.
func (o *ofdLocker) unlockByte(off int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.setLock(unix.F_UNLCK, off); err != nil {
		return err
	}
	delete(o.held, off)
	return nil
}

// setLock applies an F_OFD_SETLK of type typ to byte off; false when
// another open file description holds a conflicting lock.
func (o *ofdLocker) setLock(typ int16, off int64) (bool, error) {
	lk := unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: off, Len: 1}
	rc, err := o.f.SyscallConn()
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", o.f.Name(), err)
	}
	var errL error
	// Control keeps the descriptor open until the call returns.
	if err := rc.Control(func(fd uintptr) {
		for {
			errL = unix.FcntlFlock(fd, unix.F_OFD_SETLK, &lk)
			if !errors.Is(errL, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		return false, fmt.Errorf("lock %s: %w", o.f.Name(), err)
	}
	switch {
	case errL == nil:
		return true, nil
	case errors.Is(errL, unix.EAGAIN), errors.Is(errL, unix.EACCES):
		return false, nil
	default:
		return false, fmt.Errorf("lock byte %d of %s: %w", off, o.f.Name(), errL)
	}
}
