//go:build unix && !linux

package sqlite

import "os"

// newSessionLocker returns the locker of systems without
// open-file-description locks: one flock file per held session in the
// lock place, removed on release (lockfiles.go).
func newSessionLocker(f *os.File, dir string) sessionLocker {
	return &fileLocker{f: f, dir: dir}
}
