package runtime

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"hxd/internal/agent"
	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// UnresolvedOperation is a tool attempt whose outcome is unknown at export:
// an entry in status started or uncertain.
type UnresolvedOperation struct {
	ExecutionKey string
	Status       ToolStatus
	Attempt      int
}

// Incident is a consistent cut of a recorded run: its identity and state
// at one instant and the journal records up to that instant. It is valid
// only inside the Export callback. Its Records and Artifact methods make
// it a bundle source.
type Incident struct {
	RunID      string
	SessionID  string
	Status     RunStatus
	Phase      Phase
	Agent      agent.Ref
	Unresolved []UnresolvedOperation

	store   Store
	records func(yield func(journal.Record) error) error
	// readable reports whether the export may hold an artifact: for an
	// export over the API, whether its principal may download it (so a
	// run naming someone else's artifact by its hash gets it as missing);
	// nil for an operator's offline export, which may hold any.
	readable func(ctx context.Context, sha256 string) (bool, error)
}

// Records calls fn for every record of the cut in seq order.
func (i *Incident) Records(_ context.Context, fn func(journal.Record) error) error {
	return i.records(fn)
}

// Artifact returns an artifact's bytes; ErrNotFound for one the export may
// not hold.
func (i *Incident) Artifact(ctx context.Context, sha256 string) ([]byte, error) {
	if i.readable != nil {
		ok, err := i.readable(ctx, sha256)
		if err != nil {
			return nil, fmt.Errorf("artifact %s: %w", sha256, err)
		}
		if !ok {
			return nil, fmt.Errorf("artifact %s: %w", sha256, ErrNotFound)
		}
	}
	return i.store.ArtifactGet(ctx, sha256)
}

// OpenArtifact returns a reader over an artifact's bytes, as Artifact.
func (i *Incident) OpenArtifact(ctx context.Context, sha256 string) (io.ReadCloser, error) {
	data, err := i.Artifact(ctx, sha256)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// Export reads a consistent cut of a recorded run of the calling
// principal and hands it to fn. It never resumes or executes anything and
// works on live runs. Errors: ErrNotFound, ErrRecordingDisabled. With
// tracing, an hxd.export span covers it (fn's work included).
func (r *Runtime) Export(ctx context.Context, runID string, fn func(*Incident) error) (err error) {
	ctx, span := r.tracing.startExport(ctx, runID)
	defer func() { endSpan(span, err) }()
	row, err := r.ownedRun(ctx, runID)
	if err != nil {
		return err
	}
	if span != nil && span.IsRecording() {
		span.SetAttributes(AttrSessionID.String(SessionIDOf(row.SessionID)))
	}
	principal := PrincipalFrom(ctx)
	readable := func(ctx context.Context, sha256 string) (bool, error) {
		if !validArtifactKey(sha256) {
			return false, nil
		}
		return r.store.ArtifactOwned(ctx, sha256, principal)
	}
	return exportRun(ctx, r.store, runID, readable, fn)
}

// ExportOffline is Export for an operator working on a store directly
// (`hxd export --db`): no principal check, no runtime needed. sessionID
// is the id the session's owner knows (or the session's key); the run
// names the session, so the id needs no principal.
func ExportOffline(ctx context.Context, store Store, sessionID, runID string, fn func(*Incident) error) error {
	row, err := store.RunGet(ctx, runID)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if row.SessionID != sessionID && SessionIDOf(row.SessionID) != sessionID {
		return fmt.Errorf("run %s of session %s: %w", runID, sessionID, ErrNotFound)
	}
	return exportRun(ctx, store, runID, nil, fn)
}

func exportRun(ctx context.Context, store Store, runID string, readable func(context.Context, string) (bool, error), fn func(*Incident) error) error {
	return store.RunSnapshot(ctx, runID, func(row *rtstore.RunRow, records func(func(journal.Record) error) error) error {
		st, err := decodeState(row.State)
		if err != nil {
			return err
		}
		if !st.Recording {
			return publicErr(ErrRecordingDisabled, "Flight recording was not enabled for this run")
		}
		inc := &Incident{
			RunID: row.ID, SessionID: SessionIDOf(row.SessionID), Status: row.Status, Phase: Phase(row.Phase),
			Agent: st.Agent, store: store, records: records, readable: readable,
		}
		for _, e := range st.Tools {
			if e.Status == ToolStarted || e.Status == ToolUncertain {
				inc.Unresolved = append(inc.Unresolved, UnresolvedOperation{ExecutionKey: e.ExecutionKey, Status: e.Status, Attempt: e.Attempt})
			}
		}
		return fn(inc)
	})
}

// Artifact returns an artifact's bytes to a principal owning a session
// that references it; anything else is ErrNotFound.
func (r *Runtime) Artifact(ctx context.Context, sha256 string) ([]byte, error) {
	if !validArtifactKey(sha256) {
		return nil, fmt.Errorf("artifact: %w", ErrNotFound)
	}
	owned, err := r.store.ArtifactOwned(ctx, sha256, PrincipalFrom(ctx))
	if err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	if !owned {
		return nil, fmt.Errorf("artifact: %w", ErrNotFound)
	}
	data, err := r.store.ArtifactGet(ctx, sha256)
	if err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	return data, nil
}

// validArtifactKey reports whether s is 64 lowercase hex characters.
func validArtifactKey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
