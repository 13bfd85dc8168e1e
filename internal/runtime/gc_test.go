package runtime_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/hxtest"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/sqlite"
	"hxd/internal/tool"
)

// gcStore is the test's counting store with the SQLite store's retention.
type gcStore struct {
	*countingStore
	rtstore.RetentionStore
}

// setupGC is setup on a store that keeps tombstones.
func setupGC(t *testing.T, defs ...*agent.Definition) *testBundle {
	t.Helper()
	return setupCfg(t, func(c *hxruntime.Config) {
		cs := c.Store.(*countingStore)
		c.Store = gcStore{countingStore: cs, RetentionStore: cs.Store.(rtstore.RetentionStore)}
	}, defs...)
}

// gcStore is the runtime's store with its retention, for GC.
func (tb *testBundle) gcStore() hxruntime.Store {
	return gcStore{countingStore: tb.store, RetentionStore: tb.store.Store.(rtstore.RetentionStore)}
}

// askAgent stops at awaiting_input: its one tool call needs approval.
func askAgent() *agent.Definition {
	return &agent.Definition{
		Name: "asker", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "a", Name: "count", Input: json.RawMessage(`{"n":1}`)}}},
			{Text: "done"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", Permission: "ask"}}},
	}
}

// fileAgent stores an artifact (the builtin "file" returns one).
func fileAgent(name string, retention *agent.Retention) *agent.Definition {
	d := oneCallAgent(name, model.ToolCall{ID: "f", Name: "file", Input: json.RawMessage(`{}`)},
		tool.Config{Name: "file", Kind: "builtin", Builtin: "file", ReplayPolicy: "safe"})
	d.Retention = retention
	return d
}

// inTwoHours is a gc clock two hours ahead: every run of the test finished
// more than an hour before it.
func inTwoHours() time.Time { return time.Now().Add(2 * time.Hour) }

// TestGCDeletesFinishedOnly: gc deletes the completed session, its runs
// and its artifact, and leaves awaiting-input sessions and sessions without
// runs alone; the owner then gets ErrGone for the session, the run and a
// request id re-sent, anyone else ErrNotFound.
func TestGCDeletesFinishedOnly(t *testing.T) {
	t.Parallel()
	tb := setupGC(t, askAgent(), fileAgent("filer", nil))
	ctx := hxruntime.WithPrincipal(context.Background(), "alice")
	done, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{SessionID: "done-1", Agent: agent.Ref{Name: "filer", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: done.ID, Message: jsonString("go"), RequestID: "req-1"})
	require.NoError(t, err)
	res, err := tb.rt.WaitRun(ctx, run.RunID, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)

	waiting, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "asker", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	wrun, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: waiting.ID, Message: jsonString("go")})
	require.NoError(t, err)
	wres, err := tb.rt.WaitRun(ctx, wrun.RunID, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusAwaitingInput, wres.Status)
	empty, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "asker", Version: "v1"}})
	require.NoError(t, err)

	rep, err := hxruntime.GC(ctx, hxruntime.GCOptions{Store: tb.gcStore(), RetainFinishedFor: time.Hour, Now: inTwoHours, Logger: hxtest.Logger(t)})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Sessions)
	require.Equal(t, 1, rep.Runs)
	require.Positive(t, rep.Records)
	require.Positive(t, rep.Events)
	require.Positive(t, rep.Bytes)
	require.Equal(t, 1, rep.Artifacts)
	require.EqualValues(t, len("%PDF-1.7 report"), rep.ArtifactBytes)
	require.EqualValues(t, 2, rep.Tombstones)

	_, err = tb.rt.GetSession(ctx, done.ID)
	require.ErrorIs(t, err, hxruntime.ErrGone)
	_, err = tb.rt.GetRun(ctx, run.RunID)
	require.ErrorIs(t, err, hxruntime.ErrGone)
	_, _, err = tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: done.ID, Message: jsonString("go"), RequestID: "req-1"})
	require.ErrorIs(t, err, hxruntime.ErrGone, "a re-sent request id never returns the old run")
	_, err = tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{SessionID: "done-1", Agent: agent.Ref{Name: "filer", Version: "v1"}})
	require.ErrorIs(t, err, hxruntime.ErrGone, "a deleted session id is not taken again")

	bob := hxruntime.WithPrincipal(context.Background(), "bob")
	_, err = tb.rt.GetSession(bob, done.ID)
	require.ErrorIs(t, err, hxruntime.ErrNotFound)
	require.NotErrorIs(t, err, hxruntime.ErrGone)
	_, err = tb.rt.GetRun(bob, run.RunID)
	require.ErrorIs(t, err, hxruntime.ErrNotFound)
	require.NotErrorIs(t, err, hxruntime.ErrGone)

	for _, id := range []string{waiting.ID, empty.ID} {
		_, err = tb.rt.GetSession(ctx, id)
		require.NoError(t, err, "unfinished sessions stay")
	}
	require.NotEmpty(t, journalOf(t, tb, wrun.RunID))

	// Nothing is left to do.
	rep, err = hxruntime.GC(ctx, hxruntime.GCOptions{Store: tb.gcStore(), RetainFinishedFor: time.Hour, Now: inTwoHours})
	require.NoError(t, err)
	require.Zero(t, rep.Sessions)
	require.Zero(t, rep.Artifacts)
}

