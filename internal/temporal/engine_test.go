package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"hxd/internal/agent"
	"hxd/internal/runtime"
	"hxd/internal/temporal/events"
)

// Unit tests of the client side against a fake Temporal client; the
// end-to-end behaviour against a real Temporal server, worker processes,
// Redis and S3 is cmd/hxd/temporal_e2e_test.go.

// fakeClient implements the client.Client methods the engine uses.
type fakeClient struct {
	client.Client // nil: any other method panics

	mu       sync.Mutex
	started  []client.StartWorkflowOptions
	inputs   []SessionInput
	startErr error
	queries  []string // "<workflow id> <query type>"
	updates  []client.UpdateWorkflowOptions
	// query and update answer a call (result or error).
	query  func(wid, queryType string, args []any) (any, error)
	update func(o client.UpdateWorkflowOptions) (any, error)
}

func (f *fakeClient) ExecuteWorkflow(_ context.Context, o client.StartWorkflowOptions, wf any, args ...any) (client.WorkflowRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if wf != WorkflowType || len(args) != 1 {
		return nil, errors.New("unexpected workflow start")
	}
	f.started = append(f.started, o)
	f.inputs = append(f.inputs, args[0].(SessionInput))
	return nil, f.startErr
}

func (f *fakeClient) QueryWorkflow(_ context.Context, wid, _ string, queryType string, args ...any) (converter.EncodedValue, error) {
	f.mu.Lock()
	f.queries = append(f.queries, wid+" "+queryType)
	q := f.query
	f.mu.Unlock()
	v, err := q(wid, queryType, args)
	if err != nil {
		return nil, err
	}
	return jsonValue{v}, nil
}

func (f *fakeClient) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.mu.Lock()
	f.updates = append(f.updates, o)
	u := f.update
	f.mu.Unlock()
	v, err := u(o)
	return fakeHandle{v: v, err: err}, nil
}

type jsonValue struct{ v any }

func (j jsonValue) HasValue() bool { return j.v != nil }
func (j jsonValue) Get(ptr any) error {
	raw, err := json.Marshal(j.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, ptr)
}

type fakeHandle struct {
	v   any
	err error
}

func (fakeHandle) WorkflowID() string { return "" }
func (fakeHandle) RunID() string      { return "" }
func (fakeHandle) UpdateID() string   { return "" }
func (h fakeHandle) Get(_ context.Context, ptr any) error {
	if h.err != nil {
		return h.err
	}
	return jsonValue{h.v}.Get(ptr)
}

// queryFailed is how a query handler's application error reaches the client.
func queryFailed(sentinelType, msg string) error {
	app := temporal.NewNonRetryableApplicationError(msg, sentinelType, nil)
	return serviceerror.NewQueryFailedWithFailure(msg, temporal.GetDefaultFailureConverter().ErrorToFailure(app))
}

// fakeEvents is an EventSource in memory.
type fakeEvents struct {
	evs []runtime.RunEvent
	gap bool
	err error
}

func (f *fakeEvents) Read(_ context.Context, _ string, after events.Cursor, limit int) ([]runtime.RunEvent, events.Cursor, bool, error) {
	if f.err != nil {
		return nil, after, false, f.err
	}
	var out []runtime.RunEvent
	for _, ev := range f.evs {
		c, _ := strconv.ParseInt(ev.Cursor, 10, 64)
		if (f.gap || c > int64(after)) && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, after, f.gap, nil
}

func (f *fakeEvents) Watch(ctx context.Context, _ string, _ events.Cursor, timeout time.Duration) (bool, error) {
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-time.After(timeout):
		return false, nil
	}
}

const testAgent = `name: tester
version: v1
model:
  provider: scripted
  script:
    - text: hello
`

func newTestEngine(t *testing.T, fc *fakeClient, ev EventSource) *Engine {
	t.Helper()
	reg := agent.NewRegistry()
	def, err := agent.Load(strings.NewReader(testAgent), "tester.yaml")
	require.NoError(t, err)
	require.NoError(t, reg.Register(def))
	n := 0
	var mu sync.Mutex
	eng, err := NewEngine(EngineConfig{
		Client: fc, Agents: reg, Index: &MemoryRunIndex{}, Events: ev, PollInterval: 20 * time.Millisecond,
		NewID: func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return "id-" + strconv.Itoa(n)
		},
		Now: func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) },
	})
	require.NoError(t, err)
	return eng
}

