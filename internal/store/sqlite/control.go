package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"
)

// The control flag of a session this Store drives is read on every step
// of its run, and almost never changes. The lease holder therefore keeps
// the last value it read, tagged with the session's control nonce: 8
// bytes in the nonce table of the lock file (lock.go), which every write
// of the flag replaces with a fresh random value after its transaction
// committed (SessionControlSet, and RunInsert, which clears the flag),
// whichever process or Store makes it. A read whose nonce is unchanged
// returns the cached value at the price of one pread.
//
// Why it is exact: the holder reads the nonce before the flag, and a
// writer writes the nonce after the flag. A write the holder's read missed
// committed after that read, so its nonce landed after the holder's nonce
// read and differs from it (64 random bits), and the next read goes to the
// database. A writer that dies between its commit and its nonce write
// would leave a stale entry, so entries also expire after controlCacheTTL:
// a flag written that way is seen within that time, as a poll would.
//
// The table has controlSlots slots, so that it stays small (512 KiB at
// most, sparse) however many sessions there are; a session's slot comes
// from its id's SHA-256. Sessions sharing a slot only cost each other a
// read of the database now and then: every write of a session's flag
// still changes its own slot, which is all the argument above needs.

// controlNonceSize is the length of a control nonce.
const controlNonceSize = 8

// controlSlots is the number of nonce slots, from offset 0 of the lock
// file.
const controlSlots = 1 << 16

// nonceOffset is the offset of session id's nonce slot in the lock file.
func nonceOffset(id string) int64 {
	sum := sessionHash(id)
	return int64(binary.BigEndian.Uint64(sum[8:16])%controlSlots) * controlNonceSize
}

// controlCacheTTL bounds how long a cached control flag is trusted.
const controlCacheTTL = time.Second

// controlCache is a lease's last read of its session's control flag.
type controlCache struct {
	mu    sync.Mutex
	valid bool
	value string
	nonce [controlNonceSize]byte
	at    time.Time // when value was read
}

// readNonce reads the control nonce of a session (zeros when the lock
// file ends before its slot).
func (s *Store) readNonce(id string) ([controlNonceSize]byte, error) {
	var n [controlNonceSize]byte
	k, err := s.lockFile.ReadAt(n[:], nonceOffset(id))
	switch {
	case k == len(n):
		return n, nil
	case errors.Is(err, io.EOF):
		return [controlNonceSize]byte{}, nil // never signalled
	case err == nil:
		err = fmt.Errorf("short read of %s", s.lockFile.Name())
	}
	return n, err
}

// cachedControl returns the cached control flag of a session this Store
// holds, if no write of the flag came since it was read. Otherwise ok is
// false and, when the Store holds the session, l and nonce are what
// storeControl needs after a read of the database.
func (s *Store) cachedControl(id string) (value string, ok bool, l *lease, nonce [controlNonceSize]byte) {
	s.mu.Lock()
	l = s.locks[id]
	s.mu.Unlock()
	if l == nil {
		return "", false, nil, nonce
	}
	nonce, err := s.readNonce(id)
	if err != nil {
		return "", false, nil, nonce // closed meanwhile: no cache
	}
	l.ctl.mu.Lock()
	defer l.ctl.mu.Unlock()
	if l.ctl.valid && l.ctl.nonce == nonce && time.Since(l.ctl.at) < controlCacheTTL {
		return l.ctl.value, true, nil, nonce
	}
	return "", false, l, nonce
}

// storeControl caches value, read from the database after nonce was read.
func (l *lease) storeControl(value string, nonce [controlNonceSize]byte) {
	l.ctl.mu.Lock()
	defer l.ctl.mu.Unlock()
	l.ctl.valid, l.ctl.value, l.ctl.nonce, l.ctl.at = true, value, nonce, time.Now()
}

// signalControl tells the holder of the session's lock, in any process,
// that its control flag was written: it gives the session's nonce slot a
// new value. Call it after the write committed.
func (s *Store) signalControl(id string) error {
	var n [controlNonceSize]byte
	v := rand.Uint64()
	for v == 0 { // zeros are the nonce of a slot never signalled
		v = rand.Uint64()
	}
	binary.LittleEndian.PutUint64(n[:], v)
	s.mu.Lock()
	l := s.locks[id]
	s.mu.Unlock()
	if l != nil {
		l.ctl.mu.Lock()
		l.ctl.valid = false
		l.ctl.mu.Unlock()
	}
	off := nonceOffset(id)
	if _, err := s.lockFile.WriteAt(n[:], off); err == nil {
		return nil
	}
	// Closed meanwhile: write through a descriptor of our own.
	f, err := os.OpenFile(s.lockFile.Name(), os.O_WRONLY, fileMode)
	if err != nil {
		return fmt.Errorf("signal control of session %s: %w", id, err)
	}
	_, errW := f.WriteAt(n[:], off)
	errC := f.Close()
	if errW != nil || errC != nil {
		return fmt.Errorf("signal control of session %s: %w", id, errors.Join(errW, errC))
	}
	return nil
}
