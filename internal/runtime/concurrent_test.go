package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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

// batchAgent calls the builtin "meet" three times in one model response
// (calls a, b and c), then answers "done".
func batchAgent(name string, concurrent bool) *agent.Definition {
	var calls []model.ToolCall
	for _, id := range []string{"a", "b", "c"} {
		calls = append(calls, model.ToolCall{ID: id, Name: "meet", Input: json.RawMessage(`{}`)})
	}
	return &agent.Definition{
		Name: name, Version: "v1", MaxIterations: 5,
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{{ToolCalls: calls}, {Text: "done"}}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "meet", Kind: "builtin", Builtin: "meet", ReplayPolicy: "safe", Concurrent: concurrent}}},
	}
}

// startRecorded creates a recorded session of agent name@v1 and submits a
// run to it.
func startRecorded(t *testing.T, tb *testBundle, name string) (*hxruntime.Session, *hxruntime.RunResult) {
	t.Helper()
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: name, Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	return sess, run
}

// kindCounts counts the run's journal records by kind.
func kindCounts(t *testing.T, tb *testBundle, runID string) map[journal.Kind]int {
	t.Helper()
	out := map[journal.Kind]int{}
	for _, r := range journalOf(t, tb, runID) {
		out[r.Kind]++
	}
	return out
}

// withMeet installs fn as the builtin "meet".
func withMeet(fn tool.BuiltinFunc) func(*hxruntime.Config) {
	return func(cfg *hxruntime.Config) { cfg.ToolOptions.Builtins["meet"] = fn }
}

// TestConcurrentBatchRunsInParallel: the calls of an all-concurrent batch
// are all dispatched (committed) before any handler runs, the handlers run
// at the same time, and each raw result is committed as it comes, while
// the others still run, so tool.returned follows completion order.
func TestConcurrentBatchRunsInParallel(t *testing.T) {
	t.Parallel()
	started := make(chan string, 3)
	release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), "c": make(chan struct{})}
	stop := make(chan struct{}) // the test is over: let any handler go
	tb := setupCfg(t, withMeet(func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
		started <- inv.Call.ID
		select {
		case <-release[inv.Call.ID]:
		case <-stop:
		case <-ctx.Done():
			return tool.Outcome{}, ctx.Err()
		}
		return tool.Outcome{Result: model.ToolResult{Content: jsonString("result " + inv.Call.ID)}}, nil
	}), batchAgent("par", true))
	t.Cleanup(func() { close(stop) }) // runs before the runtime stops
	_, run := startRecorded(t, tb, "par")

	// All three handlers are in flight at once: run one after the other,
	// the second would never start while the first waits for its release.
	for range 3 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the calls of a concurrent batch did not run in parallel")
		}
	}
	returnedCalls := func() []string {
		var ids []string
		for _, r := range journalOf(t, tb, run.RunID) {
			if r.Kind == journal.KindToolReturned {
				var p struct {
					ToolCallID string `json:"tool_call_id"`
				}
				require.NoError(t, json.Unmarshal(r.Payload, &p))
				ids = append(ids, p.ToolCallID)
			}
		}
		return ids
	}
	// Finish them in the order c, b, a; each raw result is durable before
	// the next call finishes.
	want := []string{}
	for _, id := range []string{"c", "b", "a"} {
		close(release[id])
		want = append(want, id)
		require.Eventually(t, func() bool { return len(returnedCalls()) == len(want) }, 10*time.Second, 5*time.Millisecond,
			"the raw result of %s is not committed while the other calls run", id)
		require.Equal(t, want, returnedCalls())
	}
	res := waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)

	recs := journalOf(t, tb, run.RunID)
	firstReturned, dispatched, keys := -1, 0, map[string]bool{}
	for i, r := range recs {
		switch r.Kind {
		case journal.KindToolStarted, journal.KindToolDispatched:
			require.Equal(t, -1, firstReturned, "every call is dispatched before any returns")
			if r.Kind == journal.KindToolDispatched {
				dispatched++
				require.NotNil(t, r.ExecutionKey)
				keys[*r.ExecutionKey] = true
			}
		case journal.KindToolReturned:
			if firstReturned < 0 {
				firstReturned = i
			}
		}
	}
	require.Equal(t, 3, dispatched)
	require.Len(t, keys, 3, "distinct execution keys")

	// The next model call sees the results in call order.
	var req model.Request
	for _, r := range recs {
		if r.Kind == journal.KindModelStarted && r.StepID == "2" {
			require.NoError(t, json.Unmarshal(r.Payload, &req))
		}
	}
	var order []string
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if b.ToolUseID != "" {
				order = append(order, b.ToolUseID)
			}
		}
	}
	require.Equal(t, []string{"a", "b", "c"}, order)
}

