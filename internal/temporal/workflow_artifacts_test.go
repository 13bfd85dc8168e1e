package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"hxd/internal/agent"
	"hxd/internal/hxtest/s3test"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/temporal/artifacts"
	"hxd/internal/tool"
)

// newTestStore starts a versitygw and returns an artifact store on its bucket.
func newTestStore(t *testing.T) *artifacts.Store {
	t.Helper()
	srv := s3test.StartS3(t)
	store, err := artifacts.NewStore(srv.Client(t), artifacts.Config{Bucket: srv.Bucket})
	require.NoError(t, err)
	return store
}

// newStoreHarness is newHarness with an artifact store in the worker's deps.
func newStoreHarness(t *testing.T, def *agent.Definition, builtins map[string]tool.BuiltinFunc, store ArtifactStore) *harness {
	t.Helper()
	h := &harness{t: t, sink: newSink(), counts: map[string]int{}, builtins: builtins}
	h.suite.SetLogger(quietLogger(t))
	h.env = h.suite.NewTestWorkflowEnvironment()
	h.env.SetTestTimeout(30 * time.Second)
	h.reg = agent.NewRegistry(builtinNames(builtins)...)
	require.NoError(t, h.reg.Register(def))
	h.def, _ = h.reg.Get(def.Ref())
	n := 0
	Register(h.env, WorkerDeps{
		Agents: h.reg, Events: h.sink, ToolOptions: tool.Options{Builtins: builtins}, HeartbeatEvery: time.Second,
		Artifacts: store, NewID: func() string { n++; return "id" + strings.Repeat("0", n) },
	})
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.counts[info.ActivityType.Name]++
		if info.ActivityType.Name == ActivityModel {
			var in ModelInput
			if err := args.Get(&in); err == nil {
				h.lastModel = in
			}
		}
	})
	in, err := NewSessionInput("s-1", h.def, "alice", nil, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), RuntimeConfig{})
	require.NoError(t, err)
	h.input = in
	return h
}

const (
	reportCSV = "region,orders\nnorth,12\n"
	// maxChars is the agent's max_result_chars: over the 150 characters of
	// bigText, under the report's result with its URI line.
	maxChars = 120
)

var bigText = strings.Repeat("0123456789", 15)

// artifactAgent calls "report" (returns a CSV artifact) and "big" (returns
// 150 characters, result middleware appends " (mw)", over max_result_chars
// 120) in one step, then finishes.
func artifactAgent() (*agent.Definition, map[string]tool.BuiltinFunc) {
	def := scriptedAgent("arts", []agent.ToolDef{customTool("report", tool.PolicySafe), customTool("big", tool.PolicySafe)},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "report", `{}`), toolCall("c2", "big", `{}`)}},
		model.ScriptStep{Text: "done"},
	)
	def.Tools[1].ResultMiddleware = []agent.Middleware{{AppendText: strp(" (mw)")}}
	def.MaxResultChars = maxChars
	builtins := map[string]tool.BuiltinFunc{
		"report": func(_ context.Context, inv tool.Invocation) (tool.Outcome, error) {
			return tool.Outcome{
				Result:    model.ToolResult{ToolCallID: inv.Call.ID, Content: tool.TextContent("report ready")},
				Artifacts: []tool.Artifact{{MediaType: "text/csv", Data: []byte(reportCSV)}},
			}, nil
		},
		"big": func(_ context.Context, inv tool.Invocation) (tool.Outcome, error) {
			return tool.Outcome{Result: model.ToolResult{ToolCallID: inv.Call.ID, Content: tool.TextContent(bigText)}}, nil
		},
	}
	return def, builtins
}

// runToContinueAsNew runs one run to completion, then makes the workflow
// continue as new and returns the carried session (the full run state).
func runToContinueAsNew(t *testing.T, h *harness) SessionInput {
	t.Helper()
	h.submit(time.Second, "req-1", "run-1", "go")
	h.at(time.Minute, func() {
		assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
		h.env.SetContinueAsNewSuggested(true)
	})
	return continueAsNew(t, h)
}

// continueAsNew executes the workflow, with a control update at 61 s
// that makes it continue as new once a callback before it suggested so,
// and returns the carried session.
func continueAsNew(t *testing.T, h *harness) SessionInput {
	t.Helper()
	h.update(time.Minute+time.Second, UpdateControl, "ctl-1", ControlRequest{Action: ActionPaused})
	h.env.ExecuteWorkflow(SessionWorkflow, h.input)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(h.env.GetWorkflowError(), &can), "workflow error = %v", h.env.GetWorkflowError())
	var next SessionInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

