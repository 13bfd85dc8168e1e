package temporal

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/hxtest/s3test"
	"hxd/internal/runtime"
)

// memTombstones is a TombstoneReader in memory.
type memTombstones map[string]*Tombstone

func (m memTombstones) Get(_ context.Context, kind, id string) (*Tombstone, error) {
	if ts, ok := m[kind+"/"+id]; ok {
		return ts, nil
	}
	return nil, runtime.ErrNotFound
}

// TestEngineGone: a deleted session's and run's lookups answer
// runtime.ErrGone to its owner and runtime.ErrNotFound to anyone else,
// and the owner cannot create a session with the deleted id again.
func TestEngineGone(t *testing.T) {
	t.Parallel()
	key := runtime.SessionKey("alice", "s1")
	eng := newTestEngine(t, &fakeClient{}, nil)
	eng.cfg.Tombstones = memTombstones{
		TombstoneSession + "/" + key: {Kind: TombstoneSession, ID: key, SessionID: "s1", Principal: "alice"},
		TombstoneRun + "/run-1":      {Kind: TombstoneRun, ID: "run-1", SessionID: "s1", Principal: "alice", RequestID: "req-1"},
	}
	_, err := eng.GetRun(as("alice"), "run-1")
	require.ErrorIs(t, err, runtime.ErrGone)
	_, err = eng.GetRun(as("bob"), "run-1")
	require.ErrorIs(t, err, runtime.ErrNotFound)
	require.NotErrorIs(t, err, runtime.ErrGone)
	_, err = eng.GetRun(as("alice"), "run-never")
	require.ErrorIs(t, err, runtime.ErrNotFound)
	require.NotErrorIs(t, err, runtime.ErrGone)

	_, err = eng.CreateSession(as("alice"), runtime.CreateSessionParams{Agent: agent.Ref{Name: "tester", Version: "v1"}, SessionID: "s1"})
	require.ErrorIs(t, err, runtime.ErrGone)
	_, err = eng.CreateSession(as("bob"), runtime.CreateSessionParams{Agent: agent.Ref{Name: "tester", Version: "v1"}, SessionID: "s1"})
	require.NoError(t, err, "bob's s1 is another session")
}

// TestS3Tombstones: tombstones round-trip, expire, are purged once older
// than the cutoff and counted.
func TestS3Tombstones(t *testing.T) {
	t.Parallel()
	srv := s3test.StartS3(t)
	x, err := NewS3Tombstones(srv.Client(t), srv.Bucket, "hx/")
	require.NoError(t, err)
	ctx := context.Background()
	now := time.Now().UTC()
	ts := &Tombstone{Kind: TombstoneRun, ID: "run-1", SessionID: "s1", Principal: "alice", RequestID: "req-1",
		DeletedAt: now, ExpiresAt: now.Add(time.Hour)}
	require.NoError(t, x.Put(ctx, ts))
	require.NoError(t, x.Put(ctx, &Tombstone{Kind: TombstoneSession, ID: "k", Principal: "alice", DeletedAt: now, ExpiresAt: now.Add(-time.Second)}))
	got, err := x.Get(ctx, TombstoneRun, "run-1")
	require.NoError(t, err)
	require.Equal(t, ts.RequestID, got.RequestID)
	require.Equal(t, "alice", got.Principal)
	_, err = x.Get(ctx, TombstoneSession, "k")
	require.ErrorIs(t, err, runtime.ErrNotFound, "expired")
	_, err = x.Get(ctx, TombstoneRun, "run-2")
	require.ErrorIs(t, err, runtime.ErrNotFound)
	n, err := x.Count(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	purged, err := x.Purge(ctx, now.Add(-time.Hour), 10)
	require.NoError(t, err)
	require.Zero(t, purged, "none written before the cutoff")
	purged, err = x.Purge(ctx, time.Now().Add(time.Hour), 1)
	require.NoError(t, err)
	require.Equal(t, 1, purged, "bounded")
	purged, err = x.Purge(ctx, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, purged)
	n, err = x.Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	if _, err := x.Get(ctx, TombstoneRun, "run-1"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("purged: %v", err)
	}
}
