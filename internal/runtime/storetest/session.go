package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
)

var sessionCases = []testCase{
	{"PrincipalScopedKeys", func(t *testing.T, b *bundle) {
		// The runtime stores a session under runtime.SessionKey(owner, id):
		// two principals' sessions of one id are two keys, kept apart in
		// every table keyed by session and locked independently.
		keys := map[string]string{}
		for _, p := range []string{"alice", "bob"} {
			keys[p] = runtime.SessionKey(p, "foo")
			s := &rtstore.SessionRow{
				ID: keys[p], Principal: p, AgentName: "assistant", AgentVersion: "1",
				AgentConfig: json.RawMessage(`{}`), Metadata: json.RawMessage(`{"who":"` + p + `"}`),
				CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
			}
			require.NoError(t, b.store.SessionInsert(t.Context(), s))
		}
		require.NotEqual(t, keys["alice"], keys["bob"])
		again := &rtstore.SessionRow{ID: keys["alice"], Principal: "alice", AgentConfig: json.RawMessage(`{}`),
			Metadata: json.RawMessage(`{}`), CreatedAt: time.Now()}
		require.ErrorIs(t, b.store.SessionInsert(t.Context(), again), rtstore.ErrAlreadyExists)

		runs := map[string]string{}
		for p, key := range keys {
			got, err := b.store.SessionGet(t.Context(), key)
			require.NoError(t, err)
			require.Equal(t, p, got.Principal)
			require.Equal(t, "foo", runtime.SessionIDOf(got.ID))
			require.JSONEq(t, `{"who":"`+p+`"}`, string(got.Metadata))
			list, err := b.store.SessionList(t.Context(), &rtstore.SessionListParams{Principal: p, ListParams: rtstore.ListParams{Limit: all}})
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Equal(t, key, list[0].ID)
			// The same request id in each session starts a run in each.
			run, created, err := b.store.RunInsert(t.Context(), runParams(key, "same", "digest-"+p))
			require.NoError(t, err)
			require.True(t, created)
			runs[p] = run.ID
		}
		for p, key := range keys {
			list, err := b.store.RunList(t.Context(), key, rtstore.ListParams{Limit: all})
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Equal(t, runs[p], list[0].ID)
			got, err := b.store.SessionGet(t.Context(), key)
			require.NoError(t, err)
			require.Equal(t, runs[p], got.LastRunID)
		}

		require.NoError(t, b.store.SessionControlSet(t.Context(), keys["alice"], rtstore.ControlPaused))
		ctl, err := b.store.SessionControlGet(t.Context(), keys["bob"])
		require.NoError(t, err)
		require.Empty(t, ctl)

		var leases []rtstore.Lease
		for _, key := range keys {
			l, err := b.store.SessionLock(t.Context(), key)
			require.NoError(t, err, "each principal's session is locked on its own")
			leases = append(leases, l)
		}
		for _, l := range leases {
			require.NoError(t, l.Release(t.Context()))
		}

		data := []byte("shared bytes")
		sum := sha256.Sum256(data)
		sha := hex.EncodeToString(sum[:])
		require.NoError(t, b.store.ArtifactPut(t.Context(), keys["alice"], sha, data))
		for _, p := range []string{"alice", "bob"} {
			owned, err := b.store.ArtifactOwned(t.Context(), sha, p)
			require.NoError(t, err)
			require.Equal(t, p == "alice", owned, p)
		}
	}},
	{"InsertGet", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		require.Positive(t, s.Seq)

		got, err := b.store.SessionGet(t.Context(), s.ID)
		require.NoError(t, err)
		require.Equal(t, s.Seq, got.Seq)
		require.Equal(t, s.ID, got.ID)
		require.Equal(t, "alice", got.Principal)
		require.Equal(t, "assistant", got.AgentName)
		require.Equal(t, "1", got.AgentVersion)
		require.JSONEq(t, string(s.AgentConfig), string(got.AgentConfig))
		require.True(t, got.Recording)
		require.JSONEq(t, `{"team":"qa"}`, string(got.Metadata))
		require.True(t, s.CreatedAt.Equal(got.CreatedAt), "created_at %s, want %s", got.CreatedAt, s.CreatedAt)
		require.Empty(t, got.LastRunID)
		require.Empty(t, got.LastRunStatus)
	}},
	{"MCPToolsPinned", func(t *testing.T, b *bundle) {
		// Issue 21: the pinned MCP tools are stored with the session and
		// read back as stored; a session without them reads [].
		pinned := `[{"name":"files_read","tool_name":"read","description":"Read a file","input_schema":{"type":"object"},"server":"files","transport":"stdio"}]`
		s := &rtstore.SessionRow{ID: "ses-" + uuid.NewString(), Principal: "alice", AgentConfig: json.RawMessage(`{}`),
			Metadata: json.RawMessage(`{}`), CreatedAt: time.Now(), MCPTools: json.RawMessage(pinned)}
		require.NoError(t, b.store.SessionInsert(t.Context(), s))
		got, err := b.store.SessionGet(t.Context(), s.ID)
		require.NoError(t, err)
		require.JSONEq(t, pinned, string(got.MCPTools))
		list, err := b.store.SessionList(t.Context(), &rtstore.SessionListParams{Principal: "alice", ListParams: rtstore.ListParams{Limit: all}})
		require.NoError(t, err)
		require.NotEmpty(t, list)
		require.JSONEq(t, pinned, string(list[len(list)-1].MCPTools))

		plain := b.newSession(t, "alice")
		got, err = b.store.SessionGet(t.Context(), plain.ID)
		require.NoError(t, err)
		require.JSONEq(t, `[]`, string(got.MCPTools))
	}},
	{"InsertDuplicateID", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		dup := &rtstore.SessionRow{ID: s.ID, Principal: "bob"}
		require.ErrorIs(t, b.store.SessionInsert(t.Context(), dup), rtstore.ErrAlreadyExists)

		got, err := b.store.SessionGet(t.Context(), s.ID)
		require.NoError(t, err)
		require.Equal(t, "alice", got.Principal)
	}},
	{"GetNotFound", func(t *testing.T, b *bundle) {
		_, err := b.store.SessionGet(t.Context(), "ses-missing")
		require.ErrorIs(t, err, rtstore.ErrNotFound)
	}},
	{"ListPaging", func(t *testing.T, b *bundle) {
		var alice []*rtstore.SessionRow
		for i := range 5 {
			alice = append(alice, b.newSession(t, "alice"))
			if i%2 == 0 {
				b.newSession(t, "bob")
			}
		}
		for i := 1; i < len(alice); i++ {
			require.Greater(t, alice[i].Seq, alice[i-1].Seq)
		}

		var got []string
		after := int64(0)
		for range 3 {
			page, err := b.store.SessionList(t.Context(), &rtstore.SessionListParams{
				Principal: "alice", ListParams: rtstore.ListParams{After: after, Limit: 2},
			})
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), 2)
			for _, s := range page {
				require.Equal(t, "alice", s.Principal)
				require.Greater(t, s.Seq, after)
				after = s.Seq
				got = append(got, s.ID)
			}
		}
		want := make([]string, len(alice))
		for i, s := range alice {
			want[i] = s.ID
		}
		require.Equal(t, want, got)

		rest, err := b.store.SessionList(t.Context(), &rtstore.SessionListParams{
			Principal: "alice", ListParams: rtstore.ListParams{After: after, Limit: 2},
		})
		require.NoError(t, err)
		require.Empty(t, rest)

		bob, err := b.store.SessionList(t.Context(), &rtstore.SessionListParams{
			Principal: "bob", ListParams: rtstore.ListParams{Limit: all},
		})
		require.NoError(t, err)
		require.Len(t, bob, 3)

		none, err := b.store.SessionList(t.Context(), &rtstore.SessionListParams{
			Principal: "carol", ListParams: rtstore.ListParams{Limit: all},
		})
		require.NoError(t, err)
		require.Empty(t, none)
	}},
	{"Control", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		control, err := b.store.SessionControlGet(t.Context(), s.ID)
		require.NoError(t, err)
		require.Equal(t, rtstore.ControlNone, control)

		for _, want := range []string{rtstore.ControlPaused, rtstore.ControlCancelled, rtstore.ControlNone} {
			require.NoError(t, b.store.SessionControlSet(t.Context(), s.ID, want))
			control, err = b.store.SessionControlGet(t.Context(), s.ID)
			require.NoError(t, err)
			require.Equal(t, want, control)
		}

		_, err = b.store.SessionControlGet(t.Context(), "ses-missing")
		require.ErrorIs(t, err, rtstore.ErrNotFound)
		require.ErrorIs(t, b.store.SessionControlSet(t.Context(), "ses-missing", rtstore.ControlPaused), rtstore.ErrNotFound)
	}},
	{"LatestRun", func(t *testing.T, b *bundle) {
		s := b.newSession(t, "alice")
		run := b.newRun(t, s.ID)

		got, err := b.store.SessionGet(t.Context(), s.ID)
		require.NoError(t, err)
		require.Equal(t, run.ID, got.LastRunID)
		require.Equal(t, rtstore.StatusRunning, got.LastRunStatus)

		require.NoError(t, b.store.Commit(t.Context(), commitFor(run, rtstore.StatusCompleted, "result")))
		list, err := b.store.SessionList(t.Context(), &rtstore.SessionListParams{
			Principal: "alice", ListParams: rtstore.ListParams{Limit: all},
		})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, run.ID, list[0].LastRunID)
		require.Equal(t, rtstore.StatusCompleted, list[0].LastRunStatus)

		next := b.newRun(t, s.ID)
		got, err = b.store.SessionGet(t.Context(), s.ID)
		require.NoError(t, err)
		require.Equal(t, next.ID, got.LastRunID)
		require.Equal(t, rtstore.StatusRunning, got.LastRunStatus)
	}},
	{"Ping", func(t *testing.T, b *bundle) {
		require.NoError(t, b.store.Ping(t.Context()))
	}},
	{"UniqueIDs", func(t *testing.T, b *bundle) {
		// Sessions of different principals share one id space.
		id := "ses-" + uuid.NewString()
		require.NoError(t, b.store.SessionInsert(t.Context(), &rtstore.SessionRow{ID: id, Principal: "alice"}))
		require.ErrorIs(t, b.store.SessionInsert(t.Context(), &rtstore.SessionRow{ID: id, Principal: "bob"}), rtstore.ErrAlreadyExists)
	}},
}
