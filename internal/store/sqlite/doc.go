// Package sqlite implements rtstore.Store on one SQLite file with the pure-Go
// modernc.org/sqlite driver: the default, single-host backend of hxd.
//
// It owns the SQLite side of storage: connection setup (WAL,
// synchronous=FULL, foreign keys, busy timeout), one writer connection whose
// transactions start with BEGIN IMMEDIATE plus a separate read pool, WAL
// checkpoints in the background instead of inside commits (checkpoint.go),
// a VFS shim that hands each commit's WAL frames to the OS in one write
// (walvfs.go),
// golang-migrate migrations from hxd/migrations with their SHA-256 checks,
// the OS file lock per session (REFERENCE §4.6) and the translation of driver
// errors into the rtstore sentinels. No driver error type leaves the package.
//
// Several hxd processes may open one database file: SQLite serialises their
// writes and the per-session lock files keep them from driving one session
// at the same time. The database holds raw prompts and tool payloads, so
// every file the package creates is mode 0600.
//
// Besides the errors each method names, every method may return an error
// wrapping rtstore.ErrUnavailable when the database stays locked longer than
// the busy timeout (5 s), the disk is full, no file descriptor is left or
// the Store is closed, and context errors. Ping commits (a write that
// changes no data) when the Store has not committed for a second, so
// readiness fails while commits would.
//
// It may import rtstore, journal and migrations plus its driver and
// golang-migrate. It must not import internal/http, another store or the
// runtime root package.
package sqlite
