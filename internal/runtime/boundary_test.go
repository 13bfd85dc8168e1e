package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/journal"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/tool"
)

// faultStore injects commit failures: before(c) decides per Commit call
// whether to fail without writing (errBefore) or to write and then report
// a failure (ambiguous: applied, acknowledgement lost).
type faultStore struct {
	rtstore.Store
	mu     sync.Mutex
	decide func(c *rtstore.Commit) (failBefore, failAfter bool)
	// err is the injected failure; nil: errInjected.
	err error
	// controlDown fails SessionControlGet with ErrUnavailable while set;
	// controlFailures counts those failures.
	controlDown     atomic.Bool
	controlFailures atomic.Int64
}

var errInjected = errors.New("injected: connection reset")

func (f *faultStore) Commit(ctx context.Context, c *rtstore.Commit) error {
	f.mu.Lock()
	before, after := false, false
	if f.decide != nil {
		before, after = f.decide(c)
	}
	injected := f.err
	f.mu.Unlock()
	if injected == nil {
		injected = errInjected
	}
	if before {
		return injected
	}
	if err := f.Store.Commit(ctx, c); err != nil {
		return err
	}
	if after {
		return injected
	}
	return nil
}

func (f *faultStore) SessionControlGet(ctx context.Context, id string) (string, error) {
	if f.controlDown.Load() {
		f.controlFailures.Add(1)
		return "", fmt.Errorf("read control: %w: too many open files", rtstore.ErrUnavailable)
	}
	return f.Store.SessionControlGet(ctx, id)
}

func hasKind(c *rtstore.Commit, k journal.Kind) bool {
	for _, r := range c.Records {
		if r.Kind == k {
			return true
		}
	}
	return false
}

func faultSetup(t *testing.T, decide func(c *rtstore.Commit) (bool, bool)) (*testBundle, *faultStore) {
	t.Helper()
	tb := setup(t, tenStepAgent("ten"))
	fs := &faultStore{Store: tb.store.Store, decide: decide}
	tb.store.Store = fs
	return tb, fs
}

func runTen(t *testing.T, tb *testBundle) *hxruntime.RunResult {
	t.Helper()
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "ten", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	return runToEnd(t, tb, sess.ID, "go")
}

// requireUniqueRecords: no gap, no duplicate record id, exactly one
// tool.returned per execution key.
func requireUniqueRecords(t *testing.T, recs []journal.Record) {
	t.Helper()
	ids := map[string]bool{}
	returned := map[string]int{}
	for _, r := range recs {
		require.False(t, ids[r.ID], "duplicate record id %s", r.ID)
		ids[r.ID] = true
		if r.Kind == journal.KindToolReturned {
			returned[*r.ExecutionKey]++
		}
	}
	for k, n := range returned {
		require.Equal(t, 1, n, "tool.returned of %s", k)
	}
}

// TestAmbiguousCommitNeverDuplicates: a commit that was applied but
// reported failed is re-sent with the same record IDs; the journal holds
// each boundary once and no tool runs twice.
func TestAmbiguousCommitNeverDuplicates(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	tb, _ := faultSetup(t, func(c *rtstore.Commit) (bool, bool) {
		// Every boundary holding a tool.returned is applied, then reported failed once.
		if hasKind(c, journal.KindToolReturned) && n.Add(1)%2 == 1 {
			return false, true
		}
		return false, false
	})
	res := runTen(t, tb)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, int64(10), tb.toolCalls("count"), "each tool ran exactly once")
	recs := journalOf(t, tb, res.RunID)
	requireUniqueRecords(t, recs)
	returned := 0
	for _, r := range recs {
		if r.Kind == journal.KindToolReturned {
			returned++
		}
	}
	require.Equal(t, 10, returned)
	require.Equal(t, int64(20), n.Load(), "each ambiguous commit was re-sent once")
}

// TestFailedCommitIsRetriedWithSameRecords: a commit that fails without
// writing is re-sent; the run completes with a gap-free journal.
func TestFailedCommitIsRetriedWithSameRecords(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	tb, _ := faultSetup(t, func(c *rtstore.Commit) (bool, bool) {
		return n.Add(1)%3 == 1, false // every third commit try fails first
	})
	res := runTen(t, tb)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, int64(10), tb.toolCalls("count"))
	requireUniqueRecords(t, journalOf(t, tb, res.RunID))
}

