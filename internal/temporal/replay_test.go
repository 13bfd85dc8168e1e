package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"hxd/internal/agent"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

const replayDir = "testdata/replay"

// TestReplayHistories replays every committed history with today's
// workflow code: good histories (recorded before and after the
// PatchFinalPublish marker existed) must replay with their original
// command sequence; bad-*.json histories must fail with a nondeterminism
// error.
func TestReplayHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(replayDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var good, bad int
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			RegisterWorkflow(r)
			err := r.ReplayWorkflowHistoryFromJSONFile(quietLogger(t), f)
			if strings.HasPrefix(name, "bad-") {
				bad++
				if err == nil {
					t.Fatal("replay of a history with a different command sequence succeeded")
				}
				if !strings.Contains(strings.ToLower(err.Error()), "nondeterministic") {
					t.Fatalf("replay failed, but not with nondeterminism: %v", err)
				}
				return
			}
			good++
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
		})
	}
	if good < 2 || bad < 1 {
		t.Fatalf("found %d good and %d bad histories in %s; want the pre-patch and the current history and a bad one", good, bad, replayDir)
	}
}

// TestReplayHistoriesCoverPatch checks what the committed histories are:
// the pre-patch one has no marker and no publish activity, the current
// one has both.
func TestReplayHistoriesCoverPatch(t *testing.T) {
	for file, wantPatch := range map[string]bool{"v0-pre-final-publish.json": false, "v1-final-publish.json": true} {
		c := countHistory(t, file, PatchFinalPublish)
		if c.marker != wantPatch || (c.activities[ActivityPublish] > 0) != wantPatch || c.activities[ActivityTool] == 0 || c.updates < 2 {
			t.Errorf("%s: %+v (want patch=%v)", file, c, wantPatch)
		}
	}
}

// TestReplayHistoriesCoverResolvedSpill checks the histories of a client
// tool resolved with a result over max_result_chars: the one recorded
// before PatchResolvedSpill has no marker and no spill activity, the
// current one has the marker and one spill activity.
func TestReplayHistoriesCoverResolvedSpill(t *testing.T) {
	for file, wantSpills := range map[string]int{"v1-resolved-unspilled.json": 0, "v2-resolved-spill.json": 1} {
		c := countHistory(t, file, PatchResolvedSpill)
		if c.marker != (wantSpills > 0) || c.activities[ActivitySpill] != wantSpills || c.activities[ActivityTool] != 1 || c.updates < 2 {
			t.Errorf("%s: %+v (want %d spill activities)", file, c, wantSpills)
		}
	}
}

// TestReplayHistoriesCoverConcurrentTools checks the histories of a batch
// of two concurrent calls: the one recorded before PatchConcurrentTools
// has no marker and schedules the second tool activity after the first
// completed; the current one has the marker and schedules both before
// either completes.
func TestReplayHistoriesCoverConcurrentTools(t *testing.T) {
	for file, wantParallel := range map[string]bool{"v2-sequential-batch.json": false, "v3-concurrent-tools.json": true} {
		c := countHistory(t, file, PatchConcurrentTools)
		scheduled := map[int64]bool{} // tool activities by scheduled event id
		toolsBeforeCompletion := 0    // tool activities scheduled before the first one completed
		completed := false
		for _, e := range readHistory(t, file).Events {
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == ActivityTool {
				scheduled[e.GetEventId()] = true
				if !completed {
					toolsBeforeCompletion++
				}
			}
			if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] {
				completed = true
			}
		}
		parallel := toolsBeforeCompletion == 2
		if c.marker != wantParallel || parallel != wantParallel || c.activities[ActivityTool] != 2 || c.updates < 1 {
			t.Errorf("%s: %+v, %d tool activities before the first completed (want parallel=%v)", file, c, toolsBeforeCompletion, wantParallel)
		}
	}
}

