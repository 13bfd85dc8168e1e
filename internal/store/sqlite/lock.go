package sqlite

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"

	"hxd/internal/runtime/rtstore"
)

// The lock place. Everything the store keeps beside the database other
// than SQLite's own -wal and -shm lives in one folder, "<db>.hxd" (mode
// 0700): the lock file "lock" (mode 0600), whose bytes serve as the
// session locks, the migration lock and the control nonces (control.go),
// and, only where open-file-description locks are missing (not Linux),
// the lock files of the sessions held at the moment (lockfiles.go).
// Neither its entries nor the store's open files grow with the number of
// sessions on Linux.

// lockPlaceSuffix names the lock place after the database file.
const lockPlaceSuffix = ".hxd"

// lockFileName is the lock file inside the lock place.
const lockFileName = "lock"

// sessionLocker takes the OS locks of one Store. Each Store has its own,
// on its own open file description of the lock file, so two Stores of one
// file exclude each other as two processes do, and the OS drops every lock
// of a process when it dies.
type sessionLocker interface {
	// lockSession takes the lock of session id without waiting; ok is
	// false when another Store or process holds it. unlock drops it.
	lockSession(id string) (unlock func() error, ok bool, err error)
	// lockMigrations takes the migration lock without waiting.
	lockMigrations() (unlock func() error, ok bool, err error)
}

// openLockPlace creates the lock place if needed and opens its lock file
// for this Store.
func (s *Store) openLockPlace() error {
	if err := os.Mkdir(s.lockDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create lock folder: %w", err)
	}
	// Read-write: the control nonces (control.go) are written through it.
	f, err := os.OpenFile(filepath.Join(s.lockDir, lockFileName), os.O_CREATE|os.O_RDWR, fileMode)
	if err != nil {
		return fmt.Errorf("open lock file: %w", err)
	}
	s.lockFile = f
	s.locker = newSessionLocker(f, s.lockDir)
	return nil
}

// closeLockPlace closes the lock file, dropping every lock still held
// through it. Safe when it was never opened.
func (s *Store) closeLockPlace() error {
	if s.lockFile == nil {
		return nil
	}
	if err := s.lockFile.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("close lock file: %w", err)
	}
	return nil
}

// sessionHash is the SHA-256 of a session id, from which its lock and
// control nonce are placed.
func sessionHash(id string) [sha256.Size]byte {
	return sha256.Sum256([]byte(id))
}

// sessionHex names a session's lock file where sessions have files
// (lockfiles.go).
func sessionHex(id string) string {
	sum := sessionHash(id)
	return hex.EncodeToString(sum[:])
}

// migrationByte is the byte of the lock file locked by migrations.
const migrationByte = 0

// sessionByte is the byte of the lock file that is session id's lock:
// one of the 2^63-1 offsets 1..2^63-1 (the largest an off_t allows), from
// the first 8 bytes of the id's SHA-256.
//
// Two sessions share a byte with probability 2^-63; only sessions whose
// locks are held at the same moment can collide, so with k of them held
// at once across every process of the file the chance that any two share
// one is about k²/2^64 (5e-10 for 100,000). A collision is a false
// session_busy for the later one, never two owners: across Stores the OS
// refuses the byte, and within a Store (where the OS would let one open
// file description take a byte twice) the locker refuses a byte it holds.
func sessionByte(id string) int64 {
	sum := sessionHash(id)
	v := binary.BigEndian.Uint64(sum[:8])
	return 1 + int64(v%(1<<63-1))
}

// SessionLock takes the OS lock of a session (REFERENCE §4.6): a lock that
// no other process and no other Store of the file can hold at the same
// time, and that the OS drops when the process dies, so another process
// can resume at once. On Linux it is a byte-range lock on one byte of the
// lock file (doc.go). Returns ErrSessionBusy if this Store already holds
// the session or another process (or another Store on the same file) does;
// ErrUnavailable once closed. The lease fences Commit in this process; its
// Generation is always 0.
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
	unlock, ok, err := s.locker.lockSession(id)
	if err != nil {
		return nil, fmt.Errorf("lock session %s: %w", id, err)
	}
	if !ok {
		return nil, fmt.Errorf("lock session %s: %w: session is owned by another process", id, rtstore.ErrSessionBusy)
	}
	l := &lease{store: s, sessionID: id, token: uuid.NewString(), unlock: unlock}
	s.locks[id] = l
	return l, nil
}

// lockMigrations takes the migration lock, which serialises schema checks
// and migrations of one database across processes and Stores, polling
// until ctx ends. The returned func releases it.
func (s *Store) lockMigrations(ctx context.Context) (func(), error) {
	for {
		unlock, ok, err := s.locker.lockMigrations()
		if err != nil {
			return nil, fmt.Errorf("take migration lock: %w", err)
		}
		if ok {
			return func() {
				if err := unlock(); err != nil {
					s.logger.WarnContext(ctx, "cannot drop the migration lock", "error", err)
				}
			}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("take migration lock: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// lease is a held session lock. Commit holds mu for reading for its whole
// transaction, Release for writing, so a commit fenced by a lease never
// overlaps the lease's release.
type lease struct {
	store     *Store
	sessionID string
	token     string

	mu       sync.RWMutex
	unlock   func() error
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

// Release drops the OS lock. A no-op for a lease already released. Waits
// for a Commit fenced by this lease.
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
	if err := l.unlock(); err != nil {
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