// TestStorageOutageIsWaitedOut (DESIGN §10): storage becomes unavailable
// (ErrUnavailable: a full disk, say) at a boundary of a run; the run waits,
// neither failed nor advanced, and goes on by itself once storage is back:
// it completes, every tool ran once, and the boundary that failed was
// committed with the records it held when it first failed (their ids kept,
// none twice).
func TestStorageOutageIsWaitedOut(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		kind  journal.Kind
		calls int64 // tool calls while storage is down
	}{
		{journal.KindModelStarted, 0},
		{journal.KindToolDispatched, 0},
		{journal.KindToolReturned, 1},
	} {
		t.Run(string(tt.kind), func(t *testing.T) {
			t.Parallel()
			var down, tripped atomic.Bool
			var failedTries atomic.Int64
			var held []string // the failed boundary's record ids
			tb, fs := faultSetup(t, func(c *rtstore.Commit) (bool, bool) {
				if hasKind(c, tt.kind) && !tripped.Load() {
					for _, r := range c.Records {
						held = append(held, r.ID)
					}
					tripped.Store(true)
					down.Store(true) // until the test brings storage back
				}
				if down.Load() {
					failedTries.Add(1)
				}
				return down.Load(), false
			})
			fs.err = fmt.Errorf("commit: %w: database or disk is full", rtstore.ErrUnavailable)
			ctx := context.Background()
			sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "ten", Version: "v1"}, Recording: recording(true)})
			require.NoError(t, err)
			run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return failedTries.Load() > 5 }, 5*time.Second, 5*time.Millisecond)
			require.Equal(t, tt.calls, tb.toolCalls("count"))
			res, err := tb.rt.GetRun(ctx, run.RunID)
			require.NoError(t, err)
			require.Equal(t, hxruntime.StatusRunning, res.Status, "the run waits")

			down.Store(false)
			res = waitRun(t, tb, run.RunID)
			require.Equal(t, hxruntime.StatusCompleted, res.Status)
			require.Nil(t, res.Error)
			require.Equal(t, int64(10), tb.toolCalls("count"), "every tool ran once")
			recs := journalOf(t, tb, run.RunID)
			requireUniqueRecords(t, recs)
			stored := map[string]bool{}
			dispatched := map[string]int{}
			for _, r := range recs {
				stored[r.ID] = true
				require.NotContains(t, []journal.Kind{journal.KindModelFailed, journal.KindToolFailed, journal.KindCommandFailed}, r.Kind)
				if r.Kind == journal.KindToolDispatched {
					dispatched[*r.ExecutionKey]++
				}
			}
			require.NotEmpty(t, held)
			for _, id := range held {
				require.True(t, stored[id], "record %s of the failed boundary committed under its id", id)
			}
			require.Len(t, dispatched, 10)
			for k, n := range dispatched {
				require.Equal(t, 1, n, "%s dispatched once", k)
			}
		})
	}
}

// TestControlReadOutageIsWaitedOut: the control flag cannot be read at a
// boundary (ErrUnavailable); the run waits there instead of being left
// running with no driver, and completes once storage answers again.
func TestControlReadOutageIsWaitedOut(t *testing.T) {
	t.Parallel()
	tb, fs := faultSetup(t, nil)
	fs.controlDown.Store(true)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "ten", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return fs.controlFailures.Load() > 5 }, 5*time.Second, 5*time.Millisecond)
	require.Zero(t, tb.toolCalls("count"))

	fs.controlDown.Store(false)
	res := waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, int64(10), tb.toolCalls("count"))
}