// TestReplayHistoriesCoverRawBeforeSpill checks the histories of a safe
// tool whose spill store fails once in the tool activity: the one recorded
// before PatchRawBeforeSpill has no marker and no spill activity (the tool
// activity was retried, calling the tool again); the current one has the
// marker and one spill activity.
func TestReplayHistoriesCoverRawBeforeSpill(t *testing.T) {
	for file, wantSpills := range map[string]int{"v4-spill-retried.json": 0, "v5-spill-after-raw.json": 1} {
		c := countHistory(t, file, PatchRawBeforeSpill)
		toolAttempts := 0
		for _, e := range readHistory(t, file).Events {
			if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
				toolAttempts = max(toolAttempts, int(a.GetAttempt()))
			}
		}
		if c.marker != (wantSpills > 0) || c.activities[ActivitySpill] != wantSpills || c.activities[ActivityTool] != 1 || toolAttempts != 2-wantSpills {
			t.Errorf("%s: %+v, %d attempts at most (want %d spill activities)", file, c, toolAttempts, wantSpills)
		}
	}
}

// TestReplayHistoriesCoverToolAttempts checks the histories of a run
// resumed after its tool activity failed on all three attempts: the one
// recorded before PatchToolAttempts has no marker and calls the tool again
// as entry attempt 2, a repeat; the current one has the marker and calls
// it as attempt 4.
func TestReplayHistoriesCoverToolAttempts(t *testing.T) {
	for file, want := range map[string][]int{"v5-attempts-repeated.json": {1, 2}, "v6-attempts-grow.json": {1, 4}} {
		c := countHistory(t, file, PatchToolAttempts)
		var got []int
		for _, e := range readHistory(t, file).Events {
			a := e.GetActivityTaskScheduledEventAttributes()
			if a == nil || a.GetActivityType().GetName() != ActivityTool {
				continue
			}
			var in ToolInput
			if err := json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in); err != nil {
				t.Fatal(err)
			}
			got = append(got, in.Entry.Attempt)
		}
		if c.marker != (want[1] == 4) || !slices.Equal(got, want) || c.updates < 2 {
			t.Errorf("%s: %+v, tool activities from entry attempts %v (want %v)", file, c, got, want)
		}
	}
}

// TestReplayHistoriesCoverToolCancel checks the histories of a run
// cancelled while a manual tool is in flight that returns its result on
// the cancel: the one recorded before PatchToolWaitCancel has neither
// marker and stops (schedules its final publish) before the tool activity
// completes; the current one has both markers and schedules the publish
// only after the tool activity completed (its result is kept). Neither
// starts the batch's second tool.
func TestReplayHistoriesCoverToolCancel(t *testing.T) {
	for file, wantWait := range map[string]bool{"v3-cancel-dropped.json": false, "v4-cancel-kept.json": true} {
		c := countHistory(t, file, PatchToolWaitCancel)
		interrupt := countHistory(t, file, PatchNoCallAfterInterrupt)
		var toolID int64
		waited, cancelling := false, false // cancelling: cancel requested, the tool's outcome not in yet
		for _, e := range readHistory(t, file).Events {
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
				switch a.GetActivityType().GetName() {
				case ActivityTool:
					toolID = e.GetEventId()
				case ActivityPublish:
					waited = !cancelling
				}
			}
			if e.GetActivityTaskCancelRequestedEventAttributes() != nil {
				cancelling = true
			}
			if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && a.GetScheduledEventId() == toolID {
				cancelling = false
			}
		}
		if c.marker != wantWait || interrupt.marker != wantWait || waited != wantWait || c.activities[ActivityTool] != 1 || c.updates < 2 {
			t.Errorf("%s: %+v, marker %v of %s, publish after the tool's outcome %v (want %v)", file, c, interrupt.marker, PatchNoCallAfterInterrupt, waited, wantWait)
		}
	}
}

// historyCounts is what a committed history holds.
type historyCounts struct {
	marker     bool           // a marker of the patch asked about
	activities map[string]int // scheduled activities by type
	updates    int            // accepted updates
}

