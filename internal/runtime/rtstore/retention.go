package rtstore

import (
	"context"
	"time"
)

// RetentionStore deletes finished sessions, and the artifacts no session
// references any more, and remembers what it deleted (issue 23). Safe for
// concurrent use, also by several processes on one database: SessionDelete
// is fenced by the session's lease, as every runtime write is.
type RetentionStore interface {
	// GCCandidates returns up to p.Limit sessions with Seq > p.After whose
	// latest run is finished (RunStatus.Finished: completed or cancelled)
	// and was last updated before p.FinishedBefore, in Seq order. A
	// session without a run is never listed.
	GCCandidates(ctx context.Context, p GCCandidateParams) ([]GCCandidate, error)
	// SessionDelete deletes a session with its runs, steps, approvals,
	// tool outcomes, events, journal, snapshot and artifact links, and
	// writes a tombstone for the session and each run, in ONE
	// transaction fenced by p.Lease (which must hold the session). It
	// re-checks in that transaction that the latest run is finished and
	// was last updated before p.FinishedBefore: else it returns
	// ErrNotEligible and deletes nothing. Returns ErrNotFound for an
	// unknown session, ErrLeaseLost for a lease that no longer holds it.
	// Artifacts are left to ArtifactSweep.
	SessionDelete(ctx context.Context, p *SessionDeleteParams) (*SessionDeleted, error)
	// ArtifactSweep deletes up to limit artifacts that no session
	// references, in one transaction, and returns how many and their
	// bytes. The reference check and the delete are one transaction and
	// the schema refuses to delete a referenced artifact, so an artifact
	// linked concurrently (ArtifactPut) survives.
	ArtifactSweep(ctx context.Context, limit int) (ArtifactSwept, error)
	// SessionMeasure counts what SessionDelete would delete of the session
	// now, deleting nothing and taking no lease (gc --dry-run): same
	// eligibility check (ErrNotEligible, ErrNotFound), same counts.
	SessionMeasure(ctx context.Context, sessionID string, finishedBefore time.Time) (*SessionDeleted, error)
	// ArtifactMeasure counts the artifacts ArtifactSweep would delete once
	// the sessions of sessionIDs were deleted: those no other session
	// references. Read-only (gc --dry-run); len(sessionIDs) is the
	// caller's bound.
	ArtifactMeasure(ctx context.Context, sessionIDs []string) (ArtifactSwept, error)
	// TombstoneGet returns the tombstone of a deleted session or run.
	// Returns ErrNotFound when there is none (never deleted, or expired
	// and purged).
	TombstoneGet(ctx context.Context, kind TombstoneKind, id string) (*Tombstone, error)
	// TombstoneRequest returns the tombstone of the deleted run of a
	// session that had that request id. Returns ErrNotFound.
	TombstoneRequest(ctx context.Context, sessionID, requestID string) (*Tombstone, error)
	// TombstonePurge deletes up to limit tombstones that expired before
	// now and returns how many.
	TombstonePurge(ctx context.Context, now time.Time, limit int) (int, error)
	// TombstoneCount returns the number of tombstones kept.
	TombstoneCount(ctx context.Context) (int64, error)
}

// TombstoneKind is what a tombstone stands for.
type TombstoneKind string

// Tombstone kinds.
const (
	TombstoneSession TombstoneKind = "session"
	TombstoneRun     TombstoneKind = "run"
)

// Tombstone records a deleted session or run until ExpiresAt.
type Tombstone struct {
	Kind TombstoneKind
	ID   string
	// SessionID is the session (itself for a session tombstone).
	SessionID string
	// Principal owned the session: only it is told the id is gone.
	Principal string
	// RequestID is the run's request id ("" for a session).
	RequestID string
	DeletedAt time.Time
	ExpiresAt time.Time
}

// GCCandidateParams pages the sessions gc may delete.
type GCCandidateParams struct {
	FinishedBefore time.Time
	ListParams
}

// GCCandidate is a session whose latest run finished.
type GCCandidate struct {
	Seq          int64
	SessionID    string
	Principal    string
	AgentName    string
	AgentVersion string
	// FinishedAt is the latest run's last update (when it finished).
	FinishedAt time.Time
}

// SessionDeleteParams deletes one session.
type SessionDeleteParams struct {
	SessionID string
	// Lease holds the session (SessionLock); required.
	Lease Lease
	// FinishedBefore: the latest run must have finished before it.
	FinishedBefore time.Time
	// DeletedAt and TombstoneUntil stamp the tombstones.
	DeletedAt      time.Time
	TombstoneUntil time.Time
}

// SessionDeleted counts what SessionDelete removed.
type SessionDeleted struct {
	Runs    int
	Events  int
	Records int
	// Bytes is the size of the deleted journal and event payloads.
	Bytes int64
}

// ArtifactSwept counts what ArtifactSweep removed.
type ArtifactSwept struct {
	Artifacts int
	Bytes     int64
}