// TestFailedDispatchCommitNeverRunsHandler: when the commit carrying
// tool.dispatched cannot be written, the handler never runs; while storage
// stays down the run cannot advance; once it is back the run is marked
// failed with a recording error, the retained dispatch committed with a
// tool.failed of unknown outcome (REFERENCE §3.3), and resume finishes it
// with the tool (safe) dispatched again and run once.
func TestFailedDispatchCommitNeverRunsHandler(t *testing.T) {
	t.Parallel()
	var down, tripped atomic.Bool
	var failedTries atomic.Int64
	tb, _ := faultSetup(t, func(c *rtstore.Commit) (bool, bool) {
		if hasKind(c, journal.KindToolDispatched) && !tripped.Load() {
			tripped.Store(true)
			down.Store(true) // storage goes down until the test brings it back
		}
		if down.Load() {
			failedTries.Add(1)
		}
		return down.Load(), false
	})
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "ten", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return failedTries.Load() > 5 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, int64(0), tb.toolCalls("count"), "the handler never ran")
	res, err := tb.rt.GetRun(ctx, run.RunID)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusRunning, res.Status, "nothing advanced while storage was down")

	down.Store(false)
	res = waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusFailed, res.Status)
	require.Equal(t, "RecordingError", res.Error.Type)

	_, err = tb.rt.Resume(ctx, sess.ID, hxruntime.ResumeParams{})
	require.NoError(t, err)
	res = waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, int64(10), tb.toolCalls("count"))
	recs := journalOf(t, tb, res.RunID)
	requireUniqueRecords(t, recs)
	dispatched := map[string][]string{} // execution key → attempts dispatched
	var failed []journal.Record
	for _, r := range recs {
		switch r.Kind {
		case journal.KindToolDispatched:
			dispatched[*r.ExecutionKey] = append(dispatched[*r.ExecutionKey], r.AttemptID)
		case journal.KindToolFailed:
			failed = append(failed, r)
		}
	}
	require.Len(t, failed, 1)
	require.JSONEq(t, `{"type":"RecordingError","message":"Required flight-recording commit failed","outcome":"unknown"}`, string(failed[0].Payload))
	for k, attempts := range dispatched {
		if k == *failed[0].ExecutionKey {
			require.Equal(t, []string{"1", "2"}, attempts, "%s: the failed dispatch, then the resumed one", k)
			continue
		}
		require.Equal(t, []string{"1"}, attempts, k)
	}
}

// TestConflictingResendRollsBack: a re-sent record id with other content
// fails the commit and leaves nothing of it behind.
func TestConflictingResendRollsBack(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	recs := journalOf(t, tb, res.RunID)
	before, err := tb.rt.GetRun(ctx, res.RunID)
	require.NoError(t, err)
	evil := recs[3]
	evil.Payload = json.RawMessage(`{"tampered":true}`)
	err = tb.store.Store.Commit(ctx, &rtstore.Commit{
		SessionID: hxruntime.SessionKey(hxruntime.LocalPrincipal, sess.ID), RunID: res.RunID, Status: hxruntime.StatusFailed, Phase: "model",
		State: json.RawMessage(`{"status":"failed"}`), Records: []journal.Record{evil},
	})
	require.ErrorIs(t, err, rtstore.ErrRecordConflict)
	after, err := tb.rt.GetRun(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, before.Status, after.Status)
	require.Equal(t, len(recs), len(journalOf(t, tb, res.RunID)))
}