// TestToolArtifactsAndSpillStored: on the Temporal engine, as on the local
// one, a tool's files become owner-readable artifacts referenced by URI
// lines and extensions.artifacts, and a result over max_result_chars
// (after result middleware) is spilled to an artifact, replaced by a
// preview note and recorded in extensions.result_spill.
func TestToolArtifactsAndSpillStored(t *testing.T) {
	store := newTestStore(t)
	def, builtins := artifactAgent()
	h := newStoreHarness(t, def, builtins, store)
	next := runToContinueAsNew(t, h)
	ctx := context.Background()

	csvKey, spillKey := sha256Hex(reportCSV), sha256Hex(bigText+" (mw)")
	st := next.Runs["run-1"].State
	require.Equal(t, runtime.StatusCompleted, st.Status)
	ek1 := runtime.ExecutionKey("run-1", 1, "c1")
	ek2 := runtime.ExecutionKey("run-1", 1, "c2")
	require.Equal(t, map[string]any{
		ek1: []any{map[string]any{"uri": "artifact://" + csvKey, "media_type": "text/csv", "size_bytes": float64(len(reportCSV))}},
	}, st.Extensions["artifacts"])
	require.Equal(t, map[string]any{"results": map[string]any{
		"r_id0": map[string]any{
			"result_id": "r_id0", "path": "artifact://" + spillKey, "fmt": "text", "row_count": nil, "columns": nil,
			"parent_keys": []any{ek2}, "size_bytes": float64(len(bigText + " (mw)")),
		},
	}}, st.Extensions["result_spill"])

	// The results in the conversation, as the model saw them.
	byCall := toolResultsByCall(st.Messages)
	require.JSONEq(t, string(tool.TextContent(fmt.Sprintf("report ready\n[artifact://%s text/csv, %d bytes]", csvKey, len(reportCSV)))), string(byCall["c1"].Content))
	require.JSONEq(t, string(tool.TextContent(fmt.Sprintf("%s\n\n[Result truncated: %d characters. Full result: artifact://%s]", bigText[:maxChars], len(bigText)+5, spillKey))),
		string(byCall["c2"].Content))
	last, err := json.Marshal(h.lastModelInput().Request)
	require.NoError(t, err)
	require.Contains(t, string(last), fmt.Sprintf("artifact://%s text/csv, %d bytes", csvKey, len(reportCSV)))
	require.Contains(t, string(last), "Full result: artifact://"+spillKey)
	require.NotContains(t, string(last), bigText, "the full result never reaches the model")

	// The bytes are stored, readable by the session's owner only.
	got, err := store.GetOwned(ctx, "alice", csvKey)
	require.NoError(t, err)
	require.Equal(t, reportCSV, string(got))
	got, err = store.GetOwned(ctx, "alice", spillKey)
	require.NoError(t, err)
	require.Equal(t, bigText+" (mw)", string(got), "the processed result is spilled")
	_, err = store.GetOwned(ctx, "bob", csvKey)
	require.ErrorIs(t, err, artifacts.ErrNotFound)
}

// toolResultsByCall returns the tool_result blocks of msgs by tool call id.
func toolResultsByCall(msgs []model.Message) map[string]model.ContentBlock {
	out := map[string]model.ContentBlock{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.ToolUseID != "" {
				out[b.ToolUseID] = b
			}
		}
	}
	return out
}

// TestToolArtifactsWithoutStore: a worker without an artifact store keeps
// the previous behaviour: files dropped, results kept whole.
func TestToolArtifactsWithoutStore(t *testing.T) {
	def, builtins := artifactAgent()
	h := newStoreHarness(t, def, builtins, nil)
	next := runToContinueAsNew(t, h)
	st := next.Runs["run-1"].State
	require.Equal(t, runtime.StatusCompleted, st.Status)
	require.Nil(t, st.Extensions["artifacts"])
	require.Nil(t, st.Extensions["result_spill"])
	results := toolResultsByCall(st.Messages)
	require.Len(t, results, 2)
	require.JSONEq(t, string(tool.TextContent("report ready")), string(results["c1"].Content))
	require.JSONEq(t, string(tool.TextContent(bigText+" (mw)")), string(results["c2"].Content))
}