// s1Key is the key of alice's session s1.
var s1Key = runtime.SessionKey("alice", "s1")

// sessionQuery answers get_session for alice's s1 (runs r1 r2 r3) and
// get_run for those runs; anything else is HarnessNotFound.
func sessionQuery(wid, queryType string, args []any) (any, error) {
	if wid != WorkflowID(s1Key) {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	switch queryType {
	case QueryGetSession:
		return SessionInfo{SessionID: "s1", Agent: agent.Ref{Name: "tester", Version: "v1"}, Owner: "alice",
			Metadata: json.RawMessage(`{}`), Runs: []string{"r1", "r2", "r3"}, Status: StatusIdle,
			LatestRun: &runtime.RunRef{RunID: "r3", Status: runtime.StatusCompleted}}, nil
	case QueryGetRun:
		id := args[0].(string)
		if id == "r1" || id == "r2" || id == "r3" {
			return runtime.RunResult{SessionID: "s1", RunID: id, Status: runtime.StatusCompleted}, nil
		}
	case QueryGetPending:
		return nil, nil
	}
	return nil, queryFailed(ErrTypeNotFound, "run not found")
}

func as(principal string) context.Context {
	return runtime.WithPrincipal(context.Background(), principal)
}

func TestEngineCreateSession(t *testing.T) {
	t.Parallel()
	ref := agent.Ref{Name: "tester", Version: "v1"}
	yes, no := true, false

	t.Run("starts the session workflow", func(t *testing.T) {
		t.Parallel()
		fc := &fakeClient{}
		eng := newTestEngine(t, fc, nil)
		s, err := eng.CreateSession(as("alice"), runtime.CreateSessionParams{Agent: ref, Recording: &no, SessionID: "s1",
			Metadata: json.RawMessage(`{"k":1}`)})
		require.NoError(t, err)
		require.Equal(t, "s1", s.ID)
		require.False(t, s.Recording)
		require.Nil(t, s.LatestRun)
		require.Len(t, fc.started, 1)
		o := fc.started[0]
		require.Equal(t, "harness-session:"+s1Key, o.ID)
		require.Equal(t, "s1", fc.inputs[0].SessionID, "the workflow keeps the id the caller knows")
		require.Equal(t, DefaultTaskQueue, o.TaskQueue)
		require.Equal(t, enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, o.WorkflowIDReusePolicy)
		require.True(t, o.WorkflowExecutionErrorWhenAlreadyStarted)
		owner, ok := o.TypedSearchAttributes.GetKeyword(ownerKey)
		require.True(t, ok)
		require.Equal(t, ownerHash("alice"), owner)
		in := fc.inputs[0]
		require.Equal(t, "alice", in.Owner)
		require.Equal(t, ref, in.Agent)
		require.JSONEq(t, `{"k":1}`, string(in.Metadata))
		require.NotEmpty(t, in.AgentConfig)
	})
	t.Run("recording is unsupported", func(t *testing.T) {
		t.Parallel()
		fc := &fakeClient{}
		eng := newTestEngine(t, fc, nil)
		_, err := eng.CreateSession(as("alice"), runtime.CreateSessionParams{Agent: ref, Recording: &yes})
		require.ErrorIs(t, err, runtime.ErrRecordingUnsupported)
		require.Empty(t, fc.started)
	})
	t.Run("unknown agent", func(t *testing.T) {
		t.Parallel()
		fc := &fakeClient{}
		eng := newTestEngine(t, fc, nil)
		_, err := eng.CreateSession(as("alice"), runtime.CreateSessionParams{Agent: agent.Ref{Name: "nope", Version: "v1"}})
		require.ErrorIs(t, err, runtime.ErrUnknownAgent)
		require.Empty(t, fc.started)
	})
	t.Run("duplicate session id", func(t *testing.T) {
		t.Parallel()
		fc := &fakeClient{startErr: serviceerror.NewWorkflowExecutionAlreadyStarted("started", "", "")}
		eng := newTestEngine(t, fc, nil)
		_, err := eng.CreateSession(as("alice"), runtime.CreateSessionParams{Agent: ref, SessionID: "s1"})
		require.ErrorIs(t, err, runtime.ErrSessionExists)
	})
	t.Run("server unavailable", func(t *testing.T) {
		t.Parallel()
		fc := &fakeClient{startErr: serviceerror.NewUnavailable("down")}
		eng := newTestEngine(t, fc, nil)
		_, err := eng.CreateSession(as("alice"), runtime.CreateSessionParams{Agent: ref})
		require.ErrorIs(t, err, runtime.ErrUnavailable)
	})
}

// TestEngineSessionIdsPerPrincipal: two principals each create session
// s1: two workflows (one per owner-scoped key) whose data keep "s1"; each
// principal reaches only their own, by the id they know.
func TestEngineSessionIdsPerPrincipal(t *testing.T) {
	t.Parallel()
	ref := agent.Ref{Name: "tester", Version: "v1"}
	keys := map[string]string{"alice": runtime.SessionKey("alice", "s1"), "bob": runtime.SessionKey("bob", "s1")}
	require.NotEqual(t, keys["alice"], keys["bob"])
	fc := &fakeClient{}
	fc.query = func(wid, queryType string, args []any) (any, error) {
		for who, key := range keys {
			if wid != WorkflowID(key) {
				continue
			}
			switch queryType {
			case QueryGetSession:
				return SessionInfo{SessionID: "s1", Agent: ref, Owner: who, Metadata: json.RawMessage(`{"who":"` + who + `"}`),
					Runs: []string{"run-" + who}, Status: StatusIdle}, nil
			case QueryGetRun:
				if args[0] == "run-"+who {
					return runtime.RunResult{SessionID: "s1", RunID: "run-" + who, Status: runtime.StatusCompleted}, nil
				}
			}
			return nil, queryFailed(ErrTypeNotFound, "run not found")
		}
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	fc.update = func(o client.UpdateWorkflowOptions) (any, error) {
		req := o.Args[0].(SubmitRequest)
		return SubmitResult{Run: runtime.RunResult{SessionID: "s1", RunID: req.RunID, Status: runtime.StatusRunning}, Created: true}, nil
	}
	eng := newTestEngine(t, fc, nil)

	for i, who := range []string{"alice", "bob"} {
		s, err := eng.CreateSession(as(who), runtime.CreateSessionParams{Agent: ref, SessionID: "s1"})
		require.NoError(t, err)
		require.Equal(t, "s1", s.ID)
		require.Equal(t, WorkflowID(keys[who]), fc.started[i].ID)
		require.Equal(t, "s1", fc.inputs[i].SessionID)
		require.Equal(t, who, fc.inputs[i].Owner)
	}
	for who, key := range keys {
		ctx := as(who)
		s, err := eng.GetSession(ctx, "s1")
		require.NoError(t, err)
		require.JSONEq(t, `{"who":"`+who+`"}`, string(s.Metadata))
		page, err := eng.ListRuns(ctx, "s1", runtime.ListParams{})
		require.NoError(t, err)
		require.Equal(t, []string{"run-" + who}, runIDs(page.Items))

		run, created, err := eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"hi"`), RequestID: "same"})
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, WorkflowID(key), fc.updates[len(fc.updates)-1].WorkflowID)
		indexed, err := eng.cfg.Index.Lookup(ctx, run.RunID)
		require.NoError(t, err)
		require.Equal(t, key, indexed)
		evs, err := eng.ListEvents(ctx, run.RunID, 0, 10) // no Redis: the gap event
		require.NoError(t, err)
		require.Equal(t, "s1", evs[0].SessionID, "events show the id the caller knows")
	}
	// Neither reaches the other's runs.
	require.NoError(t, eng.cfg.Index.Record(context.Background(), "run-alice", keys["alice"]))
	require.NoError(t, eng.cfg.Index.Record(context.Background(), "run-bob", keys["bob"]))
	_, err := eng.GetRun(as("alice"), "run-bob")
	require.ErrorIs(t, err, runtime.ErrNotFound)
	_, err = eng.GetRun(as("bob"), "run-alice")
	require.ErrorIs(t, err, runtime.ErrNotFound)
	run, err := eng.GetRun(as("bob"), "run-bob")
	require.NoError(t, err)
	require.Equal(t, "s1", run.SessionID)
	// A third principal has no s1.
	_, err = eng.GetSession(as("carol"), "s1")
	require.ErrorIs(t, err, runtime.ErrNotFound)
}

// TestEngineOwnership: every call on another principal's session, run or
// an unknown one is ErrNotFound, and no update is ever sent for it.
func TestEngineOwnership(t *testing.T) {
	t.Parallel()
	fc := &fakeClient{query: sessionQuery, update: func(client.UpdateWorkflowOptions) (any, error) {
		return nil, errors.New("no update expected")
	}}
	eng := newTestEngine(t, fc, &fakeEvents{})
	require.NoError(t, eng.cfg.Index.Record(context.Background(), "r1", s1Key))
	require.NoError(t, eng.cfg.Index.Record(context.Background(), "ghost", runtime.SessionKey("alice", "nosuch")))

	for _, who := range []string{"bob", "alice"} {
		ctx := as(who)
		sid := "s1"
		runID := "r1"
		if who == "alice" { // the owner, but of nothing these ids name
			sid, runID = "nosuch", "ghost"
		}
		calls := map[string]func() error{
			"GetSession": func() error { _, err := eng.GetSession(ctx, sid); return err },
			"ListRuns":   func() error { _, err := eng.ListRuns(ctx, sid, runtime.ListParams{}); return err },
			"SubmitRun": func() error {
				_, _, err := eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: sid, Message: json.RawMessage(`"hi"`)})
				return err
			},
			"GetRun":     func() error { _, err := eng.GetRun(ctx, runID); return err },
			"WaitRun":    func() error { _, err := eng.WaitRun(ctx, runID, time.Second); return err },
			"ListEvents": func() error { _, err := eng.ListEvents(ctx, runID, 0, 10); return err },
			"Export":     func() error { return eng.Export(ctx, runID, nil) },
			"Pause":      func() error { _, err := eng.Pause(ctx, sid); return err },
			"Cancel":     func() error { _, err := eng.Cancel(ctx, sid); return err },
			"Resume":     func() error { _, err := eng.Resume(ctx, sid, runtime.ResumeParams{}); return err },
			"Pending":    func() error { _, err := eng.Pending(ctx, sid); return err },
			"Approve": func() error {
				_, err := eng.Approve(ctx, runtime.ApproveParams{SessionID: sid, ExecutionKey: "k", Allow: true})
				return err
			},
			"Resolve": func() error {
				_, err := eng.Resolve(ctx, runtime.ResolveParams{SessionID: sid, ExecutionKey: "k", Abort: true})
				return err
			},
		}
		for name, call := range calls {
			require.ErrorIs(t, call(), runtime.ErrNotFound, "%s as %s", name, who)
		}
		_, err := eng.GetRun(ctx, "never-indexed")
		require.ErrorIs(t, err, runtime.ErrNotFound)
	}
	require.Empty(t, fc.updates)
	_, err := eng.Artifact(as("alice"), "00")
	require.ErrorIs(t, err, runtime.ErrNotFound)
}

func TestEngineRuns(t *testing.T) {
	t.Parallel()
	fc := &fakeClient{query: sessionQuery}
	eng := newTestEngine(t, fc, nil)
	ctx := as("alice")
	for _, id := range []string{"r1", "r2", "r3"} {
		require.NoError(t, eng.cfg.Index.Record(ctx, id, s1Key))
	}

	run, err := eng.GetRun(ctx, "r2")
	require.NoError(t, err)
	require.Equal(t, "r2", run.RunID)
	require.Equal(t, runtime.StatusCompleted, run.Status)

	// A run the index knows but the workflow does not: the query's
	// HarnessNotFound application error maps to ErrNotFound.
	require.NoError(t, eng.cfg.Index.Record(ctx, "r9", s1Key))
	_, err = eng.GetRun(ctx, "r9")
	require.ErrorIs(t, err, runtime.ErrNotFound)

	// WaitRun returns at once for a run that is not running.
	run, err = eng.WaitRun(ctx, "r1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "r1", run.RunID)

	// ListRuns pages oldest first with an offset cursor.
	page, err := eng.ListRuns(ctx, "s1", runtime.ListParams{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"r1", "r2"}, runIDs(page.Items))
	require.Equal(t, "2", page.NextCursor)
	page, err = eng.ListRuns(ctx, "s1", runtime.ListParams{Limit: 2, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []string{"r3"}, runIDs(page.Items))
	require.Empty(t, page.NextCursor)
	for _, bad := range []string{"x", "-1", "4"} {
		_, err = eng.ListRuns(ctx, "s1", runtime.ListParams{Cursor: bad})
		require.ErrorIs(t, err, runtime.ErrInvalidCursor, bad)
	}

	s, err := eng.GetSession(ctx, "s1")
	require.NoError(t, err)
	require.Equal(t, &runtime.RunRef{RunID: "r3", Status: runtime.StatusCompleted}, s.LatestRun)

	pending, err := eng.Pending(ctx, "s1")
	require.NoError(t, err)
	require.NotNil(t, pending)
	require.Empty(t, pending)

	// Export: the caller's run is refused as unsupported, not as missing.
	require.ErrorIs(t, eng.Export(ctx, "r1", nil), runtime.ErrRecordingUnsupported)
}

func runIDs(runs []runtime.RunResult) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.RunID)
	}
	return out
}

func TestEngineSubmitRun(t *testing.T) {
	t.Parallel()
	existing := runtime.RunResult{SessionID: "s1", RunID: "old-run", Status: runtime.StatusCompleted}
	fc := &fakeClient{query: sessionQuery}
	fc.update = func(o client.UpdateWorkflowOptions) (any, error) {
		req := o.Args[0].(SubmitRequest)
		switch req.RequestID {
		case "dup":
			// Temporal's update-ID dedupe: the first outcome, handler not run.
			return SubmitResult{Run: existing}, nil
		case "dup-other-message":
			if o.UpdateID == req.RequestID {
				return SubmitResult{Run: existing}, nil
			}
			// The handler's own request-ID check.
			return nil, temporal.NewNonRetryableApplicationError("Request ID already used with different input", ErrTypeRequestConflict, nil)
		case "busy":
			return nil, temporal.NewNonRetryableApplicationError("session busy", ErrTypeSessionBusy, nil)
		case "conflict":
			return nil, temporal.NewNonRetryableApplicationError("request id reused", ErrTypeRequestConflict, nil)
		}
		return SubmitResult{Run: runtime.RunResult{SessionID: "s1", RunID: req.RunID, Status: runtime.StatusRunning}, Created: true}, nil
	}
	eng := newTestEngine(t, fc, nil)
	ctx := as("alice")

	run, created, err := eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"hi"`), RequestID: "req-1"})
	require.NoError(t, err)
	require.True(t, created)
	u := fc.updates[len(fc.updates)-1]
	require.Equal(t, UpdateSubmit, u.UpdateName)
	require.Equal(t, "req-1", u.UpdateID, "update ID = request ID")
	require.Equal(t, WorkflowID(s1Key), u.WorkflowID)
	require.Equal(t, client.WorkflowUpdateStageCompleted, u.WaitForStage)
	req := u.Args[0].(SubmitRequest)
	require.Equal(t, run.RunID, req.RunID)
	// Indexed before the update: GetRun finds the session.
	key, err := eng.cfg.Index.Lookup(ctx, run.RunID)
	require.NoError(t, err)
	require.Equal(t, s1Key, key)

	// A request id that already started a run: that run, created=false.
	run, created, err = eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"hi"`), RequestID: "dup"})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, "old-run", run.RunID)

	// The second update that checks the message has a fresh ID.
	u = fc.updates[len(fc.updates)-1]
	require.NotEqual(t, "dup", u.UpdateID)
	require.Equal(t, "dup", u.Args[0].(SubmitRequest).RequestID)
	// The same request id with another message: request_id_conflict,
	// although Temporal deduplicated the update itself.
	_, _, err = eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"other"`), RequestID: "dup-other-message"})
	require.ErrorIs(t, err, runtime.ErrRequestConflict)

	// No request id: a fresh one is the update ID.
	_, _, err = eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"hi"`)})
	require.NoError(t, err)
	u = fc.updates[len(fc.updates)-1]
	require.NotEmpty(t, u.UpdateID)
	require.Equal(t, u.UpdateID, u.Args[0].(SubmitRequest).RequestID)

	_, _, err = eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"hi"`), RequestID: "busy"})
	require.ErrorIs(t, err, runtime.ErrSessionBusy)
	_, _, err = eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"x"`), RequestID: "conflict"})
	require.ErrorIs(t, err, runtime.ErrRequestConflict)
	var pe *runtime.PublicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "request id reused", pe.Detail)
}

func TestEngineControlAndResolve(t *testing.T) {
	t.Parallel()
	fc := &fakeClient{query: sessionQuery}
	run := runtime.RunResult{SessionID: "s1", RunID: "r3", Status: runtime.StatusPaused}
	fc.update = func(o client.UpdateWorkflowOptions) (any, error) {
		switch o.UpdateName {
		case UpdateControl:
			switch o.Args[0].(ControlRequest).Action {
			case ActionResume:
				id := "r3"
				return ControlResult{RunID: &id}, nil
			default:
				return ControlResult{Run: &run}, nil
			}
		case UpdateResolve:
			r := o.Args[0].(ResolveRequest)
			if r.Key != "k1" {
				return nil, temporal.NewNonRetryableApplicationError("unknown key", ErrTypeUnknownExecutionKey, nil)
			}
			return ResolveResult{Run: run}, nil
		}
		return nil, errors.New("unexpected update")
	}
	eng := newTestEngine(t, fc, nil)
	ctx := as("alice")

	got, err := eng.Pause(ctx, "s1")
	require.NoError(t, err)
	require.Equal(t, "r3", got.RunID)
	require.Equal(t, ActionPaused, fc.updates[0].Args[0].(ControlRequest).Action)
	_, err = eng.Cancel(ctx, "s1")
	require.NoError(t, err)
	require.Equal(t, ActionCancelled, fc.updates[1].Args[0].(ControlRequest).Action)
	id, err := eng.Resume(ctx, "s1", runtime.ResumeParams{})
	require.NoError(t, err)
	require.Equal(t, "r3", id)
	yes := true
	_, err = eng.Resume(ctx, "s1", runtime.ResumeParams{Recording: &yes})
	require.ErrorIs(t, err, runtime.ErrRecordingMismatch)

	_, err = eng.Approve(ctx, runtime.ApproveParams{SessionID: "s1", ExecutionKey: "k1", Allow: true, Resume: true})
	require.NoError(t, err)
	r := fc.updates[len(fc.updates)-1].Args[0].(ResolveRequest)
	require.Equal(t, ResolveRequest{Key: "k1", Allow: &yes, Resume: true}, r)
	_, err = eng.Resolve(ctx, runtime.ResolveParams{SessionID: "s1", ExecutionKey: "k2", Retry: true})
	require.ErrorIs(t, err, runtime.ErrUnknownExecutionKey)
	// Control and resolve update IDs are fresh per call.
	seen := map[string]bool{}
	for _, u := range fc.updates {
		require.False(t, seen[u.UpdateID])
		seen[u.UpdateID] = true
	}
}

func TestEngineListEvents(t *testing.T) {
	t.Parallel()
	ev := func(cursor int64, typ string) runtime.RunEvent {
		return runtime.RunEvent{Type: typ, RunID: "r1", SessionID: "s1", EventID: "e" + strconv.FormatInt(cursor, 10),
			Cursor: strconv.FormatInt(cursor, 10), Data: json.RawMessage(`{}`)}
	}
	all := []runtime.RunEvent{ev(100, "text_delta"), ev(200, "turn_complete"), ev(300, "run_result")}
	tests := []struct {
		name  string
		src   *fakeEvents
		nilEv bool
		after int64
		want  []string // "<type>@<cursor>"
	}{
		{name: "from the start", src: &fakeEvents{evs: all}, want: []string{"text_delta@100", "turn_complete@200", "run_result@300"}},
		{name: "after a cursor", src: &fakeEvents{evs: all}, after: 100, want: []string{"turn_complete@200", "run_result@300"}},
		{name: "gap restarts from the stream's start", src: &fakeEvents{evs: all[1:], gap: true}, after: 50,
			want: []string{"gap@0", "turn_complete@200", "run_result@300"}},
		{name: "expired stream", src: &fakeEvents{gap: true}, after: 300, want: []string{"gap@0"}},
		{name: "redis down", src: &fakeEvents{err: events.ErrUnavailable}, after: 100, want: []string{"gap@0"}},
		{name: "no redis configured", nilEv: true, want: []string{"gap@0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := &fakeClient{query: sessionQuery}
			var src EventSource = tt.src
			if tt.nilEv {
				src = nil
			}
			eng := newTestEngine(t, fc, src)
			ctx := as("alice")
			require.NoError(t, eng.cfg.Index.Record(ctx, "r1", s1Key))
			got, err := eng.ListEvents(ctx, "r1", tt.after, 10)
			require.NoError(t, err)
			var seen []string
			for _, e := range got {
				seen = append(seen, e.Type+"@"+e.Cursor)
				if e.Type == runtime.EventGap {
					require.JSONEq(t, `{"reason":"event_history_unavailable"}`, string(e.Data))
					require.Equal(t, "s1", e.SessionID)
					require.Equal(t, "r1", e.RunID)
					require.NotEmpty(t, e.EventID)
					require.False(t, e.CreatedAt.IsZero(), "a gap has a created_at")
					require.Equal(t, time.UTC, e.CreatedAt.Location())
				}
			}
			require.Equal(t, tt.want, seen)
		})
	}
	t.Run("negative cursor", func(t *testing.T) {
		t.Parallel()
		eng := newTestEngine(t, &fakeClient{query: sessionQuery}, &fakeEvents{})
		ctx := as("alice")
		require.NoError(t, eng.cfg.Index.Record(ctx, "r1", s1Key))
		_, err := eng.ListEvents(ctx, "r1", -1, 10)
		require.ErrorIs(t, err, runtime.ErrInvalidCursor)
	})
}

// TestEngineWatchRun: without a Redis wake-up the channel closes within
// the poll interval; cancel is safe to call after that.
func TestEngineWatchRun(t *testing.T) {
	t.Parallel()
	eng := newTestEngine(t, &fakeClient{query: sessionQuery}, &fakeEvents{})
	ch, cancel := eng.WatchRun("r1")
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("WatchRun did not fire within the poll interval")
	}
	cancel()
	ch, cancel = eng.WatchRun("r1")
	cancel()
	<-ch
}

func TestEngineCallErr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want error
	}{
		{serviceerror.NewNotFound("no workflow"), runtime.ErrNotFound},
		{serviceerror.NewUnavailable("down"), runtime.ErrUnavailable},
		{context.DeadlineExceeded, runtime.ErrUnavailable},
		{queryFailed(ErrTypeNotFound, "no run"), runtime.ErrNotFound},
		{temporal.NewNonRetryableApplicationError("x", ErrTypeNotAwaitingResolution, nil), runtime.ErrNotAwaitingResolution},
		{temporal.NewNonRetryableApplicationError("x", ErrTypeResolutionInvalid, nil), runtime.ErrResolutionInvalid},
		{temporal.NewNonRetryableApplicationError("x", ErrTypeInvalidMessage, nil), runtime.ErrInvalidMessage},
	}
	for _, tt := range tests {
		require.ErrorIs(t, callErr("op", tt.err), tt.want, "%v", tt.err)
	}
	require.ErrorIs(t, callErr("op", context.Canceled), context.Canceled)
	var app *temporal.ApplicationError
	require.ErrorAs(t, callErr("op", notEligible("busy")), &app, "the retire refusal is kept")
	require.Equal(t, ErrTypeNotEligible, app.Type())
}
