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
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/timestamppb"

	"hxd/internal/agent"
	"hxd/internal/runtime"
)

// pollerClient is a fakeClient whose task queue has pollers.
type pollerClient struct {
	*fakeClient

	mu        sync.Mutex
	pollers   []*taskqueuepb.PollerInfo
	err       error    // of DescribeTaskQueue
	describes []string // "<task queue> <type>"
}

func (p *pollerClient) DescribeTaskQueue(_ context.Context, tq string, typ enumspb.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.describes = append(p.describes, tq+" "+enumspb.TaskQueueType_name[int32(typ)])
	if p.err != nil {
		return nil, p.err
	}
	return &workflowservice.DescribeTaskQueueResponse{Pollers: p.pollers}, nil
}

func (p *pollerClient) set(pollers []*taskqueuepb.PollerInfo, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pollers, p.err = pollers, err
}

func (p *pollerClient) describeCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.describes)
}

func (f *fakeClient) setQuery(q func(wid, queryType string, args []any) (any, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.query = q
}

func (f *fakeClient) calls() (queries, updates int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queries), len(f.updates)
}

func poller(at time.Time) *taskqueuepb.PollerInfo {
	return &taskqueuepb.PollerInfo{Identity: "worker@host", LastAccessTime: timestamppb.New(at)}
}

// TestEngineNoWorker (issue 18, item 10): a query that no worker takes
// comes back as a FailedPrecondition; the engine answers
// runtime.ErrNoWorker with a client-safe detail (503 unavailable), then
// answers it at once while the task queue lists no poller that polled
// since, and goes back to querying once one did.
func TestEngineNoWorker(t *testing.T) {
	t.Parallel()
	reg := agent.NewRegistry()
	def, err := agent.Load(strings.NewReader(testAgent), "tester.yaml")
	require.NoError(t, err)
	require.NoError(t, reg.Register(def))
	fc := &fakeClient{query: sessionQuery, update: func(o client.UpdateWorkflowOptions) (any, error) {
		req := o.Args[0].(SubmitRequest)
		return SubmitResult{Run: runtime.RunResult{SessionID: "s1", RunID: req.RunID, Status: runtime.StatusRunning}}, nil
	}}
	pc := &pollerClient{fakeClient: fc}
	n := 0
	eng, err := NewEngine(EngineConfig{Client: pc, Agents: reg, Index: &MemoryRunIndex{}, TaskQueue: "tq",
		NewID: func() string { n++; return "id-" + strconv.Itoa(n) }})
	require.NoError(t, err)
	ctx := as("alice")
	require.NoError(t, eng.cfg.Index.Record(ctx, "r1", s1Key))
	_, err = eng.GetRun(ctx, "r1")
	require.NoError(t, err, "a worker answers")

	requireNoWorker := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, runtime.ErrNoWorker)
		var pe *runtime.PublicError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, errNoWorker.Detail, pe.Detail)
		require.Contains(t, err.Error(), "task queue tq", "the log says which queue")
	}

	// Matching's answer to a query nobody polled for.
	noPoller := serviceerror.NewFailedPrecondition("no poller seen for task queue recently, worker may be down")
	fc.setQuery(func(string, string, []any) (any, error) { return nil, noPoller })
	_, err = eng.GetRun(ctx, "r1")
	requireNoWorker(err)
	require.ErrorIs(t, err, noPoller, "the server's answer stays in the chain for the log")
	require.Zero(t, pc.describeCalls(), "no DescribeTaskQueue before a query found no worker")
	lost := time.Now()

	// Only the poller the server already gave up on is listed: queries
	// and updates answer at once, without reaching the workflow.
	pc.set([]*taskqueuepb.PollerInfo{poller(lost.Add(-30 * time.Second))}, nil)
	queries, updates := fc.calls()
	_, err = eng.GetRun(ctx, "r1")
	requireNoWorker(err)
	_, _, err = eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"go"`)})
	requireNoWorker(err)
	q2, u2 := fc.calls()
	require.Equal(t, queries, q2, "no query sent")
	require.Equal(t, updates, u2, "no update sent")
	require.Equal(t, []string{"tq TASK_QUEUE_TYPE_WORKFLOW", "tq TASK_QUEUE_TYPE_WORKFLOW"}, pc.describes)

	// The pollers cannot be listed: the query itself is sent (and says
	// what is wrong).
	pc.set(nil, serviceerror.NewUnavailable("frontend down"))
	_, err = eng.GetRun(ctx, "r1")
	requireNoWorker(err)
	q3, _ := fc.calls()
	require.Equal(t, q2+1, q3)

	// A worker polls again: the query is sent and answered; once it was,
	// the pollers are no longer listed first.
	pc.set([]*taskqueuepb.PollerInfo{poller(lost.Add(-30 * time.Second)), poller(time.Now())}, nil)
	fc.setQuery(sessionQuery)
	run, err := eng.GetRun(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, "r1", run.RunID)
	describes := pc.describeCalls()
	_, err = eng.GetRun(ctx, "r1")
	require.NoError(t, err)
	_, created, err := eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"go"`)})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, describes, pc.describeCalls())

	// Any other query failure keeps its own meaning.
	fc.setQuery(func(string, string, []any) (any, error) { return nil, serviceerror.NewUnavailable("down") })
	_, err = eng.GetRun(ctx, "r1")
	require.ErrorIs(t, err, runtime.ErrUnavailable)
	require.False(t, errors.Is(err, runtime.ErrNoWorker))
}