// TestGCPolicy: the server default, the agent's retention and --older-than.
func TestGCPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		agentKeep *agent.Retention
		opts      hxruntime.GCOptions
		deleted   bool
	}{
		{name: "keep forever by default", opts: hxruntime.GCOptions{}},
		{name: "server default reached", opts: hxruntime.GCOptions{RetainFinishedFor: time.Hour}, deleted: true},
		{name: "server default not reached", opts: hxruntime.GCOptions{RetainFinishedFor: 3 * time.Hour}},
		{name: "agent keeps longer", agentKeep: &agent.Retention{FinishedFor: "720h"}, opts: hxruntime.GCOptions{RetainFinishedFor: time.Hour}},
		{name: "agent keeps shorter", agentKeep: &agent.Retention{FinishedFor: "90m"}, deleted: true},
		{name: "older-than overrides the agent", agentKeep: &agent.Retention{FinishedFor: "720h"}, opts: hxruntime.GCOptions{OlderThan: time.Hour}, deleted: true},
		{name: "older-than not reached", opts: hxruntime.GCOptions{RetainFinishedFor: time.Hour, OlderThan: 3 * time.Hour}},
		{name: "dry run", opts: hxruntime.GCOptions{RetainFinishedFor: time.Hour, DryRun: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			def := fileAgent("filer", tt.agentKeep)
			tb := setupGC(t, def)
			ctx := context.Background()
			sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
			require.NoError(t, err)
			require.Equal(t, hxruntime.StatusCompleted, runToEnd(t, tb, sess.ID, "go").Status)
			reg := agent.NewRegistry("file")
			require.NoError(t, reg.Register(def))
			o := tt.opts
			o.Store, o.Agents, o.Now = tb.gcStore(), reg, inTwoHours
			rep, err := hxruntime.GC(ctx, o)
			require.NoError(t, err)
			_, getErr := tb.rt.GetSession(ctx, sess.ID)
			if tt.deleted {
				require.Equal(t, 1, rep.Sessions)
				require.ErrorIs(t, getErr, hxruntime.ErrGone)
				return
			}
			require.NoError(t, getErr)
			if o.DryRun {
				require.Equal(t, 1, rep.Sessions, "a dry run counts what it would delete")
				require.Positive(t, rep.Bytes)
				o.DryRun = false
				real, err := hxruntime.GC(ctx, o)
				require.NoError(t, err)
				require.Equal(t, real.Artifacts, rep.Artifacts)
				rep.DryRun, rep.Tombstones = false, real.Tombstones
				require.Equal(t, real, rep, "the dry run reported what the real run deleted")
				return
			}
			require.Zero(t, rep.Sessions)
		})
	}
}