func countHistory(t *testing.T, file, patch string) historyCounts {
	t.Helper()
	c := historyCounts{activities: map[string]int{}}
	for _, e := range readHistory(t, file).Events {
		switch e.EventType {
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			c.marker = c.marker || strings.Contains(e.String(), patch)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			c.activities[e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()]++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			c.updates++
		}
	}
	return c
}

func readHistory(t *testing.T, file string) *historypb.History {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(replayDir, file))
	if err != nil {
		t.Fatal(err)
	}
	var hist historypb.History
	if err := (temporalproto.CustomJSONUnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, &hist); err != nil {
		t.Fatal(err)
	}
	return &hist
}

// replayAgent is the agent of the recorded histories: an approval, a tool
// call and a final answer.
func replayAgent() *agent.Definition {
	return &agent.Definition{
		Name: "replay", Version: "v1", SystemPrompt: "replay",
		Model: model.Config{Provider: model.ProviderScripted, Script: []model.ScriptStep{
			{Text: "checking", ToolCalls: []model.ToolCall{{ID: "c1", Name: "echo", Input: json.RawMessage(`{"text":"hi"}`)}}},
			{Text: "done"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "echo", Kind: tool.KindBuiltin, ReplayPolicy: tool.PolicySafe, Permission: tool.PermissionAsk}}},
	}
}

// replayConcurrentAgent is the agent of the concurrent-tools histories:
// two calls of a concurrent tool in one response, then a final answer.
func replayConcurrentAgent() *agent.Definition {
	return &agent.Definition{
		Name: "replay-concurrent", Version: "v1", SystemPrompt: "replay",
		Model: model.Config{Provider: model.ProviderScripted, Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{
				{ID: "c1", Name: "echo", Input: json.RawMessage(`{"text":"one"}`)},
				{ID: "c2", Name: "echo", Input: json.RawMessage(`{"text":"two"}`)},
			}},
			{Text: "done"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "echo", Kind: tool.KindBuiltin, ReplayPolicy: tool.PolicySafe, Concurrent: true}}},
	}
}

// replayClientAgent is the agent of the resolved-spill histories: a client
// tool whose result the caller supplies (over max_result_chars), then a
// final answer.
func replayClientAgent() *agent.Definition {
	def := clientAgent()
	def.Name = "replay-client"
	return def
}

// replaySpillAgent is the agent of the raw-before-spill histories: a safe
// tool whose result (after result middleware) is over max_result_chars,
// then a final answer.
func replaySpillAgent() *agent.Definition {
	def := scriptedAgent("replay-spill", []agent.ToolDef{customTool("big", tool.PolicySafe)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "big", `{}`)}},
		model.ScriptStep{Text: "done"},
	)
	def.Tools[0].ResultMiddleware = []agent.Middleware{{AppendText: strp(" (mw)")}}
	def.MaxResultChars = maxChars
	return def
}

// replayLostAgent is the agent of the attempts histories: a safe tool of
// three quick attempts whose activity fails on each until the recorder
// lets it succeed, then a final answer.
func replayLostAgent() *agent.Definition {
	td := customTool("lost", tool.PolicySafe)
	td.Retry = &tool.Retry{Attempts: 3, BackoffSeconds: 0.1, MaxBackoffSeconds: 0.1}
	return scriptedAgent("replay-lost", []agent.ToolDef{td},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "lost", `{}`)}},
		model.ScriptStep{Text: "done"},
	)
}

// putFailStore is an ArtifactStore whose next fails stores fail.
type putFailStore struct {
	ArtifactStore
	fails atomic.Int32
}

func (s *putFailStore) PutOwned(ctx context.Context, owner string, data []byte) (string, error) {
	if s.fails.Add(-1) >= 0 {
		return "", errors.New("store down")
	}
	return s.ArtifactStore.PutOwned(ctx, owner, data)
}