// TestEngineTimeoutNoWorker: a query or update that runs out of time
// (Temporal buffers a query while a workflow task is pending, and never
// answers FailedPrecondition then) is runtime.ErrNoWorker when no poller
// of the task queue polled within pollerSilence, and stays
// runtime.ErrUnavailable otherwise.
func TestEngineTimeoutNoWorker(t *testing.T) {
	t.Parallel()
	now := time.Now()
	timeout := serviceerror.NewDeadlineExceeded("context deadline exceeded")
	cases := []struct {
		name     string
		pollers  []*taskqueuepb.PollerInfo
		err      error // of DescribeTaskQueue
		noWorker bool
	}{
		{"no poller listed", nil, nil, true},
		{"the pollers are silent", []*taskqueuepb.PollerInfo{poller(now.Add(-2 * time.Minute)), poller(now.Add(-90 * time.Second))}, nil, true},
		{"a poller polled a minute ago", []*taskqueuepb.PollerInfo{poller(now.Add(-2 * time.Minute)), poller(now.Add(-time.Minute))}, nil, false},
		{"the pollers cannot be listed", nil, serviceerror.NewUnavailable("down"), false},
	}
	t.Run("an update times out with silent pollers", func(t *testing.T) {
		t.Parallel()
		reg := agent.NewRegistry()
		def, err := agent.Load(strings.NewReader(testAgent), "tester.yaml")
		require.NoError(t, err)
		require.NoError(t, reg.Register(def))
		pc := &updateTimeoutClient{pollerClient: pollerClient{fakeClient: &fakeClient{query: sessionQuery}}, err: timeout}
		pc.set([]*taskqueuepb.PollerInfo{poller(now.Add(-5 * time.Minute))}, nil)
		eng, err := NewEngine(EngineConfig{Client: pc, Agents: reg, Index: &MemoryRunIndex{}, TaskQueue: "tq"})
		require.NoError(t, err)
		ctx := as("alice")
		_, err = eng.GetSession(ctx, "s1")
		require.NoError(t, err)
		_, _, err = eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"go"`)})
		require.ErrorIs(t, err, runtime.ErrNoWorker)
		require.ErrorIs(t, err, runtime.ErrUnavailable)
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := agent.NewRegistry()
			def, err := agent.Load(strings.NewReader(testAgent), "tester.yaml")
			require.NoError(t, err)
			require.NoError(t, reg.Register(def))
			fc := &fakeClient{query: sessionQuery}
			pc := &updateTimeoutClient{pollerClient: pollerClient{fakeClient: fc}, err: timeout}
			pc.set(tc.pollers, tc.err)
			eng, err := NewEngine(EngineConfig{Client: pc, Agents: reg, Index: &MemoryRunIndex{}, TaskQueue: "tq"})
			require.NoError(t, err)
			ctx := as("alice")
			require.NoError(t, eng.cfg.Index.Record(ctx, "r1", s1Key))
			_, err = eng.GetRun(ctx, "r1")
			require.NoError(t, err)
			require.Zero(t, pc.describeCalls(), "no DescribeTaskQueue while calls succeed")

			fc.setQuery(func(string, string, []any) (any, error) { return nil, timeout })
			_, err = eng.GetRun(ctx, "r1")
			require.ErrorIs(t, err, runtime.ErrUnavailable, "a timeout stays unavailable")
			require.Equal(t, tc.noWorker, errors.Is(err, runtime.ErrNoWorker), "query: %v", err)
			if tc.noWorker {
				var pe *runtime.PublicError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, errNoWorker.Detail, pe.Detail)
				return // TestEngineNoWorker covers what follows
			}
			_, _, err = eng.SubmitRun(ctx, runtime.SubmitParams{SessionID: "s1", Message: json.RawMessage(`"go"`)})
			require.ErrorIs(t, err, runtime.ErrUnavailable)
			require.False(t, errors.Is(err, runtime.ErrNoWorker), "update: %v", err)
		})
	}
}

// updateTimeoutClient fails every update as the SDK does when the call's
// deadline passes with no worker to take it.
type updateTimeoutClient struct {
	pollerClient
	err error
}

func (u *updateTimeoutClient) UpdateWorkflow(context.Context, client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	return nil, client.NewWorkflowUpdateServiceTimeoutOrCanceledError(u.err)
}