// TestGCStopsAndResumes: a sweep that stops after a session (as a crash
// at HXD_CRASH_AFTER=gc.session would) leaves every session either whole
// or gone, and a rerun deletes the rest.
func TestGCStopsAndResumes(t *testing.T) {
	t.Parallel()
	tb := setupGC(t)
	ctx := context.Background()
	var ids []string
	for range 3 {
		sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}, Recording: recording(true)})
		require.NoError(t, err)
		require.Equal(t, hxruntime.StatusCompleted, runToEnd(t, tb, sess.ID, "go").Status)
		ids = append(ids, sess.ID)
	}
	stop, cancel := context.WithCancel(ctx)
	rep, err := hxruntime.GC(stop, hxruntime.GCOptions{
		Store: tb.gcStore(), OlderThan: time.Hour, Now: inTwoHours, BatchSize: 1,
		AfterSessionFunc: cancel,
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, rep.Sessions)
	gone := 0
	for _, id := range ids {
		s, err := tb.rt.GetSession(ctx, id)
		if err != nil {
			require.ErrorIs(t, err, hxruntime.ErrGone)
			gone++
			continue
		}
		runs, err := tb.rt.ListRuns(ctx, s.ID, hxruntime.ListParams{})
		require.NoError(t, err)
		require.Len(t, runs.Items, 1, "a session left is whole")
		require.NotEmpty(t, journalOf(t, tb, runs.Items[0].RunID))
	}
	require.Equal(t, 1, gone)

	rep, err = hxruntime.GC(ctx, hxruntime.GCOptions{Store: tb.gcStore(), OlderThan: time.Hour, Now: inTwoHours})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Sessions)
	for _, id := range ids {
		_, err := tb.rt.GetSession(ctx, id)
		require.ErrorIs(t, err, hxruntime.ErrGone)
	}
}

// TestGCTwoSweepers: two stores on one file (two processes) sweep at once;
// every session is deleted exactly once and neither fails.
func TestGCTwoSweepers(t *testing.T) {
	t.Parallel()
	tb := setupGC(t)
	ctx := context.Background()
	const n = 8
	for range n {
		sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}, Recording: recording(true)})
		require.NoError(t, err)
		require.Equal(t, hxruntime.StatusCompleted, runToEnd(t, tb, sess.ID, "go").Status)
	}
	other, err := sqlite.Open(ctx, sqlite.Config{Path: tb.path, Logger: hxtest.Logger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close()) })
	var (
		wg    sync.WaitGroup
		reps  [2]*hxruntime.GCReport
		errs  [2]error
		store = [2]hxruntime.Store{tb.gcStore(), other}
	)
	for i := range 2 {
		wg.Go(func() {
			reps[i], errs[i] = hxruntime.GC(ctx, hxruntime.GCOptions{Store: store[i], OlderThan: time.Hour, Now: inTwoHours, BatchSize: 2})
		})
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	rep, err := hxruntime.GC(ctx, hxruntime.GCOptions{Store: other, OlderThan: time.Hour, Now: inTwoHours})
	require.NoError(t, err)
	require.Equal(t, n, reps[0].Sessions+reps[1].Sessions+rep.Sessions, "each session deleted once")
	require.EqualValues(t, 2*n, rep.Tombstones)
}

// TestGCOptionsWithDefaults: unset options get their defaults, set ones
// are kept.
func TestGCOptionsWithDefaults(t *testing.T) {
	t.Parallel()
	o := hxruntime.GCOptions{}.WithDefaults()
	require.NotNil(t, o.Now)
	require.NotNil(t, o.Logger)
	require.Equal(t, hxruntime.DefaultTombstoneFor, o.TombstoneFor)
	require.Equal(t, 100, o.BatchSize)
	o = hxruntime.GCOptions{TombstoneFor: time.Hour, BatchSize: 7}.WithDefaults()
	require.Equal(t, time.Hour, o.TombstoneFor)
	require.Equal(t, 7, o.BatchSize)
}