// TestSpillIgnoredWhenItDoesNotMatch: the workflow never records a spill
// whose key is not the hash of the processed result (pure check).
func TestSpillIgnoredWhenItDoesNotMatch(t *testing.T) {
	def, _ := artifactAgent()
	w := &sessionWorkflow{s: &SessionInput{}, def: def, tools: map[string]agent.ToolDef{}}
	for _, td := range def.Tools {
		w.tools[td.Name] = td
	}
	st := &runtime.RunState{RunID: "run-1"}
	raw := model.ToolResult{ToolCallID: "c2", Content: tool.TextContent(bigText)}
	e := &runtime.ToolEntry{ExecutionKey: "k", Call: toolCall("c2", "big", `{}`), Status: runtime.ToolRawCompleted, RawResult: &raw}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(quietLogger(t))
	env := suite.NewTestWorkflowEnvironment()
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		return w.processTool(ctx, st, e, &SpillRef{Key: sha256Hex(bigText), ID: "r_x"}) // without " (mw)"
	})
	require.NoError(t, env.GetWorkflowError())
	require.Nil(t, st.Extensions["result_spill"])
	require.JSONEq(t, string(tool.TextContent(bigText+" (mw)")), string(e.Result.Content))
}

// clientAgent calls the client tool "ask" (result middleware appends
// " (mw)", max_result_chars 120), then finishes.
func clientAgent() *agent.Definition {
	def := scriptedAgent("client", []agent.ToolDef{{Config: tool.Config{Name: "ask", Description: "ask", Kind: tool.KindClient}}},
		model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "ask", `{}`)}},
		model.ScriptStep{Text: "done"},
	)
	def.Tools[0].ResultMiddleware = []agent.Middleware{{AppendText: strp(" (mw)")}}
	def.MaxResultChars = maxChars
	return def
}

// resolveClientRun runs the client tool to its client_result, resolves it
// with text (and resumes), then continues as new and returns the run.
func resolveClientRun(t *testing.T, h *harness, text string) *runtime.RunState {
	t.Helper()
	key := runtime.ExecutionKey("run-1", 1, "c1")
	h.submit(time.Second, "req-1", "run-1", "go")
	h.at(30*time.Second, func() { assertStatus(t, h.getRun("run-1"), runtime.StatusAwaitingInput) })
	res := h.update(31*time.Second, UpdateResolve, "res-1", ResolveRequest{
		Key: key, Result: &model.ToolResult{ToolCallID: "c1", Content: tool.TextContent(text)}, Resume: true,
	})
	h.at(time.Minute, func() {
		var rr ResolveResult
		res.decode(t, &rr)
		assertStatus(t, rr.Run, runtime.StatusCompleted)
		h.env.SetContinueAsNewSuggested(true)
	})
	return continueAsNew(t, h).Runs["run-1"].State
}

// TestResolvedResultSpilled: a client tool's result supplied by the caller
// that is over max_result_chars after result middleware is stored by one
// spill activity, owned by the session's owner, and spilled exactly as the
// local engine spills it (preview note, extensions.result_spill).
func TestResolvedResultSpilled(t *testing.T) {
	store := newTestStore(t)
	h := newStoreHarness(t, clientAgent(), nil, store)
	st := resolveClientRun(t, h, bigText)
	require.Equal(t, 1, h.count(ActivitySpill))
	require.Equal(t, 2, h.count(ActivityModel))

	full := bigText + " (mw)"
	spillKey := sha256Hex(full)
	require.Equal(t, map[string]any{"results": map[string]any{
		"r_id0": map[string]any{
			"result_id": "r_id0", "path": "artifact://" + spillKey, "fmt": "text", "row_count": nil, "columns": nil,
			"parent_keys": []any{runtime.ExecutionKey("run-1", 1, "c1")}, "size_bytes": float64(len(full)),
		},
	}}, st.Extensions["result_spill"])
	require.JSONEq(t, string(tool.TextContent(fmt.Sprintf("%s\n\n[Result truncated: %d characters. Full result: artifact://%s]", bigText[:maxChars], len(full), spillKey))),
		string(toolResultsByCall(st.Messages)["c1"].Content))
	last, err := json.Marshal(h.lastModelInput().Request)
	require.NoError(t, err)
	require.NotContains(t, string(last), bigText, "the full result never reaches the model")

	got, err := store.GetOwned(context.Background(), "alice", spillKey)
	require.NoError(t, err)
	require.Equal(t, full, string(got))
	_, err = store.GetOwned(context.Background(), "bob", spillKey)
	require.ErrorIs(t, err, artifacts.ErrNotFound)
}

