package temporal

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"hxd/internal/agent"
	"hxd/internal/hxtest"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// Tests against a real Temporal dev server (hxtest.StartTemporal), for
// what the SDK test environment does not model (it settles a cancelled
// activity at once, whatever its WaitForCancellation). They need
// HXD_TEST_TEMPORAL=1, as cmd/hxd's end-to-end tests do.

// serverWorker is a dev server, a client and a worker of the session
// workflow with deps on one task queue.
type serverWorker struct {
	c         client.Client
	taskQueue string
}

func startServerWorker(t *testing.T, deps WorkerDeps) *serverWorker {
	t.Helper()
	if os.Getenv("HXD_TEST_TEMPORAL") != "1" {
		t.Skip("Temporal server tests: set HXD_TEST_TEMPORAL=1")
	}
	srv := hxtest.StartTemporal(t, hxtest.TemporalOptions{})
	c, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: srv.Namespace, Logger: quietLogger(t)})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	sw := &serverWorker{c: c, taskQueue: "test-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	w := NewWorker(c, sw.taskQueue, deps)
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return sw
}

// start starts the session workflow of def and submits run-1.
func (sw *serverWorker) start(ctx context.Context, t *testing.T, def *agent.Definition, sessionID string) client.WorkflowRun {
	t.Helper()
	in, err := NewSessionInput(sessionID, def, "alice", nil, time.Now(), RuntimeConfig{})
	require.NoError(t, err)
	run, err := sw.c.ExecuteWorkflow(ctx, StartWorkflowOptions(sessionID, sw.taskQueue), WorkflowType, in)
	require.NoError(t, err)
	var sr SubmitResult
	sw.update(ctx, t, run.GetID(), UpdateSubmit, "req-1", SubmitRequest{Message: json.RawMessage(`"go"`), RequestID: "req-1", RunID: "run-1"}, &sr)
	return run
}

func (sw *serverWorker) update(ctx context.Context, t *testing.T, wfID, name, id string, arg, out any) {
	t.Helper()
	h, err := sw.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: wfID, UpdateID: id, UpdateName: name, Args: []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	require.NoError(t, err)
	require.NoError(t, h.Get(ctx, out))
}

// lateAgent calls "late" (returns its result only once its call is
// cancelled) and then "count" in one step; both manual, run in turn.
func lateAgent() (*agent.Definition, map[string]tool.BuiltinFunc, chan struct{}, *atomic.Int32) {
	def := scriptedAgent("late", []agent.ToolDef{customTool("late", tool.PolicyManual), customTool("count", tool.PolicyManual)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("a", "late", `{}`), toolCall("b", "count", `{}`)}},
		model.ScriptStep{Text: "done"},
	)
	started := make(chan struct{}, 10)
	var counted atomic.Int32
	builtins := map[string]tool.BuiltinFunc{
		"late": func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
			started <- struct{}{}
			<-ctx.Done() // returns its result as the cancel arrives
			return tool.Outcome{Result: model.ToolResult{Content: tool.TextContent("late but done")}}, nil
		},
		"count": func(context.Context, tool.Invocation) (tool.Outcome, error) {
			counted.Add(1)
			return tool.Outcome{Result: model.ToolResult{Content: tool.TextContent("counted")}}, nil
		},
	}
	return def, builtins, started, &counted
}

// cancelOnceCalled submits run-1 of def (lateAgent's) on session
// sessionID, cancels it once the late tool was called (started) and
// returns the workflow once the run is cancelled.
func (sw *serverWorker) cancelOnceCalled(ctx context.Context, t *testing.T, def *agent.Definition, sessionID string, started <-chan struct{}) client.WorkflowRun {
	t.Helper()
	run := sw.start(ctx, t, def, sessionID)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the late tool was never called")
	}
	var cr ControlResult
	sw.update(ctx, t, run.GetID(), UpdateControl, "ctl-1", ControlRequest{Action: ActionCancelled}, &cr)
	waitStatus(ctx, t, sw.c, run.GetID(), "run-1", runtime.StatusCancelled)
	return run
}

// cancelDuringLateCall runs def (lateAgent's) on a dev server worker with
// builtins and artifacts (nil: none), cancels the run once the late tool
// has been called, and returns the run once it is cancelled.
func cancelDuringLateCall(ctx context.Context, t *testing.T, def *agent.Definition, builtins map[string]tool.BuiltinFunc, artifacts ArtifactStore, started <-chan struct{}) runtime.RunResult {
	t.Helper()
	reg := agent.NewRegistry(builtinNames(builtins)...)
	require.NoError(t, reg.Register(def))
	registered, _ := reg.Get(def.Ref())
	sw := startServerWorker(t, WorkerDeps{Agents: reg, Artifacts: artifacts, ToolOptions: tool.Options{Builtins: builtins}, HeartbeatEvery: 200 * time.Millisecond})
	run := sw.cancelOnceCalled(ctx, t, registered, "s-"+t.Name(), started)
	v, err := sw.c.QueryWorkflow(ctx, run.GetID(), "", QueryGetRun, "run-1")
	require.NoError(t, err)
	var r runtime.RunResult
	require.NoError(t, v.Get(&r))
	return r
}

// TestServerCancelKeepsReturnedToolResult: a manual tool that returns its
// result as the run is cancelled keeps it (its entry completes, it is not
// left uncertain), no further tool of the batch is called, and the run
// ends cancelled, as the local engine's TestCancelAsAToolReturns.
func TestServerCancelKeepsReturnedToolResult(t *testing.T) {
	def, builtins, started, counted := lateAgent()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := cancelDuringLateCall(ctx, t, def, builtins, nil, started)
	require.Equal(t, "cancelled", *r.StopReason)
	require.Empty(t, r.Pending, "the late tool's result arrived: nothing is uncertain")
	require.Zero(t, counted.Load(), "no tool is called after the cancel")
}

// ctxStore is a memStore that, as a real store's client, fails a store
// whose context is done.
type ctxStore struct{ memStore }

func (s *ctxStore) PutOwned(ctx context.Context, owner string, data []byte) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return s.memStore.PutOwned(ctx, owner, data)
}

// TestServerCancelStoresReturnedArtifacts: the files of a result that
// returned as the run was cancelled are stored although the activity's
// context is cancelled by then, so the result is kept (not left
// uncertain for a failed store).
func TestServerCancelStoresReturnedArtifacts(t *testing.T) {
	def, builtins, started, _ := lateAgent()
	builtins["late"] = func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
		started <- struct{}{}
		<-ctx.Done()
		return tool.Outcome{
			Result:    model.ToolResult{Content: tool.TextContent("late but done")},
			Artifacts: []tool.Artifact{{MediaType: "text/plain", Data: []byte("late file")}},
		}, nil
	}
	store := &ctxStore{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := cancelDuringLateCall(ctx, t, def, builtins, store, started)
	require.Empty(t, r.Pending, "the late tool's result and file arrived: nothing is uncertain")
	_, err := store.GetOwned(ctx, "alice", sha256Hex("late file"))
	require.NoError(t, err, "the file was stored")
}
