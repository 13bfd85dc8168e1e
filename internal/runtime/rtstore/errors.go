package rtstore

import "errors"

// Errors every Store implementation returns (possibly wrapped); no driver
// error type escapes a store.
var (
	// ErrNotFound: the session, run, artifact or record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a session with that id exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrSessionBusy: the session has an unfinished run, or another owner drives it.
	ErrSessionBusy = errors.New("session busy")
	// ErrRequestConflict: the request id was used with a different message.
	ErrRequestConflict = errors.New("request id already used with different input")
	// ErrRecordConflict: a journal record id was re-sent with different content.
	// The whole commit is rolled back.
	ErrRecordConflict = errors.New("conflicting immutable journal record")
	// ErrForeignRecord: a journal record belongs to a different run.
	ErrForeignRecord = errors.New("journal record belongs to a different run")
	// ErrLeaseLost: the session lease expired or was superseded (fencing).
	ErrLeaseLost = errors.New("session ownership lost")
	// ErrUnavailable: storage could not be reached or is busy; the
	// operation may be retried.
	ErrUnavailable = errors.New("storage unavailable")
	// ErrSchema: the schema is missing, old, dirty or was changed.
	ErrSchema = errors.New("schema not usable")
	// ErrInvalidCommit: a DeltaOnly commit names more than events (a
	// caller's bug); nothing is written.
	ErrInvalidCommit = errors.New("invalid delta-only commit")
	// ErrNotEligible: the session may not be deleted (SessionDelete): its
	// latest run is not finished, or finished too recently.
	ErrNotEligible = errors.New("session not eligible for deletion")
)
