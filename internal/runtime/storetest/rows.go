package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
)

// rowsCases cover RunRowsGet: a run's step rows and tool rows, read back
// for its timeline.
var rowsCases = []testCase{
	{"StepsInNumericOrderNewestPayload", func(t *testing.T, b *bundle) {
		run := b.newRun(t, b.newSession(t, "alice").ID)
		for _, s := range []struct{ id, payload string }{
			{"1", `{"attempt":1,"phase":"model"}`},
			{"10", `{"attempt":1,"phase":"model"}`},
			{"2", `{"attempt":1,"phase":"model"}`},
			{"1", `{"attempt":2,"attempts":[{"attempt":1,"outcome":"failed"}],"phase":"tools"}`},
		} {
			c := commitFor(run, rtstore.StatusRunning, "model")
			c.StepID, c.Step = s.id, []byte(s.payload)
			require.NoError(t, b.store.Commit(t.Context(), c))
		}
		rows, err := b.store.RunRowsGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Len(t, rows.Steps, 3)
		require.Equal(t, []string{"1", "2", "10"}, []string{rows.Steps[0].ID, rows.Steps[1].ID, rows.Steps[2].ID})
		require.JSONEq(t, `{"attempt":2,"attempts":[{"attempt":1,"outcome":"failed"}],"phase":"tools"}`, string(rows.Steps[0].Payload))
		require.Empty(t, rows.Tools)
	}},
	{"ToolRowsOutcomeOverPending", func(t *testing.T, b *bundle) {
		run := b.newRun(t, b.newSession(t, "alice").ID)
		keyA, keyB := run.ID+":1:a", run.ID+":1:b"
		c := commitFor(run, rtstore.StatusAwaitingInput, "tools")
		c.Tools = []rtstore.ToolRow{
			{ExecutionKey: keyB, Payload: []byte(`{"status":"approval","approval_requested_at":"2026-01-05T10:00:00Z"}`)},
			{ExecutionKey: keyA, Payload: []byte(`{"status":"approval"}`)},
		}
		require.NoError(t, b.store.Commit(t.Context(), c))
		c = commitFor(run, rtstore.StatusRunning, "tools")
		c.Tools = []rtstore.ToolRow{{ExecutionKey: keyB, HasOutcome: true, Payload: []byte(`{"status":"raw_completed","attempts":[{"attempt":1}]}`)}}
		require.NoError(t, b.store.Commit(t.Context(), c))

		rows, err := b.store.RunRowsGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Empty(t, rows.Steps)
		require.Len(t, rows.Tools, 2)
		require.Equal(t, keyA, rows.Tools[0].ExecutionKey)
		require.False(t, rows.Tools[0].HasOutcome)
		require.JSONEq(t, `{"status":"approval"}`, string(rows.Tools[0].Payload))
		require.Equal(t, keyB, rows.Tools[1].ExecutionKey)
		require.True(t, rows.Tools[1].HasOutcome, "the outcome row wins over the earlier approvals row")
		require.JSONEq(t, `{"status":"raw_completed","attempts":[{"attempt":1}]}`, string(rows.Tools[1].Payload))
	}},
	{"OnlyTheRunsOwnRows", func(t *testing.T, b *bundle) {
		sess := b.newSession(t, "alice")
		run, other := b.newRun(t, sess.ID), b.newRun(t, b.newSession(t, "bob").ID)
		c := commitFor(other, rtstore.StatusRunning, "tools")
		c.StepID, c.Step = "1", []byte(`{"attempt":1}`)
		c.Tools = []rtstore.ToolRow{{ExecutionKey: other.ID + ":1:a", Payload: []byte(`{}`)}}
		require.NoError(t, b.store.Commit(t.Context(), c))
		rows, err := b.store.RunRowsGet(t.Context(), run.ID)
		require.NoError(t, err)
		require.Empty(t, rows.Steps)
		require.Empty(t, rows.Tools)
		rows, err = b.store.RunRowsGet(t.Context(), "run-unknown")
		require.NoError(t, err, "an unknown run has no rows")
		require.Empty(t, rows.Steps)
		require.Empty(t, rows.Tools)
	}},
}
