package temporal

import (
	"context"

	"hxd/internal/runtime"
)

// SessionArtifactStore is an ArtifactStore that also records which
// session references what it stores (artifacts.Store.PutSession), so that
// retention deletes an artifact only once no session references it.
type SessionArtifactStore interface {
	PutSession(ctx context.Context, owner, sessionKey string, data []byte) (string, error)
}

// putArtifact stores data for the session sessionID of owner: with its
// session reference when the store keeps them, else owner-only.
func (a *Activities) putArtifact(ctx context.Context, owner, sessionID string, data []byte) (string, error) {
	if s, ok := a.deps.Artifacts.(SessionArtifactStore); ok {
		return s.PutSession(ctx, owner, runtime.SessionKey(owner, sessionID), data)
	}
	return a.deps.Artifacts.PutOwned(ctx, owner, data)
}
