package runtime

import (
	"errors"

	"hxd/internal/runtime/rtstore"
)

// Errors callers branch on. internal/http maps them to status and code.
var (
	// ErrNotFound: unknown or foreign session, run, agent or artifact.
	ErrNotFound = rtstore.ErrNotFound
	// ErrSessionExists: POST /sessions with a taken session_id.
	ErrSessionExists = rtstore.ErrAlreadyExists
	// ErrSessionBusy: an unfinished run blocks a new one, or another owner drives the session.
	ErrSessionBusy = rtstore.ErrSessionBusy
	// ErrRequestConflict: request id reused with a different message.
	ErrRequestConflict = rtstore.ErrRequestConflict
	// ErrUnavailable: storage is unreachable.
	ErrUnavailable = rtstore.ErrUnavailable
	// ErrUnknownAgent: the agent named in a request is not registered.
	ErrUnknownAgent = errors.New("unknown agent")
	// ErrInvalidMessage: a run message that is neither text nor valid content blocks.
	ErrInvalidMessage = errors.New("invalid message")
	// ErrRecordingMismatch: resume asked for a recording choice other than the stored one.
	ErrRecordingMismatch = errors.New("recording configuration differs from persisted session")
	// ErrAgentMismatch: the registered agent definition differs from the session's.
	ErrAgentMismatch = errors.New("agent definition differs from persisted session")
	// ErrNotAwaitingResolution: the latest run cannot take a decision now.
	ErrNotAwaitingResolution = errors.New("run is not awaiting a resolution")
	// ErrUnknownExecutionKey: no pending tool has that execution key.
	ErrUnknownExecutionKey = errors.New("no pending tool has that execution key")
	// ErrResolutionInvalid: a decision that breaks the resolution rules.
	ErrResolutionInvalid = errors.New("invalid resolution")
	// ErrRecordingDisabled: the run was not recorded.
	ErrRecordingDisabled = errors.New("flight recording was not enabled for this run")
	// ErrRecordingUnsupported: the engine keeps no flight recorder (the
	// Temporal engine): recording cannot be turned on and nothing exports.
	ErrRecordingUnsupported = errors.New("flight recording is not supported by this engine")
	// ErrRecording: a required flight-recording commit failed.
	ErrRecording = errors.New("required flight-recording commit failed")
	// ErrNoWorker: no worker polls the engine's task queue (the Temporal
	// engine), so a run can be neither read nor changed until one does.
	ErrNoWorker = errors.New("no worker is polling the task queue")
)

// PublicError gives a sentinel a client-safe detail (e.g. the reference's
// resolution messages). errors.Is matches the sentinel, and the Cause when
// there is one.
type PublicError struct {
	Err    error
	Detail string
	// Cause is the error the detail reports, if any (publicWrap): kept in
	// the chain so that callers can still errors.Is / errors.As it.
	Cause error
}

// Error returns the detail.
func (e *PublicError) Error() string { return e.Detail }

// Unwrap returns the sentinel, and the cause when set.
func (e *PublicError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

func publicErr(sentinel error, detail string) error {
	return &PublicError{Err: sentinel, Detail: detail}
}

// publicWrap is publicErr for a cause whose message is client-safe: the
// detail is "context: cause" (the cause alone without context), and the
// cause stays in the chain.
func publicWrap(sentinel error, context string, cause error) error {
	detail := cause.Error()
	if context != "" {
		detail = context + ": " + detail
	}
	return &PublicError{Err: sentinel, Detail: detail, Cause: cause}
}

// ErrInvalidCursor: a list cursor this server did not issue.
var ErrInvalidCursor = errors.New("invalid cursor")
