package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"hxd/internal/agent"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// sink captures published events (deduplicated by event ID, as the Redis
// sink does).
type sink struct {
	mu     sync.Mutex
	seen   map[string]bool
	events map[string][]runtime.RunEvent
	fail   bool
}

func newSink() *sink {
	return &sink{seen: map[string]bool{}, events: map[string][]runtime.RunEvent{}}
}

func (s *sink) Publish(_ context.Context, runID string, evs []runtime.RunEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("sink down")
	}
	for _, e := range evs {
		if s.seen[e.EventID] {
			continue
		}
		s.seen[e.EventID] = true
		s.events[runID] = append(s.events[runID], e)
	}
	return nil
}

func (s *sink) types(runID string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events[runID] {
		out = append(out, e.Type)
	}
	return out
}

// harness runs one session workflow in the SDK test environment.
type harness struct {
	t         *testing.T
	suite     testsuite.WorkflowTestSuite
	env       *testsuite.TestWorkflowEnvironment
	sink      *sink
	reg       *agent.Registry
	def       *agent.Definition
	input     SessionInput
	mu        sync.Mutex
	counts    map[string]int
	builtins  map[string]tool.BuiltinFunc
	lastModel ModelInput
	// traces are the trace contexts of the model and tool activities'
	// inputs, in start order ("model:<traceparent>", "tool:<traceparent>").
	traces []string
}

func (h *harness) activityTraces() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.traces)
}

func traceName(tc *TraceContext) string {
	if tc == nil {
		return ""
	}
	return tc.TraceParent
}

func (h *harness) lastModelInput() ModelInput {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastModel
}

type harnessOpts struct {
	builtins map[string]tool.BuiltinFunc
	// workerDef, when set, is what the worker registers instead of def.
	workerDef *agent.Definition
	// mcp, when set, is the worker's MCP manager (WorkerDeps.MCP).
	mcp *mcp.Manager
	// artifacts, when set, is the worker's artifact store.
	artifacts ArtifactStore
}

func newHarness(t *testing.T, def *agent.Definition, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, sink: newSink(), counts: map[string]int{}, builtins: o.builtins}
	h.suite.SetLogger(quietLogger(t))
	h.env = h.suite.NewTestWorkflowEnvironment()
	h.env.SetTestTimeout(30 * time.Second)
	reg := agent.NewRegistry(builtinNames(o.builtins)...)
	if err := reg.Register(def); err != nil {
		t.Fatal(err)
	}
	registered, _ := reg.Get(def.Ref())
	h.def = registered
	h.reg = reg
	workerReg := reg
	if o.workerDef != nil {
		workerReg = agent.NewRegistry(builtinNames(o.builtins)...)
		if err := workerReg.Register(o.workerDef); err != nil {
			t.Fatal(err)
		}
	}
	Register(h.env, WorkerDeps{
		Agents: workerReg, Events: h.sink, ToolOptions: tool.Options{Builtins: o.builtins},
		HeartbeatEvery: time.Second, MCP: o.mcp, Artifacts: o.artifacts,
	})
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.counts[info.ActivityType.Name]++
		if info.ActivityType.Name == ActivityModel {
			var in ModelInput
			if err := args.Get(&in); err == nil {
				h.lastModel = in
				h.traces = append(h.traces, "model:"+traceName(in.Trace))
			}
		}
		if info.ActivityType.Name == ActivityTool {
			var in ToolInput
			if err := args.Get(&in); err == nil {
				h.traces = append(h.traces, "tool:"+traceName(in.Trace))
			}
		}
	})
	in, err := NewSessionInput("s-1", registered, "alice", nil, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), RuntimeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	h.input = in
	return h
}

// quietLogger logs warnings and errors of the SDK to the test log.
func quietLogger(t *testing.T) log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func builtinNames(m map[string]tool.BuiltinFunc) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (h *harness) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[name]
}

// updateResult is the outcome of one update.
type updateResult struct {
	done     bool
	rejected bool
	err      error
	value    any
}

// decode converts the update's result into out.
func (u *updateResult) decode(t *testing.T, out any) {
	t.Helper()
	if !u.done {
		t.Fatal("update did not complete")
	}
	if u.err != nil {
		t.Fatalf("update failed: %v", u.err)
	}
	raw, err := json.Marshal(u.value)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
}

// update sends an update at workflow time `at`.
func (h *harness) update(at time.Duration, name, id string, arg any) *updateResult {
	res := &updateResult{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { res.done, res.rejected, res.err = true, true, err },
			OnComplete: func(v any, err error) {
				res.done, res.err, res.value = true, err, v
			},
		}, arg)
	}, at)
	return res
}

func (h *harness) submit(at time.Duration, requestID, runID, message string) *updateResult {
	msg, _ := json.Marshal(message)
	return h.update(at, UpdateSubmit, requestID, SubmitRequest{Message: msg, RequestID: requestID, RunID: runID})
}

// at runs f at workflow time d.
func (h *harness) at(d time.Duration, f func()) { h.env.RegisterDelayedCallback(f, d) }

// run executes the workflow; it is cancelled at `end` (the workflow only
// ends by continue-as-new).
func (h *harness) run(end time.Duration) {
	h.at(end, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(SessionWorkflow, h.input)
}

func (h *harness) getRun(runID string) runtime.RunResult {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(QueryGetRun, runID)
	if err != nil {
		h.t.Fatalf("get_run %s: %v", runID, err)
	}
	var r runtime.RunResult
	if err := v.Get(&r); err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) getSession() SessionInfo {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(QueryGetSession)
	if err != nil {
		h.t.Fatalf("get_session: %v", err)
	}
	var s SessionInfo
	if err := v.Get(&s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

// Agent definitions used by the tests.

func toolCall(id, name, input string) model.ToolCall {
	return model.ToolCall{ID: id, Name: name, Input: json.RawMessage(input)}
}

func scriptedAgent(name string, tools []agent.ToolDef, script ...model.ScriptStep) *agent.Definition {
	return &agent.Definition{
		Name: name, Version: "v1", SystemPrompt: "test",
		Model: model.Config{Provider: model.ProviderScripted, Script: script},
		Tools: tools,
	}
}

func echoTool(policy, permission string) agent.ToolDef {
	return agent.ToolDef{Config: tool.Config{
		Name: "echo", Description: "echo", Kind: tool.KindBuiltin, ReplayPolicy: policy, Permission: permission,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}}
}

func customTool(name, policy string) agent.ToolDef {
	return agent.ToolDef{Config: tool.Config{Name: name, Description: name, Kind: tool.KindBuiltin, ReplayPolicy: policy}}
}

func strp(s string) *string { return &s }

func assertStatus(t *testing.T, r runtime.RunResult, want runtime.RunStatus) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("run status = %s, want %s (error %+v, pending %+v)", r.Status, want, r.Error, r.Pending)
	}
}