// TestRecordReplayHistories records the committed histories against a real
// Temporal server (the dev server of scripts/build-temporal.sh):
//
//	HXD_RECORD_REPLAY=127.0.0.1:7233 go test ./internal/temporal/ -run TestRecordReplayHistories
//
// v0-pre-final-publish.json runs the workflow as it was before
// PatchFinalPublish (legacyWorkflow), v1-final-publish.json as it is now;
// bad-activity-type.json is v1 with its tool activity renamed, a command
// sequence today's code does not produce. v1-resolved-unspilled.json runs
// a client tool resolved with a long result as before PatchResolvedSpill
// (legacyResolvedSpill), v2-resolved-spill.json as it is now (with an
// artifact store: a versitygw of s3test). v2-sequential-batch.json runs
// two calls of a concurrent tool as before PatchConcurrentTools
// (legacyConcurrentTools), v3-concurrent-tools.json as it is now.
// v3-cancel-dropped.json cancels a run while a manual tool is in flight
// that returns its result on the cancel, as before PatchToolWaitCancel and
// PatchNoCallAfterInterrupt (legacyToolWaitCancel, legacyCallAfterInterrupt),
// v4-cancel-kept.json as it is now. v4-spill-retried.json runs a safe tool
// whose spill store fails once in the tool activity, as before
// PatchRawBeforeSpill (legacyRawBeforeSpill: the activity is retried),
// v5-spill-after-raw.json as it is now (a spill activity stores it).
// v5-attempts-repeated.json resumes a run whose safe tool's activity failed
// on all three attempts, as before PatchToolAttempts (legacyToolAttempts:
// the resumed call is attempt 2), v6-attempts-grow.json as it is now
// (attempt 4). Record
// one group with
// -run 'TestRecordReplayHistories/(publish|resolved|concurrent|cancel|rawspill|attempts)'.
func TestRecordReplayHistories(t *testing.T) {
	addr := os.Getenv("HXD_RECORD_REPLAY")
	if addr == "" {
		t.Skip("HXD_RECORD_REPLAY (a Temporal server address) not set")
	}
	c, err := client.Dial(client.Options{HostPort: addr, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cancelDef, builtins, started, _ := lateAgent()
	cancelDef.Name = "replay-cancel"
	spillDef := replaySpillAgent()
	builtins["big"] = func(_ context.Context, inv tool.Invocation) (tool.Outcome, error) {
		return tool.Outcome{Result: model.ToolResult{ToolCallID: inv.Call.ID, Content: tool.TextContent(bigText)}}, nil
	}
	lostDef := replayLostAgent()
	var found atomic.Bool // the "lost" tool's activity fails until found
	builtins["lost"] = func(_ context.Context, inv tool.Invocation) (tool.Outcome, error) {
		if !found.Load() {
			panic("worker lost") // an activity failure without an outcome, like a lost worker's
		}
		return tool.Outcome{Result: model.ToolResult{ToolCallID: inv.Call.ID, Content: tool.TextContent("found")}}, nil
	}
	reg := agent.NewRegistry(builtinNames(builtins)...)
	for _, d := range []*agent.Definition{replayAgent(), replayClientAgent(), replayConcurrentAgent(), cancelDef, spillDef, lostDef} {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	def, _ := reg.Get(agent.Ref{Name: "replay", Version: "v1"})
	clientDef, _ := reg.Get(agent.Ref{Name: "replay-client", Version: "v1"})
	concurrentDef, _ := reg.Get(agent.Ref{Name: "replay-concurrent", Version: "v1"})
	cancelDef, _ = reg.Get(cancelDef.Ref())
	spillDef, _ = reg.Get(spillDef.Ref())
	lostDef, _ = reg.Get(lostDef.Ref())
	taskQueue := "replay-record-" + time.Now().Format("150405")
	store := &putFailStore{ArtifactStore: newTestStore(t)}
	w := NewWorker(c, taskQueue, WorkerDeps{
		Agents: reg, Artifacts: store, ToolOptions: tool.Options{Builtins: builtins}, HeartbeatEvery: 200 * time.Millisecond,
	})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := os.MkdirAll(replayDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("attempts", func(t *testing.T) {
		recordPair(t, &legacyToolAttempts, "v5-attempts-repeated.json", "v6-attempts-grow.json", func(id string) *historypb.History {
			found.Store(false)
			return recordLostSession(t, c, taskQueue, lostDef, id, &found)
		})
	})
	t.Run("rawspill", func(t *testing.T) {
		recordPair(t, &legacyRawBeforeSpill, "v4-spill-retried.json", "v5-spill-after-raw.json", func(id string) *historypb.History {
			store.fails.Store(1) // the tool activity's spill store fails once
			return recordRun(t, c, taskQueue, spillDef, id, nil)
		})
	})
	t.Run("cancel", func(t *testing.T) {
		for _, f := range []string{"v3-cancel-dropped.json", "v4-cancel-kept.json"} {
			legacy := f == "v3-cancel-dropped.json"
			legacyToolWaitCancel, legacyCallAfterInterrupt = legacy, legacy
			hist := recordCancelSession(t, c, taskQueue, cancelDef, "replay-"+strings.TrimSuffix(f, ".json")+"-"+time.Now().Format("150405"), started)
			legacyToolWaitCancel, legacyCallAfterInterrupt = false, false
			writeHistory(t, f, hist)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		recordPair(t, &legacyConcurrentTools, "v2-sequential-batch.json", "v3-concurrent-tools.json", func(id string) *historypb.History {
			return recordRun(t, c, taskQueue, concurrentDef, id, nil)
		})
	})
	t.Run("resolved", func(t *testing.T) {
		recordPair(t, &legacyResolvedSpill, "v1-resolved-unspilled.json", "v2-resolved-spill.json", func(id string) *historypb.History {
			return recordClientSession(t, c, taskQueue, clientDef, id)
		})
	})
	t.Run("publish", func(t *testing.T) {
		hist := recordPair(t, &legacyWorkflow, "v0-pre-final-publish.json", "v1-final-publish.json", func(id string) *historypb.History {
			return recordSession(t, c, taskQueue, def, id)
		})
		renamed := false
		for _, e := range hist.Events {
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.ActivityType.GetName() == ActivityTool && !renamed {
				a.ActivityType.Name = ActivityModel
				renamed = true
			}
		}
		writeHistory(t, "bad-activity-type.json", hist)
	})
}

// recordPair records a session with *legacy set (the pre-patch history,
// written to preFile), then as the code is now (written to file, and
// returned).
func recordPair(t *testing.T, legacy *bool, preFile, file string, record func(sessionID string) *historypb.History) *historypb.History {
	t.Helper()
	var hist *historypb.History
	for _, f := range []string{preFile, file} {
		*legacy = f == preFile
		hist = record("replay-" + strings.TrimSuffix(f, ".json") + "-" + time.Now().Format("150405"))
		*legacy = false
		writeHistory(t, f, hist)
	}
	return hist
}

func recordSession(t *testing.T, c client.Client, taskQueue string, def *agent.Definition, sessionID string) *historypb.History {
	t.Helper()
	allow := true
	return recordRun(t, c, taskQueue, def, sessionID, &ResolveRequest{Key: "run-1:1:c1", Allow: &allow, Resume: true})
}

// recordClientSession resolves the client tool with a result over
// max_result_chars.
func recordClientSession(t *testing.T, c client.Client, taskQueue string, def *agent.Definition, sessionID string) *historypb.History {
	t.Helper()
	res := &model.ToolResult{ToolCallID: "c1", Content: tool.TextContent(bigText)}
	return recordRun(t, c, taskQueue, def, sessionID, &ResolveRequest{Key: "run-1:1:c1", Result: res, Resume: true})
}

// recordRun submits run-1, waits for it to await input, sends resolve
// (when set) and returns the history once the run completed.
func recordRun(t *testing.T, c client.Client, taskQueue string, def *agent.Definition, sessionID string, resolve *ResolveRequest) *historypb.History {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := NewSessionInput(sessionID, def, "alice", nil, time.Now(), RuntimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.ExecuteWorkflow(ctx, StartWorkflowOptions(sessionID, taskQueue), WorkflowType, in)
	if err != nil {
		t.Fatal(err)
	}
	update := func(name, id string, arg, out any) {
		t.Helper()
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: run.GetID(), UpdateID: id, UpdateName: name, Args: []any{arg},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := h.Get(ctx, out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var sr SubmitResult
	update(UpdateSubmit, "req-1", SubmitRequest{Message: json.RawMessage(`"hello"`), RequestID: "req-1", RunID: "run-1"}, &sr)
	if resolve == nil {
		waitStatus(ctx, t, c, run.GetID(), "run-1", runtime.StatusCompleted)
	} else {
		waitStatus(ctx, t, c, run.GetID(), "run-1", runtime.StatusAwaitingInput)
		var rr ResolveResult
		update(UpdateResolve, "res-1", *resolve, &rr)
		if rr.Run.Status != runtime.StatusCompleted {
			t.Fatalf("run = %+v", rr.Run)
		}
	}
	return historyOf(ctx, t, c, run)
}

// recordLostSession submits run-1 of the replayLostAgent, waits for it to
// fail (every tool attempt lost), sets found and resumes the run; it
// returns the history once the run completed.
func recordLostSession(t *testing.T, c client.Client, taskQueue string, def *agent.Definition, sessionID string, found *atomic.Bool) *historypb.History {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sw := &serverWorker{c: c, taskQueue: taskQueue}
	run := sw.start(ctx, t, def, sessionID)
	waitStatus(ctx, t, c, run.GetID(), "run-1", runtime.StatusFailed)
	found.Store(true)
	var cr ControlResult
	sw.update(ctx, t, run.GetID(), UpdateControl, "ctl-1", ControlRequest{Action: ActionResume}, &cr)
	waitStatus(ctx, t, c, run.GetID(), "run-1", runtime.StatusCompleted)
	return historyOf(ctx, t, c, run)
}

// recordCancelSession submits run-1 of the lateAgent, cancels it once the
// late tool was called and returns the history once the run is cancelled.
func recordCancelSession(t *testing.T, c client.Client, taskQueue string, def *agent.Definition, sessionID string, started <-chan struct{}) *historypb.History {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sw := &serverWorker{c: c, taskQueue: taskQueue}
	run := sw.cancelOnceCalled(ctx, t, def, sessionID, started)
	return historyOf(ctx, t, c, run)
}

// historyOf cancels the session workflow once its final publish finished
// and returns its history.
func historyOf(ctx context.Context, t *testing.T, c client.Client, run client.WorkflowRun) *historypb.History {
	t.Helper()
	time.Sleep(500 * time.Millisecond) // let the final publish finish
	if err := c.CancelWorkflow(ctx, run.GetID(), ""); err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err == nil {
		t.Fatal("workflow ended without the cancellation")
	}
	var hist historypb.History
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		hist.Events = append(hist.Events, e)
	}
	return &hist
}

func waitStatus(ctx context.Context, t *testing.T, c client.Client, wfID, runID string, want runtime.RunStatus) {
	t.Helper()
	for {
		v, err := c.QueryWorkflow(ctx, wfID, "", QueryGetRun, runID)
		if err != nil {
			t.Fatal(err)
		}
		var r runtime.RunResult
		if err := v.Get(&r); err != nil {
			t.Fatal(err)
		}
		if r.Status == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s is %s, want %s", runID, r.Status, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func writeHistory(t *testing.T, file string, hist *historypb.History) {
	t.Helper()
	raw, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(replayDir, file), append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