// TestResolvedResultShortOrNoStore: a short resolved result runs no spill
// activity; without an artifact store a long one is kept whole.
func TestResolvedResultShortOrNoStore(t *testing.T) {
	t.Run("short", func(t *testing.T) {
		h := newStoreHarness(t, clientAgent(), nil, nil)
		st := resolveClientRun(t, h, "fine")
		require.Equal(t, 0, h.count(ActivitySpill))
		require.Nil(t, st.Extensions["result_spill"])
		require.JSONEq(t, string(tool.TextContent("fine (mw)")), string(toolResultsByCall(st.Messages)["c1"].Content))
	})
	t.Run("no store", func(t *testing.T) {
		h := newStoreHarness(t, clientAgent(), nil, nil)
		st := resolveClientRun(t, h, bigText)
		require.Equal(t, 1, h.count(ActivitySpill))
		require.Nil(t, st.Extensions["result_spill"])
		require.JSONEq(t, string(tool.TextContent(bigText+" (mw)")), string(toolResultsByCall(st.Messages)["c1"].Content))
	})
}

// memStore is an ArtifactStore in memory whose stores fail while fail is set.
type memStore struct {
	mu   sync.Mutex
	data map[string][]byte
	fail atomic.Bool
}

func (m *memStore) PutOwned(_ context.Context, _ string, data []byte) (string, error) {
	if m.fail.Load() {
		return "", errors.New("store down")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		m.data = map[string][]byte{}
	}
	key := sha256Hex(string(data))
	m.data[key] = data
	return key, nil
}

func (m *memStore) GetOwned(_ context.Context, _, digest string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.data[digest]; ok {
		return d, nil
	}
	return nil, artifacts.ErrNotFound
}

// TestSpillFailureKeepsRawResult: a tool result over max_result_chars whose
// spill cannot be stored keeps its raw result (the entry stays
// raw_completed, a manual tool is not uncertain): the run fails resumably
// and a resume only spills and processes it; the tool is never called
// again (REFERENCE §4.2 step 6, as the local engine's
// TestSpillFailureKeepsTheRawResult).
func TestSpillFailureKeepsRawResult(t *testing.T) {
	for _, policy := range []string{tool.PolicySafe, tool.PolicyManual} {
		t.Run(policy, func(t *testing.T) {
			def := scriptedAgent("spill-fails", []agent.ToolDef{customTool("big", policy)},
				model.ScriptStep{ToolCalls: []model.ToolCall{toolCall("c1", "big", `{}`)}},
				model.ScriptStep{Text: "done"},
			)
			def.Tools[0].ResultMiddleware = []agent.Middleware{{AppendText: strp(" (mw)")}}
			def.MaxResultChars = maxChars
			var calls atomic.Int32
			builtins := map[string]tool.BuiltinFunc{"big": func(_ context.Context, inv tool.Invocation) (tool.Outcome, error) {
				calls.Add(1)
				return tool.Outcome{Result: model.ToolResult{ToolCallID: inv.Call.ID, Content: tool.TextContent(bigText)}}, nil
			}}
			store := &memStore{}
			store.fail.Store(true)
			h := newStoreHarness(t, def, builtins, store)
			h.submit(time.Second, "req-1", "run-1", "go")
			var failed runtime.RunResult
			h.at(time.Minute, func() { failed = h.getRun("run-1"); store.fail.Store(false) })
			resume := h.update(2*time.Minute, UpdateControl, "ctl-1", ControlRequest{Action: ActionResume})
			h.run(time.Hour)
			assertStatus(t, failed, runtime.StatusFailed)
			require.Empty(t, failed.Pending, "the raw result arrived: nothing is uncertain")
			require.NotNil(t, failed.Error)
			require.Equal(t, "StorageError", failed.Error.Type)
			var cr ControlResult
			resume.decode(t, &cr)
			assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
			require.EqualValues(t, 1, calls.Load(), "the tool is called once")
			last, err := json.Marshal(h.lastModelInput().Request)
			require.NoError(t, err)
			require.Contains(t, string(last), "Full result: artifact://"+sha256Hex(bigText+" (mw)"), "the resume spilled the result")
			_, err = store.GetOwned(context.Background(), "alice", sha256Hex(bigText+" (mw)"))
			require.NoError(t, err)
		})
	}
}