// TestOpenAIProviderRetriesWithNewAttempts: a Chat Completions server that
// answers 429, then 500, then a tool call and an answer; each failure is a
// model.failed of its own attempt and the retries carry new attempt numbers.
func TestOpenAIProviderRetriesWithNewAttempts(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch hits.Add(1) {
		case 1:
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"slow down","type":"rate_limit_exceeded"}}`))
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":{"message":"boom","type":"server_error"}}`))
		case 3:
			_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"count","arguments":"{\"x\":1}"}}]}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`))
		default:
			_, _ = w.Write([]byte(`{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"all done"}}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`))
		}
	}))
	t.Cleanup(srv.Close)
	def := &agent.Definition{
		Name: "oai", Version: "v1",
		Model: model.Config{Provider: "openai", Model: "m", BaseURL: srv.URL},
		Retry: &agent.RetryPolicy{Attempts: 4, BackoffSeconds: 0.01, MaxBackoffSeconds: 0.01},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"}}},
	}
	tb := setup(t, def)
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "all done", *res.Output)
	require.Equal(t, int64(14), res.Usage.InputTokens)
	var got []string
	for _, b := range boundaries(journalOf(t, tb, res.RunID)) {
		if b.kind == "model.started" || b.kind == "model.failed" {
			got = append(got, b.kind+"@"+b.step+"/"+b.attempt)
		}
	}
	require.Equal(t, []string{
		"model.started@1/1", "model.failed@1/1",
		"model.started@1/2", "model.failed@1/2",
		"model.started@1/3", "model.started@2/1",
	}, got)
	srv.CloseClientConnections()
}

// TestModelStartedCommitFailure (REFERENCE §11 idea 6): the commit of
// model.started fails; the provider is never called, the run fails with a
// recording error, and the journal holds that one model.started, closed
// by model.failed. Resume then opens the step's next attempt.
func TestModelStartedCommitFailure(t *testing.T) {
	t.Parallel()
	var tripped atomic.Bool
	tb, _ := faultSetup(t, func(c *rtstore.Commit) (bool, bool) {
		// The first model.started fails until the failure is written.
		if hasKind(c, journal.KindModelStarted) && !hasKind(c, journal.KindCommandFailed) && !tripped.Load() {
			return true, false
		}
		if hasKind(c, journal.KindCommandFailed) {
			tripped.Store(true)
		}
		return false, false
	})
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "ten", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusFailed, res.Status)
	require.Equal(t, "RecordingError", res.Error.Type)
	require.Equal(t, []boundary{
		{"run.started", "0", "0"},
		{"model.started", "1", "1"},
		{"model.failed", "1", "1"},
	}, boundaries(journalOf(t, tb, res.RunID)))

	_, err = tb.rt.Resume(ctx, sess.ID, hxruntime.ResumeParams{})
	require.NoError(t, err)
	res = waitRun(t, tb, res.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.True(t, res.UsageIncomplete)
	require.Equal(t, boundary{"model.started", "1", "2"}, boundaries(journalOf(t, tb, res.RunID))[4], "the next attempt of step 1")
}

// TestManualDispatchCommitFailure (REFERENCE §11 idea 7): the commit of a
// manual tool's tool.dispatched fails; the handler never runs, the entry
// is uncertain, tool.failed says "unknown", and the run awaits a decision.
func TestManualDispatchCommitFailure(t *testing.T) {
	t.Parallel()
	def := oneCallAgent("manual-count", model.ToolCall{ID: "c", Name: "count", Input: json.RawMessage(`{}`)},
		tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "manual"})
	tb := setup(t, def)
	var tripped atomic.Bool
	tb.store.Store = &faultStore{Store: tb.store.Store, decide: func(c *rtstore.Commit) (bool, bool) {
		if hasKind(c, journal.KindToolDispatched) && !tripped.Load() {
			if hasKind(c, journal.KindToolFailed) {
				tripped.Store(true)
				return false, false
			}
			return true, false
		}
		return false, false
	}}
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusAwaitingInput, res.Status)
	require.Len(t, res.Pending, 1)
	require.Equal(t, hxruntime.ToolUncertain, res.Pending[0].Status)
	require.Zero(t, tb.toolCalls("count"), "the handler never ran")
	failed := ofKind(journalOf(t, tb, res.RunID), journal.KindToolFailed)
	require.Len(t, failed, 1)
	require.JSONEq(t, `{"type":"RecordingError","message":"Required flight-recording commit failed","outcome":"unknown"}`, string(failed[0].Payload))
}

// TestPauseDuringTheLastModelCall: a pause that comes while the final model
// call is in flight stops the run before it finishes (REFERENCE §4.1: the
// control flag is read before each command; finish is one), and a resume
// finishes it.
func TestPauseDuringTheLastModelCall(t *testing.T) {
	t.Parallel()
	hit, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(hit) })
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"all done"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	def := &agent.Definition{Name: "oai-pause", Version: "v1", Model: model.Config{Provider: "openai", Model: "m", BaseURL: srv.URL}}
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	<-hit
	paused := make(chan *hxruntime.RunResult, 1)
	go func() {
		res, _ := tb.rt.Pause(ctx, sess.ID)
		paused <- res
	}()
	require.Eventually(t, func() bool {
		ctl, err := tb.store.SessionControlGet(ctx, hxruntime.SessionKey(hxruntime.LocalPrincipal, sess.ID))
		return err == nil && ctl == rtstore.ControlPaused
	}, 5*time.Second, 5*time.Millisecond)
	close(release)
	res := <-paused
	require.NotNil(t, res)
	require.Equal(t, hxruntime.StatusPaused, res.Status)

	_, err = tb.rt.Resume(ctx, sess.ID, hxruntime.ResumeParams{})
	require.NoError(t, err)
	res = waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, "all done", *res.Output)
}
