package http

import (
	"context"
	"time"

	"hxd/internal/agent"
	hxruntime "hxd/internal/runtime"
)

// Service is what the handlers need of the runtime; *runtime.Runtime
// satisfies it. Every method reads the calling principal from ctx
// (runtime.PrincipalFrom) and returns runtime.ErrNotFound for anything the
// principal does not own.
type Service interface {
	// Ready reports whether storage is reachable and the schema current.
	Ready(ctx context.Context) error
	// Agents lists the registered agents.
	Agents() []*agent.Definition
	// Agent returns one agent; runtime.ErrNotFound when unknown.
	Agent(name, version string) (*agent.Definition, error)

	// CreateSession creates a session owned by the caller. Errors:
	// runtime.ErrSessionExists, runtime.ErrUnknownAgent.
	CreateSession(ctx context.Context, p hxruntime.CreateSessionParams) (*hxruntime.Session, error)
	// ListSessions pages the caller's sessions that match p's filters,
	// filtered before the page limit so cursors page the matches. Errors:
	// runtime.ErrInvalidCursor for a cursor it did not issue.
	ListSessions(ctx context.Context, p hxruntime.SessionListParams) (hxruntime.Page[hxruntime.Session], error)
	// GetSession returns one session with its latest run.
	GetSession(ctx context.Context, sessionID string) (*hxruntime.Session, error)

	// SubmitRun starts a run; created=false when the request id matched an
	// existing run with the same message. Errors: runtime.ErrSessionBusy,
	// runtime.ErrRequestConflict, runtime.ErrInvalidMessage,
	// runtime.ErrAgentMismatch.
	SubmitRun(ctx context.Context, p hxruntime.SubmitParams) (run *hxruntime.RunResult, created bool, err error)
	// WaitRun returns the run once it is no longer running, or after d.
	WaitRun(ctx context.Context, runID string, d time.Duration) (*hxruntime.RunResult, error)
	// ListRuns pages the runs of a session (runtime.ErrInvalidCursor as
	// ListSessions).
	ListRuns(ctx context.Context, sessionID string, p hxruntime.ListParams) (hxruntime.Page[hxruntime.RunResult], error)
	// GetRun returns a run's public result.
	GetRun(ctx context.Context, runID string) (*hxruntime.RunResult, error)
	// RunTimeline returns a run's timeline of model and tool attempts,
	// built from its step and tool rows (and its events for the marks).
	RunTimeline(ctx context.Context, runID string) (*hxruntime.RunTimeline, error)

	// ListEvents returns up to limit events with cursor > after.
	ListEvents(ctx context.Context, runID string, after int64, limit int) ([]hxruntime.RunEvent, error)
	// WatchRun returns a channel closed at the next commit of the run (or
	// within a short poll interval when another process drives it) and a
	// cancel func that must be called.
	WatchRun(runID string) (<-chan struct{}, func())

	// Pause and Cancel ask the latest unfinished run to pause or cancel
	// and return the session's latest run; nil (no error) when the session
	// has no run.
	Pause(ctx context.Context, sessionID string) (*hxruntime.RunResult, error)
	Cancel(ctx context.Context, sessionID string) (*hxruntime.RunResult, error)
	// Resume resumes the latest unfinished run; "" when nothing to resume.
	// Errors: runtime.ErrSessionBusy, runtime.ErrRecordingMismatch,
	// runtime.ErrAgentMismatch.
	Resume(ctx context.Context, sessionID string, p hxruntime.ResumeParams) (runID string, err error)
	// Pending lists the latest run's tools awaiting a decision.
	Pending(ctx context.Context, sessionID string) ([]hxruntime.PendingTool, error)
	// Approve and Resolve return the run (after resuming when asked).
	// Errors: runtime.ErrUnknownExecutionKey,
	// runtime.ErrNotAwaitingResolution, runtime.ErrResolutionInvalid (a
	// *runtime.PublicError whose Detail is shown to the client).
	Approve(ctx context.Context, p hxruntime.ApproveParams) (*hxruntime.RunResult, error)
	Resolve(ctx context.Context, p hxruntime.ResolveParams) (*hxruntime.RunResult, error)

	// Export reads a consistent cut of a recorded run and hands it to fn;
	// the Incident is valid only inside fn. It never resumes or executes
	// anything and works on live runs. Errors: runtime.ErrNotFound,
	// runtime.ErrRecordingDisabled, else fn's error.
	Export(ctx context.Context, runID string, fn func(*hxruntime.Incident) error) error
	// Artifact returns the bytes of an artifact (by its lowercase hex
	// SHA-256) referenced by a session the caller owns; runtime.ErrNotFound
	// for anything else, whatever the key's shape.
	Artifact(ctx context.Context, sha256 string) ([]byte, error)
}
