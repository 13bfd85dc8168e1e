package sqlite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/google/uuid"

	"hxd/internal/runtime/rtstore"
)

// SessionLock takes the OS lock of a session (REFERENCE §4.6): a
// non-blocking exclusive flock on "<db folder>/.<sha256(id) hex>.lock",
// created with mode 0600 and never deleted. The OS drops the lock when the
// process dies, so another process can resume at once. Returns
// ErrSessionBusy if this Store already holds the session or another process
// (or another Store on the same file) does; ErrUnavailable once closed. The
// lease fences Commit in this process; its Generation is always 0.
func (s *Store) SessionLock(ctx context.Context, id string) (rtstore.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lock session %s: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("lock session %s: %w: store closed", id, rtstore.ErrUnavailable)
	}
	if _, held := s.locks[id]; held {
		return nil, fmt.Errorf("lock session %s: %w: session is already executing", id, rtstore.ErrSessionBusy)
	}
	// Read-write: the holder reads the control nonce (control.go) from it.
	f, err := os.OpenFile(s.lockPath(id), os.O_CREATE|os.O_RDWR, fileMode)
	if err != nil {
		return nil, fmt.Errorf("lock session %s: open lock file: %w", id, err)
	}
	ok, err := tryLock(f)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock session %s: %w", id, err)
	}
	if !ok {
		_ = f.Close()
		return nil, fmt.Errorf("lock session %s: %w: session is owned by another process", id, rtstore.ErrSessionBusy)
	}
	l := &lease{store: s, sessionID: id, token: uuid.NewString(), file: f}
	s.locks[id] = l
	return l, nil
}

// lockPath is the lock file of a session.
func (s *Store) lockPath(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return filepath.Join(s.dir, "."+hex.EncodeToString(sum[:])+".lock")
}

// tryLock takes a non-blocking exclusive flock; false when someone else
// holds it.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		default:
			return false, fmt.Errorf("flock %s: %w", f.Name(), err)
		}
	}
}

// unlockFile drops a flock.
func unlockFile(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		return fmt.Errorf("unlock %s: %w", f.Name(), err)
	}
	return nil
}

// lease is a held session lock. Commit holds mu for reading for its whole
// transaction, Release for writing, so a commit fenced by a lease never
// overlaps the lease's release.
type lease struct {
	store     *Store
	sessionID string
	token     string

	mu       sync.RWMutex
	file     *os.File
	released bool

	ctl controlCache // the session's control flag as last read
}

// SessionID returns the locked session.
func (l *lease) SessionID() string { return l.sessionID }

// Token returns the uuid identifying this ownership.
func (l *lease) Token() string { return l.token }

// Generation returns 0: the SQLite store fences in-process only.
func (l *lease) Generation() int64 { return 0 }

// Renew checks that the lease is still held: an OS lock does not expire, so
// there is nothing to extend. Returns ErrLeaseLost once released.
func (l *lease) Renew(context.Context) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.released {
		return fmt.Errorf("renew session %s: %w", l.sessionID, rtstore.ErrLeaseLost)
	}
	return nil
}

// Release unlocks and closes the lock file (the file stays). A no-op for a
// lease already released. Waits for a Commit fenced by this lease.
func (l *lease) Release(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	s := l.store
	s.mu.Lock()
	if s.locks[l.sessionID] == l {
		delete(s.locks, l.sessionID)
	}
	s.mu.Unlock()
	errU := unlockFile(l.file)
	errC := l.file.Close()
	if err := errors.Join(errU, errC); err != nil {
		return fmt.Errorf("release session %s: %w", l.sessionID, err)
	}
	return nil
}

// fence checks that le (nil allowed) is a live lease of this Store for
// sessionID and keeps it from being released until the returned func runs.
// Returns ErrLeaseLost otherwise.
func (s *Store) fence(le rtstore.Lease, sessionID string) (func(), error) {
	if le == nil {
		return func() {}, nil
	}
	l, ok := le.(*lease)
	if !ok || l.store != s || l.sessionID != sessionID {
		return nil, fmt.Errorf("session %s: %w: lease is not this store's lease of the session", sessionID, rtstore.ErrLeaseLost)
	}
	l.mu.RLock()
	if l.released {
		l.mu.RUnlock()
		return nil, fmt.Errorf("session %s: %w", sessionID, rtstore.ErrLeaseLost)
	}
	return l.mu.RUnlock, nil
}
