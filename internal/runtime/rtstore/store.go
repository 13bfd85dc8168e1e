package rtstore

import (
	"context"

	"hxd/internal/journal"
)

// SessionStore holds sessions, their control flag and ownership.
type SessionStore interface {
	// SessionInsert stores a new session. Returns ErrAlreadyExists if the id is taken.
	SessionInsert(ctx context.Context, s *SessionRow) error
	// SessionGet returns a session with its latest run. Returns ErrNotFound.
	SessionGet(ctx context.Context, id string) (*SessionRow, error)
	// SessionList returns a principal's sessions ordered by Seq.
	SessionList(ctx context.Context, p *SessionListParams) ([]*SessionRow, error)
	// SessionControlGet returns the control flag. Returns ErrNotFound.
	SessionControlGet(ctx context.Context, id string) (string, error)
	// SessionControlSet sets the control flag ("" | "paused" | "cancelled").
	// Returns ErrNotFound.
	SessionControlSet(ctx context.Context, id, control string) error
	// SessionLock takes ownership of a session for this process. Returns
	// ErrSessionBusy if another owner (or this process) holds it.
	SessionLock(ctx context.Context, id string) (Lease, error)
}

// Lease is a held session ownership. Safe for concurrent use.
type Lease interface {
	SessionID() string
	// Token identifies the owner.
	Token() string
	// Generation is the fencing number (0 where the store has none).
	Generation() int64
	// Renew extends the lease; ErrLeaseLost if superseded or expired.
	Renew(ctx context.Context) error
	// Release gives ownership up; a no-op for a stale lease.
	Release(ctx context.Context) error
}

// RunStore holds runs and their boundary commits.
type RunStore interface {
	// RunInsert creates a run and applies p.Commit in one transaction.
	// Same (session, request id) with the same MessageDigest returns the
	// existing run and created=false; a different digest returns
	// ErrRequestConflict; an unfinished run of the session returns
	// ErrSessionBusy; an unknown session returns ErrNotFound.
	RunInsert(ctx context.Context, p *RunInsertParams) (run *RunRow, created bool, err error)
	// RunGet returns a run. Returns ErrNotFound.
	RunGet(ctx context.Context, id string) (*RunRow, error)
	// RunList returns a session's runs ordered by Seq.
	RunList(ctx context.Context, sessionID string, p ListParams) ([]*RunRow, error)
	// RunListByStatus returns every run in the given status (all sessions).
	RunListByStatus(ctx context.Context, status RunStatus) ([]*RunRow, error)
	// Commit writes one boundary atomically: run state and status, session
	// latest run, snapshot, step, tool rows, journal records (seq assigned
	// MAX+1 per run in order), events (cursor assigned) and their records.
	// Returns ErrLeaseLost if c.Lease no longer owns the session,
	// ErrRecordConflict / ErrForeignRecord for a bad record (nothing is
	// written), ErrNotFound for an unknown run. Sets c.Events[i].Event.Cursor.
	//
	// A DeltaOnly commit (streamed text and thinking deltas) appends only
	// its events and their records, fenced and numbered the same way, and
	// leaves the run row, its state and every other table as they are; it
	// returns ErrInvalidCommit when it names anything else.
	Commit(ctx context.Context, c *Commit) error
}

// RowStore reads a run's step and tool rows (the run timeline).
type RowStore interface {
	// RunRowsGet returns a run's step and tool rows as one consistent
	// read; an unknown run has none.
	RunRowsGet(ctx context.Context, runID string) (*RunRows, error)
}

// EventStore reads public events.
type EventStore interface {
	// EventListAfter returns up to limit events of a run with cursor > after, in order.
	EventListAfter(ctx context.Context, runID string, after int64, limit int) ([]RunEvent, error)
}

// JournalStore reads the journal.
type JournalStore interface {
	// JournalList returns up to limit records of a run with seq > after, in order.
	JournalList(ctx context.Context, runID string, after int64, limit int) ([]journal.Record, error)
}

// ArtifactStore holds content-addressed blobs.
type ArtifactStore interface {
	// ArtifactPut stores data under its lowercase hex SHA-256 (no-op if
	// present) and links it to the session that produced it.
	ArtifactPut(ctx context.Context, sessionID, sha256 string, data []byte) error
	// ArtifactGet returns the bytes. Returns ErrNotFound.
	ArtifactGet(ctx context.Context, sha256 string) ([]byte, error)
	// ArtifactOwned reports whether a session of the principal references
	// the artifact.
	ArtifactOwned(ctx context.Context, sha256, principal string) (bool, error)
}

// SnapshotStore reads a consistent cut of a run for export.
type SnapshotStore interface {
	// RunSnapshot opens ONE read transaction, reads the run and calls fn
	// with it and an iterator over the run's journal records in seq order
	// (an error from yield ends the iteration and is returned). Everything
	// fn reads describes the same instant; the transaction ends when fn
	// returns. Returns ErrNotFound for an unknown run, else fn's error.
	RunSnapshot(ctx context.Context, runID string, fn func(run *RunRow, records func(yield func(journal.Record) error) error) error) error
}

// Store is everything the runtime needs of a storage backend. Safe for
// concurrent use.
type Store interface {
	SessionStore
	RunStore
	RowStore
	EventStore
	JournalStore
	ArtifactStore
	SnapshotStore
	// Ping checks that storage is reachable and the schema current.
	Ping(ctx context.Context) error
	// Close releases resources.
	Close() error
}