// TestBatchWithoutConcurrencyRunsInTurn: calls of tools that are not
// concurrent never overlap.
func TestBatchWithoutConcurrencyRunsInTurn(t *testing.T) {
	t.Parallel()
	var inFlight, most atomic.Int64
	tb := setupCfg(t, withMeet(func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		return tool.Outcome{Result: model.ToolResult{Content: jsonString("ok")}}, nil
	}), batchAgent("seq", false))
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "seq", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, int64(1), most.Load())
}

// TestConcurrentBatchRetries: in a parallel batch a transient failure is
// retried in its own goroutine while the other calls finish; the run
// completes with each result once.
func TestConcurrentBatchRetries(t *testing.T) {
	t.Parallel()
	var attempts [3]atomic.Int64
	tb := setupCfg(t, withMeet(func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
		i := int(inv.Call.ID[0] - 'a')
		if attempts[i].Add(1) == 1 && inv.Call.ID == "b" {
			return tool.Outcome{}, &tool.Failure{Type: "Flaky", Message: "try again", Transient: true}
		}
		return tool.Outcome{Result: model.ToolResult{Content: jsonString("attempt " + strconv.Itoa(inv.Attempt))}}, nil
	}), func() *agent.Definition {
		d := batchAgent("retry", true)
		d.Tools[0].Retry = &tool.Retry{Attempts: 3}
		return d
	}())
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "retry", Version: "v1"}, Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, []int64{1, 2, 1}, []int64{attempts[0].Load(), attempts[1].Load(), attempts[2].Load()})
	kinds := kindCounts(t, tb, res.RunID)
	require.Equal(t, 1, kinds[journal.KindToolFailed])
	require.Equal(t, 3, kinds[journal.KindToolReturned])
}

// TestConcurrentBatchTakeover: a driver that loses its lease while one call
// of a parallel batch still runs stops without a further commit; the run
// that takes over runs only that call again, never the calls whose raw
// results were committed as they came.
func TestConcurrentBatchTakeover(t *testing.T) {
	t.Parallel()
	var fs *leaseFaultStore
	var calls [3]atomic.Int64
	release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	stop := make(chan struct{}) // the test is over: let any handler go
	tb := setupCfg(t, func(cfg *hxruntime.Config) {
		withMeet(func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
			if calls[inv.Call.ID[0]-'a'].Add(1) == 1 {
				ch := release[inv.Call.ID] // nil for c: its first call never returns
				select {
				case <-ch:
				case <-stop:
				case <-ctx.Done():
					return tool.Outcome{}, ctx.Err()
				}
			}
			return tool.Outcome{Result: model.ToolResult{Content: jsonString("result " + inv.Call.ID)}}, nil
		})(cfg)
		fs = &leaseFaultStore{Store: cfg.Store}
		cfg.Store = fs
		cfg.LeaseRenewEvery = 20 * time.Millisecond
		cfg.ExpiredRunsFunc = func(ctx context.Context) ([]*rtstore.RunRow, error) {
			return fs.RunListByStatus(ctx, hxruntime.StatusRunning)
		}
	}, batchAgent("par", true))
	t.Cleanup(func() { close(stop) }) // runs before the runtime stops
	ctx := context.Background()
	sess, run := startRecorded(t, tb, "par")
	require.Eventually(t, func() bool { return calls[0].Load() == 1 && calls[1].Load() == 1 && calls[2].Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	close(release["a"])
	close(release["b"])
	returned := func() int { return kindCounts(t, tb, run.RunID)[journal.KindToolReturned] }
	require.Eventually(t, func() bool { return returned() == 2 }, 10*time.Second, 5*time.Millisecond)

	fs.fail(fmt.Errorf("renew: %w", rtstore.ErrLeaseLost))
	driverGone(t, tb, sess.ID)
	fs.fail(nil)
	tb.rt.StartReaper(ctx, 20*time.Millisecond)
	res := waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, []int64{1, 1, 2}, []int64{calls[0].Load(), calls[1].Load(), calls[2].Load()},
		"only the call whose result was never committed runs again")
	require.Equal(t, 3, returned())
}

// TestConcurrentBatchCancelled: cancelling the session while a parallel
// batch runs interrupts every call; the run ends cancelled with one
// tool.interrupted record per call in flight.
func TestConcurrentBatchCancelled(t *testing.T) {
	t.Parallel()
	var inFlight atomic.Int64
	tb := setupCfg(t, withMeet(func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
		inFlight.Add(1)
		<-ctx.Done()
		return tool.Outcome{}, ctx.Err()
	}), batchAgent("par", true))
	ctx := context.Background()
	sess, run := startRecorded(t, tb, "par")
	require.Eventually(t, func() bool { return inFlight.Load() == 3 }, 10*time.Second, 5*time.Millisecond)
	_, err := tb.rt.Cancel(ctx, sess.ID)
	require.NoError(t, err)
	res := waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCancelled, res.Status)
	require.Equal(t, 3, kindCounts(t, tb, run.RunID)[journal.KindToolInterrupted])
}
