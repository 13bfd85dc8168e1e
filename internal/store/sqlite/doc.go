// Package sqlite implements rtstore.Store on one SQLite file with the pure-Go
// modernc.org/sqlite driver: the default, single-host backend of hxd.
//
// It owns the SQLite side of storage: connection setup (WAL,
// synchronous=FULL, foreign keys, busy timeout), one writer connection whose
// transactions start with BEGIN IMMEDIATE plus a separate read pool, WAL
// checkpoints in the background instead of inside commits (checkpoint.go),
// golang-migrate migrations from hxd/migrations with their SHA-256 checks,
// the OS lock per session (REFERENCE §4.6) and the translation of driver
// errors into the rtstore sentinels. No driver error type leaves the package.
//
// Several hxd processes may open one database file: SQLite serialises their
// writes and the session locks keep them from driving one session at the
// same time. The database holds raw prompts and tool payloads, so every file
// the package creates is mode 0600 (folders 0700).
//
// Locks (lock.go). Beside the database and its -wal and -shm the store
// keeps one folder, "<db>.hxd", holding the file "lock" (and, outside this
// package, the bundle signing key `hxd serve` generates there). On Linux a
// session's lock is an open-file-description lock (F_OFD_SETLK) on one
// byte of that file, at an offset taken from the SHA-256 of the session id
// (63 bits); the migration lock is byte 0 and the control nonces
// (control.go) live in the file's first 512 KiB. This was chosen over lock
// files removed on release because the OS still drops a dead process's
// locks at once and keeps two Stores of one file apart (the lock belongs to
// the Store's open file description, not to the process), while a Store
// holds one descriptor and the folder one entry however many sessions
// exist or are driven at once: nothing piles up, and the number of runs a
// process drives is not capped by its open-file limit. Two sessions held at
// the same moment share a byte with negligible probability (lock.go); the
// later one then gets a false session_busy, never a second owner. Systems
// without OFD locks (macOS, the BSDs) take a flock on a file per held
// session in the same folder instead, removed safely on release
// (lockfiles.go); there a held session costs a descriptor.
//
// Besides the errors each method names, every method may return an error
// wrapping rtstore.ErrUnavailable when the database stays locked longer than
// the busy timeout (5 s), the disk is full, no file descriptor is left or
// the Store is closed, and context errors. Ping commits (a write that
// changes no data, after allocating a page in a savepoint it rolls back)
// when the Store has not committed for a second, so readiness fails while
// commits would, or while the database cannot grow by a page.
//
// Every statement goes through database/sql with statements prepared once
// (stmts.go); the package uses the driver only through database/sql and
// its error type.
//
// It may import rtstore, journal, migrations and store/storekit plus its
// driver and golang-migrate. It must not import internal/http, another
// store or the runtime root package.
package sqlite
