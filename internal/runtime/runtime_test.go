package runtime_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/sqlite"
	"hxd/internal/tool"
)

// countingStore counts boundary commits per run.
type countingStore struct {
	rtstore.Store
	commits    atomic.Int64
	commitHook func(*rtstore.Commit)
	// failPuts fails that many ArtifactPut calls (for good: a transient
	// failure would be waited out).
	failPuts atomic.Int32
	// insertDelay holds every RunInsert back that long.
	insertDelay time.Duration
	// runGets counts RunGet calls.
	runGets atomic.Int64
}

func (c *countingStore) RunGet(ctx context.Context, runID string) (*rtstore.RunRow, error) {
	c.runGets.Add(1)
	return c.Store.RunGet(ctx, runID)
}

func (c *countingStore) RunInsert(ctx context.Context, p *rtstore.RunInsertParams) (*rtstore.RunRow, bool, error) {
	time.Sleep(c.insertDelay)
	return c.Store.RunInsert(ctx, p)
}

func (c *countingStore) ArtifactPut(ctx context.Context, sessionID, sha256 string, data []byte) error {
	if c.failPuts.Add(-1) >= 0 {
		return fmt.Errorf("put artifact: %w", errInjected)
	}
	return c.Store.ArtifactPut(ctx, sessionID, sha256, data)
}

func (c *countingStore) Commit(ctx context.Context, cm *rtstore.Commit) error {
	c.commits.Add(1)
	if c.commitHook != nil {
		c.commitHook(cm)
	}
	return c.Store.Commit(ctx, cm)
}

type testBundle struct {
	rt    *hxruntime.Runtime
	store *countingStore
	calls *sync.Map // tool name → *atomic.Int64
	path  string    // the SQLite file
}

func (tb *testBundle) toolCalls(name string) int64 {
	v, ok := tb.calls.Load(name)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

// setup starts a runtime on a fresh SQLite file with the given agents. The
// builtin "count" tool counts its invocations and echoes its input.
func setup(t *testing.T, defs ...*agent.Definition) *testBundle {
	t.Helper()
	return setupCfg(t, nil, defs...)
}

// setupCfg is setup with mod applied to the runtime config last. The
// builtin "gate" blocks until cancelled on its first call and answers
// "open" on later ones.
func setupCfg(t *testing.T, mod func(*hxruntime.Config), defs ...*agent.Definition) *testBundle {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hxd.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: path, Logger: hxtest.Logger(t), AutoMigrate: true})
	require.NoError(t, err)
	cs := &countingStore{Store: st}
	calls := &sync.Map{}
	counter := func(name string) *atomic.Int64 {
		v, _ := calls.LoadOrStore(name, &atomic.Int64{})
		return v.(*atomic.Int64)
	}
	reg := agent.NewRegistry("count", "block", "leak", "file", "gate", "meet")
	for _, d := range append(defs, agent.Demo()...) {
		require.NoError(t, reg.Register(d))
	}
	cfg := hxruntime.Config{
		Store: cs, Agents: reg, Logger: hxtest.Logger(t),
		ToolOptions: tool.Options{WorkDir: t.TempDir(), Builtins: map[string]tool.BuiltinFunc{
			"count": func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
				counter(inv.Call.Name).Add(1)
				return tool.Outcome{Result: model.ToolResult{Content: inv.Call.Input}}, nil
			},
			"leak": func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
				return tool.Outcome{Result: model.ToolResult{Content: jsonString("card 4111111111111111")}}, nil
			},
			"file": func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
				return tool.Outcome{
					Result:    model.ToolResult{Content: jsonString("report attached")},
					Artifacts: []tool.Artifact{{MediaType: "application/pdf", Data: []byte("%PDF-1.7 report")}},
				}, nil
			},
			"block": func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
				counter(inv.Call.Name).Add(1)
				<-ctx.Done()
				return tool.Outcome{}, ctx.Err()
			},
			"gate": func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
				if counter(inv.Call.Name).Add(1) == 1 {
					<-ctx.Done()
					return tool.Outcome{}, ctx.Err()
				}
				return tool.Outcome{Result: model.ToolResult{Content: jsonString("open")}}, nil
			},
		}},
		SleepFunc: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
		WatchPoll: 50 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	rt, err := hxruntime.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, rt.Stop(context.Background()))
		require.NoError(t, st.Close())
	})
	return &testBundle{rt: rt, store: cs, calls: calls, path: path}
}

func recording(on bool) *bool { return &on }

func runToEnd(t *testing.T, tb *testBundle, sessionID, msg string) *hxruntime.RunResult {
	t.Helper()
	ctx := context.Background()
	run, created, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sessionID, Message: jsonString(msg)})
	require.NoError(t, err)
	require.True(t, created)
	return waitRun(t, tb, run.RunID)
}

func waitRun(t *testing.T, tb *testBundle, runID string) *hxruntime.RunResult {
	t.Helper()
	res, err := tb.rt.WaitRun(context.Background(), runID, 10*time.Second)
	require.NoError(t, err)
	require.NotEqual(t, hxruntime.StatusRunning, res.Status, "run did not settle")
	return res
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func journalOf(t *testing.T, tb *testBundle, runID string) []journal.Record {
	t.Helper()
	recs, err := tb.store.JournalList(context.Background(), runID, 0, 100000)
	require.NoError(t, err)
	for i, r := range recs {
		require.Equal(t, int64(i+1), r.Seq, "seq must be contiguous from 1")
	}
	return recs
}

func eventsOf(t *testing.T, tb *testBundle, runID string) []hxruntime.RunEvent {
	t.Helper()
	evs, err := tb.rt.ListEvents(context.Background(), runID, 0, 1000)
	require.NoError(t, err)
	return evs
}

// ofKind returns the records of one kind, in order.
func ofKind(recs []journal.Record, kind journal.Kind) []journal.Record {
	var out []journal.Record
	for _, r := range recs {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// oneCallAgent is an agent whose model makes one tool call, then answers
// "done".
func oneCallAgent(name string, call model.ToolCall, tools ...tool.Config) *agent.Definition {
	def := &agent.Definition{
		Name: name, Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{{ToolCalls: []model.ToolCall{call}}, {Text: "done"}}},
	}
	for _, c := range tools {
		def.Tools = append(def.Tools, agent.ToolDef{Config: c})
	}
	return def
}

// boundary is a record kind with its step and attempt ids.
type boundary struct{ kind, step, attempt string }

func boundaries(recs []journal.Record) []boundary {
	var out []boundary
	for _, r := range recs {
		k := string(r.Kind)
		if strings.HasPrefix(k, "model.") || strings.HasPrefix(k, "tool.") || strings.HasPrefix(k, "run.") {
			out = append(out, boundary{k, r.StepID, r.AttemptID})
		}
	}
	return out
}

// TestInvoiceDemoJournal runs the recorded invoice demo and checks the
// journal against the order REFERENCE §10.1 derives (relative order and
// step/attempt pairs, not absolute seq numbers).
func TestInvoiceDemoJournal(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{
		Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}, Recording: recording(true),
	})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "Analyze overdue invoices for the demo account")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, "Overdue balance: $1,500. (synthetic fixture)", *res.Output)
	require.True(t, res.UsageIncomplete, "a retried model attempt makes usage incomplete")

	recs := journalOf(t, tb, res.RunID)
	require.Equal(t, []boundary{
		{"run.started", "0", "0"},
		{"model.started", "1", "1"},
		{"model.failed", "1", "1"},
		{"model.started", "1", "2"},
		{"model.response", "1", "2"},
		{"model.processed", "1", "2"},
		{"model.completed", "1", "2"},
		{"tool.started", "1", "1"},
		{"tool.dispatched", "1", "1"},
		{"tool.returned", "1", "1"},
		{"tool.processed", "1", "1"},
		{"model.started", "2", "1"},
		{"model.response", "2", "1"},
		{"model.processed", "2", "1"},
		{"model.completed", "2", "1"},
	}, boundaries(recs))

	// Tool records carry the execution key; the first record is run.started.
	for _, r := range recs {
		if strings.HasPrefix(string(r.Kind), "tool.") {
			require.NotNil(t, r.ExecutionKey)
			require.Equal(t, res.RunID+":1:overdue", *r.ExecutionKey)
		}
		require.Equal(t, 1, r.Version)
		require.Equal(t, sess.ID, r.SessionID)
	}
	require.Equal(t, journal.KindRunStarted, recs[0].Kind)

	// tool.started and tool.dispatched hold the call (and the replay
	// policy), keys in order, as the reference writes them.
	for _, r := range recs {
		switch r.Kind {
		case journal.KindToolStarted:
			require.Equal(t, `{"call":{"id":"overdue","name":"overdue_balance","input":{"account":"demo"}},"replay_policy":"safe"}`, string(r.Payload))
		case journal.KindToolDispatched:
			require.Equal(t, `{"call":{"id":"overdue","name":"overdue_balance","input":{"account":"demo"}}}`, string(r.Payload))
		}
	}

	// model.failed carries the injected failure; raw vs processed differ.
	var failed, response, processed map[string]any
	for _, r := range recs {
		switch r.Kind {
		case journal.KindModelFailed:
			require.NoError(t, json.Unmarshal(r.Payload, &failed))
		case journal.KindModelResponse:
			require.NoError(t, json.Unmarshal(r.Payload, &response))
		case journal.KindModelProcessed:
			require.NoError(t, json.Unmarshal(r.Payload, &processed))
		}
	}
	require.Equal(t, "ConnectionError", failed["type"])
	require.Equal(t, "Overdue balance: $1,500.", response["text"])
	require.Equal(t, "Overdue balance: $1,500. (synthetic fixture)", processed["text"])

	// Events: attempt_reset, then the final events in order, each mirrored
	// by an event record; the last checkpoint says completed/result.
	evs := eventsOf(t, tb, res.RunID)
	var types []string
	for i, ev := range evs {
		types = append(types, ev.Type)
		require.Equal(t, itoa(i+1), ev.Cursor)
	}
	require.Contains(t, types, "attempt_reset")
	require.Equal(t, []string{"turn_complete", "run_result"}, types[len(types)-2:])
	nEventRecords := 0
	var lastCheckpoint map[string]any
	for _, r := range recs {
		switch r.Kind {
		case journal.KindEvent:
			nEventRecords++
		case journal.KindCheckpoint:
			lastCheckpoint = nil
			require.NoError(t, json.Unmarshal(r.Payload, &lastCheckpoint))
		}
	}
	require.Equal(t, len(evs), nEventRecords)
	require.Equal(t, "completed", lastCheckpoint["status"])
	require.Equal(t, "result", lastCheckpoint["phase"])
	require.Equal(t, journal.KindEvent, recs[len(recs)-1].Kind, "run_result is the last record")
}

func itoa(i int) string { return strconv.Itoa(i) }

func jsonInt(i int) string { return strconv.Itoa(i) }

// TestPublicEventsNeverCarryRawPayloads: events only see post-middleware data.
func TestPublicEventsNeverCarryRawPayloads(t *testing.T) {
	t.Parallel()
	def := &agent.Definition{
		Name: "secretive", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "c1", Name: "leak", Input: json.RawMessage(`{}`)}}},
			{Text: "the SECRET answer"},
		}},
		ResponseMiddleware: []agent.Middleware{{RegexReplace: &agent.RegexReplace{Pattern: "SECRET", Replace: "[hidden]"}}},
		Tools: []agent.ToolDef{{
			Config:           tool.Config{Name: "leak", Kind: "builtin", Builtin: "leak", ReplayPolicy: "safe"},
			ResultMiddleware: []agent.Middleware{{RegexReplace: &agent.RegexReplace{Pattern: `\d{16}`, Replace: "[card]"}}},
		}},
	}
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, "the [hidden] answer", *res.Output)
	for _, ev := range eventsOf(t, tb, res.RunID) {
		raw, _ := json.Marshal(ev)
		require.NotContains(t, string(raw), "SECRET")
		require.NotContains(t, string(raw), "4111111111111111")
	}
	// The journal keeps the raw payloads privately.
	all, _ := json.Marshal(journalOf(t, tb, res.RunID))
	require.Contains(t, string(all), "SECRET")
	require.Contains(t, string(all), "4111111111111111")
}

// TestUnrecordedSessionWritesNoJournal: recording is chosen per session.
func TestUnrecordedSessionWritesNoJournal(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}})
	require.NoError(t, err)
	require.False(t, sess.Recording)
	res := runToEnd(t, tb, sess.ID, "Analyze")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Empty(t, journalOf(t, tb, res.RunID))
	require.NotEmpty(t, eventsOf(t, tb, res.RunID))
}

func tenStepAgent(name string) *agent.Definition {
	var script []model.ScriptStep
	for i := 1; i <= 10; i++ {
		script = append(script, model.ScriptStep{ToolCalls: []model.ToolCall{{ID: "c" + jsonInt(i), Name: "count", Input: json.RawMessage(`{}`)}}})
	}
	script = append(script, model.ScriptStep{Text: "done"})
	return &agent.Definition{
		Name: name, Version: "v1", MaxIterations: 50,
		Model: model.Config{Provider: "scripted", Script: script},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"}}},
	}
}

// TestCommitsPerCall: at most two durable commits per model call and per tool call.
func TestCommitsPerCall(t *testing.T) {
	t.Parallel()
	for _, rec := range []bool{false, true} {
		tb := setup(t, tenStepAgent("ten"))
		ctx := context.Background()
		sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "ten", Version: "v1"}, Recording: recording(rec)})
		require.NoError(t, err)
		before := tb.store.commits.Load()
		res := runToEnd(t, tb, sess.ID, "go")
		require.Equal(t, hxruntime.StatusCompleted, res.Status)
		require.Equal(t, int64(10), tb.toolCalls("count"))
		// One commit before each of the 11 model calls and 10 tool calls,
		// one for each raw tool result before its processing (REFERENCE
		// §4.2 step 6), plus the final one (the run insert is not a
		// Commit call): within the budget of two per call.
		require.Equal(t, int64(11+10+10+1), tb.store.commits.Load()-before)
	}
}

// blockerAgent calls the builtin "block" (which returns only once its call
// is cancelled) and then answers.
func blockerAgent() *agent.Definition {
	return &agent.Definition{
		Name: "blocker", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "b", Name: "block"}}}, {Text: "done"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "block", Kind: "builtin", Builtin: "block", ReplayPolicy: "safe"}}},
	}
}

// TestRequestIdempotencyAndBusy: same request id + message → same run; a
// different message → conflict; an unfinished run blocks a new one.
func TestRequestIdempotencyAndBusy(t *testing.T) {
	t.Parallel()
	def := blockerAgent()
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref()})
	require.NoError(t, err)
	run, created, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("a"), RequestID: "r1"})
	require.NoError(t, err)
	require.True(t, created)
	again, created, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("a"), RequestID: "r1"})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, run.RunID, again.RunID)
	_, _, err = tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("b"), RequestID: "r1"})
	require.ErrorIs(t, err, hxruntime.ErrRequestConflict)
	_, _, err = tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("b"), RequestID: "r2"})
	require.ErrorIs(t, err, hxruntime.ErrSessionBusy)

	// Cancel interrupts the blocked tool; the run ends cancelled and a new
	// run is accepted.
	require.Eventually(t, func() bool { return tb.toolCalls("block") == 1 }, 5*time.Second, 10*time.Millisecond)
	res, err := tb.rt.Cancel(ctx, sess.ID)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusCancelled, res.Status)
	require.Equal(t, "cancelled", *res.StopReason)
	_, created, err = tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("b"), RequestID: "r2"})
	require.NoError(t, err)
	require.True(t, created)
	_, err = tb.rt.Cancel(ctx, sess.ID)
	require.NoError(t, err)
}

// TestConcurrentDuplicateSubmissions: submissions of one request that race
// each other (a client retrying while its first try is still in flight)
// all answer with the one run, none with session_busy; a different request
// racing them is still refused as busy.
func TestConcurrentDuplicateSubmissions(t *testing.T) {
	t.Parallel()
	def := blockerAgent()
	tb := setup(t, def)
	tb.store.insertDelay = 50 * time.Millisecond
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref()})
	require.NoError(t, err)
	const n = 8
	type answer struct {
		runID   string
		created bool
		err     error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			run, created, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("Analyze"), RequestID: "same"})
			answers[i] = answer{created: created, err: err}
			if run != nil {
				answers[i].runID = run.RunID
			}
		})
	}
	var other error
	wg.Go(func() {
		time.Sleep(10 * time.Millisecond)
		_, _, other = tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("Other"), RequestID: "other"})
	})
	wg.Wait()
	created := 0
	for _, a := range answers {
		require.NoError(t, a.err)
		require.Equal(t, answers[0].runID, a.runID)
		if a.created {
			created++
		}
	}
	require.Equal(t, 1, created)
	require.ErrorIs(t, other, hxruntime.ErrSessionBusy)
	res, err := tb.rt.Cancel(ctx, sess.ID)
	require.NoError(t, err)
	require.Equal(t, answers[0].runID, res.RunID)
}

// TestDuplicateSubmissionFromAnotherProcess: a re-submission that finds
// the session held by another process (another Store on the file) whose
// insert of the very run it repeats is in flight answers with that run.
func TestDuplicateSubmissionFromAnotherProcess(t *testing.T) {
	t.Parallel()
	def := oneCallAgent("dup", model.ToolCall{ID: "c", Name: "count", Input: json.RawMessage(`{}`)},
		tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"})
	a := setup(t, def)
	a.store.insertDelay = 150 * time.Millisecond
	ctx := context.Background()
	sess, err := a.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref()})
	require.NoError(t, err)

	st, err := sqlite.Open(ctx, sqlite.Config{Path: a.path, Logger: hxtest.Logger(t)})
	require.NoError(t, err)
	reg := agent.NewRegistry("count")
	require.NoError(t, reg.Register(def))
	b, err := hxruntime.New(hxruntime.Config{Store: st, Agents: reg, Logger: hxtest.Logger(t), ToolOptions: tool.Options{Builtins: map[string]tool.BuiltinFunc{
		"count": func(context.Context, tool.Invocation) (tool.Outcome, error) { return tool.Outcome{}, nil },
	}}})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Stop(context.Background()))
		require.NoError(t, st.Close())
	})

	var first *hxruntime.RunResult
	var firstErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		first, _, firstErr = a.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go"), RequestID: "same"})
	})
	time.Sleep(50 * time.Millisecond) // a holds the session, its insert is held back
	again, created, err := b.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go"), RequestID: "same"})
	wg.Wait()
	require.NoError(t, firstErr)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, first.RunID, again.RunID)
	require.Equal(t, hxruntime.StatusCompleted, waitRun(t, a, first.RunID).Status)
}

// TestApproveRightAfterWait: WaitRun answers once the awaiting_input
// commit is stored, while the drive may still be releasing the session; a
// decision sent at once must wait for that release, not be refused as "not
// awaiting a resolution" (it was, now and then, before lockForDecision
// waited for a drive that had stopped at a decidable status).
func TestApproveRightAfterWait(t *testing.T) {
	t.Parallel()
	def := &agent.Definition{
		Name: "asker", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "a", Name: "count", Input: json.RawMessage(`{"n":1}`)}}},
			{Text: "done"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", Permission: "ask"}}},
	}
	tb := setup(t, def)
	ctx := context.Background()
	for i := range 40 {
		sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
		require.NoError(t, err)
		res := runToEnd(t, tb, sess.ID, "go")
		require.Equal(t, hxruntime.StatusAwaitingInput, res.Status)
		require.Len(t, res.Pending, 1)
		_, err = tb.rt.Approve(ctx, hxruntime.ApproveParams{SessionID: sess.ID, ExecutionKey: res.Pending[0].ExecutionKey, Allow: true})
		require.NoError(t, err, "approval %d right after the run stopped", i)
	}
}

// TestApprovalFlow: an ask tool stops the run; approve + resume dispatches once.
func TestApprovalFlow(t *testing.T) {
	t.Parallel()
	def := &agent.Definition{
		Name: "asker", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "a", Name: "count", Input: json.RawMessage(`{"n":1}`)}, {ID: "b", Name: "count", Input: json.RawMessage(`{"n":2}`)}}},
			{Text: "done"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", Permission: "ask"}}},
	}
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusAwaitingInput, res.Status)
	require.Len(t, res.Pending, 2)
	pending, err := tb.rt.Pending(ctx, sess.ID)
	require.NoError(t, err)
	require.Len(t, pending, 2)
	require.Equal(t, hxruntime.ToolApproval, pending[0].Status)

	// Rule errors.
	_, err = tb.rt.Resolve(ctx, hxruntime.ResolveParams{SessionID: sess.ID, ExecutionKey: pending[0].ExecutionKey, Retry: true, Abort: true})
	require.ErrorIs(t, err, hxruntime.ErrResolutionInvalid)
	_, err = tb.rt.Resolve(ctx, hxruntime.ResolveParams{SessionID: sess.ID, ExecutionKey: pending[0].ExecutionKey, Retry: true})
	require.ErrorIs(t, err, hxruntime.ErrResolutionInvalid, "an approval has no uncertain outcome")
	_, err = tb.rt.Approve(ctx, hxruntime.ApproveParams{SessionID: sess.ID, ExecutionKey: "nope", Allow: true})
	require.ErrorIs(t, err, hxruntime.ErrUnknownExecutionKey)

	// One decision each, one resume at the end.
	_, err = tb.rt.Approve(ctx, hxruntime.ApproveParams{SessionID: sess.ID, ExecutionKey: pending[0].ExecutionKey, Allow: true})
	require.NoError(t, err)
	_, err = tb.rt.Approve(ctx, hxruntime.ApproveParams{SessionID: sess.ID, ExecutionKey: pending[1].ExecutionKey, Allow: false, Resume: true})
	require.NoError(t, err)
	res = waitRun(t, tb, res.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, int64(1), tb.toolCalls("count"), "approved tool dispatched once, declined never")

	var resolved, resumed int
	for _, r := range journalOf(t, tb, res.RunID) {
		switch r.Kind {
		case journal.KindToolResolved:
			resolved++
		case journal.KindRunResumed:
			resumed++
		}
	}
	require.Equal(t, 2, resolved)
	require.Equal(t, 1, resumed)

	// Nothing is awaiting a decision now.
	_, err = tb.rt.Approve(ctx, hxruntime.ApproveParams{SessionID: sess.ID, ExecutionKey: pending[0].ExecutionKey, Allow: true})
	require.ErrorIs(t, err, hxruntime.ErrNotAwaitingResolution)
}

// TestForeignPrincipalSeesNothing: ownership returns ErrNotFound.
func TestForeignPrincipalSeesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	alice := hxruntime.WithPrincipal(context.Background(), "alice")
	bob := hxruntime.WithPrincipal(context.Background(), "bob")
	sess, err := tb.rt.CreateSession(alice, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}})
	require.NoError(t, err)
	_, err = tb.rt.GetSession(bob, sess.ID)
	require.ErrorIs(t, err, hxruntime.ErrNotFound)
	page, err := tb.rt.ListSessions(bob, hxruntime.SessionListParams{})
	require.NoError(t, err)
	require.Empty(t, page.Items)
	_, _, err = tb.rt.SubmitRun(bob, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("x")})
	require.ErrorIs(t, err, hxruntime.ErrNotFound)
}

// TestSessionIdsScopedPerPrincipal: a caller-chosen session id is the
// principal's own: two principals each create session "foo", neither sees
// nor reaches the other's, the same principal re-using it gets
// ErrSessionExists, and everything a run shows (its result, events,
// journal records, webhook bodies, checkpoints, exports) carries "foo".
func TestSessionIdsScopedPerPrincipal(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var hooked, checkpoints []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			SessionID string `json:"session_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		hooked = append(hooked, body.SessionID)
		mu.Unlock()
		_, _ = w.Write([]byte(`{"content":"hooked"}`))
	}))
	t.Cleanup(hook.Close)
	def := &agent.Definition{
		Name: "hooker", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "h", Name: "hook", Input: json.RawMessage(`{}`)}}},
			{Text: "done"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "hook", Kind: "webhook", URL: hook.URL, ReplayPolicy: "safe"}}},
	}
	tb := setupCfg(t, func(c *hxruntime.Config) {
		c.CheckpointFunc = func(sessionID, _ string, _ hxruntime.RunStatus, _ hxruntime.Phase) {
			mu.Lock()
			checkpoints = append(checkpoints, sessionID)
			mu.Unlock()
		}
	}, def)
	alice := hxruntime.WithPrincipal(context.Background(), "alice")
	bob := hxruntime.WithPrincipal(context.Background(), "bob")
	create := func(ctx context.Context, meta string) (*hxruntime.Session, error) {
		return tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{
			Agent: def.Ref(), Recording: recording(true), SessionID: "foo", Metadata: json.RawMessage(meta),
		})
	}
	as, err := create(alice, `{"who":"alice"}`)
	require.NoError(t, err)
	bs, err := create(bob, `{"who":"bob"}`)
	require.NoError(t, err, "bob's foo does not collide with alice's")
	require.Equal(t, "foo", as.ID)
	require.Equal(t, "foo", bs.ID)
	for _, ctx := range []context.Context{alice, bob} {
		_, err = create(ctx, `{}`)
		require.ErrorIs(t, err, hxruntime.ErrSessionExists, "a principal's own id is taken")
	}
	generated, err := tb.rt.CreateSession(alice, hxruntime.CreateSessionParams{Agent: def.Ref()})
	require.NoError(t, err)
	require.NoError(t, uuid.Validate(generated.ID), "server-made ids stay UUIDs")
	_, err = tb.rt.GetSession(bob, generated.ID)
	require.ErrorIs(t, err, hxruntime.ErrNotFound)

	runs := map[string]string{}
	for who, ctx := range map[string]context.Context{"alice": alice, "bob": bob} {
		s, err := tb.rt.GetSession(ctx, "foo")
		require.NoError(t, err)
		require.JSONEq(t, `{"who":"`+who+`"}`, string(s.Metadata), "each sees their own foo")
		run, created, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: "foo", Message: jsonString("go"), RequestID: "same"})
		require.NoError(t, err)
		require.True(t, created, "request ids are per session too")
		require.Equal(t, "foo", run.SessionID)
		res, err := tb.rt.WaitRun(ctx, run.RunID, 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, hxruntime.StatusCompleted, res.Status)
		require.Equal(t, "foo", res.SessionID)
		runs[who] = run.RunID
	}
	require.NotEqual(t, runs["alice"], runs["bob"])

	for who, ctx := range map[string]context.Context{"alice": alice, "bob": bob} {
		other := map[string]string{"alice": "bob", "bob": "alice"}[who]
		page, err := tb.rt.ListRuns(ctx, "foo", hxruntime.ListParams{})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		require.Equal(t, runs[who], page.Items[0].RunID)
		_, err = tb.rt.GetRun(ctx, runs[other])
		require.ErrorIs(t, err, hxruntime.ErrNotFound)
		s, err := tb.rt.GetSession(ctx, "foo")
		require.NoError(t, err)
		require.Equal(t, runs[who], s.LatestRun.RunID)

		evs, err := tb.rt.ListEvents(ctx, runs[who], 0, 1000)
		require.NoError(t, err)
		require.NotEmpty(t, evs)
		for _, ev := range evs {
			require.Equal(t, "foo", ev.SessionID, ev.Type)
		}
		for _, rec := range journalOf(t, tb, runs[who]) {
			require.Equal(t, "foo", rec.SessionID, rec.Kind)
		}
		require.NoError(t, tb.rt.Export(ctx, runs[who], func(inc *hxruntime.Incident) error {
			require.Equal(t, "foo", inc.SessionID)
			return nil
		}))
		require.NoError(t, hxruntime.ExportOffline(ctx, tb.store, "foo", runs[who], func(inc *hxruntime.Incident) error {
			require.Equal(t, "foo", inc.SessionID)
			return nil
		}))
	}
	alicePage, err := tb.rt.ListSessions(alice, hxruntime.SessionListParams{})
	require.NoError(t, err)
	require.Len(t, alicePage.Items, 2)
	bobPage, err := tb.rt.ListSessions(bob, hxruntime.SessionListParams{})
	require.NoError(t, err)
	require.Len(t, bobPage.Items, 1)
	require.Equal(t, "foo", bobPage.Items[0].ID)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"foo", "foo"}, hooked, "webhook bodies carry the caller's id")
	require.NotEmpty(t, checkpoints)
	for _, id := range checkpoints {
		require.Equal(t, "foo", id)
	}
}

// TestLargeResultSpillsToArtifact: a tool result longer than
// max_result_chars becomes an artifact; the conversation keeps a preview
// with its artifact:// URI and the checkpoint's extensions map it.
func TestLargeResultSpillsToArtifact(t *testing.T) {
	t.Parallel()
	def := &agent.Definition{
		Name: "spiller", Version: "v1", MaxResultChars: 100,
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "big", Name: "count", Input: json.RawMessage(`{"text":"` + strings.Repeat("x", 500) + `"}`)}}},
			{Text: "done"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"}}},
	}
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	var processed model.ToolResult
	var lastCheckpoint map[string]any
	for _, r := range journalOf(t, tb, res.RunID) {
		switch r.Kind {
		case journal.KindToolProcessed:
			require.NoError(t, json.Unmarshal(r.Payload, &processed))
		case journal.KindCheckpoint:
			require.NoError(t, json.Unmarshal(r.Payload, &lastCheckpoint))
		}
	}
	var preview string
	require.NoError(t, json.Unmarshal(processed.Content, &preview))
	require.Less(t, len(preview), 300)
	i := strings.Index(preview, "artifact://")
	require.GreaterOrEqual(t, i, 0, preview)
	key := preview[i+len("artifact://") : i+len("artifact://")+64]
	data, err := tb.store.ArtifactGet(ctx, key)
	require.NoError(t, err)
	require.Contains(t, string(data), strings.Repeat("x", 500))
	results := lastCheckpoint["extensions"].(map[string]any)["result_spill"].(map[string]any)["results"].(map[string]any)
	require.Len(t, results, 1)
	for _, v := range results {
		require.Equal(t, "artifact://"+key, v.(map[string]any)["path"])
	}
	owned, err := tb.store.ArtifactOwned(ctx, key, hxruntime.LocalPrincipal)
	require.NoError(t, err)
	require.True(t, owned)
}

// TestToolOutcomesStored: every completed tool entry reaches the
// tool_outcomes rows, even though the next step drops it from the state.
func TestToolOutcomesStored(t *testing.T) {
	t.Parallel()
	tb := setup(t, tenStepAgent("ten"))
	var rows sync.Map
	tb.store.commitHook = func(c *rtstore.Commit) {
		for _, r := range c.Tools {
			if r.HasOutcome {
				rows.Store(r.ExecutionKey, true)
			}
		}
	}
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "ten", Version: "v1"}})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	n := 0
	rows.Range(func(_, _ any) bool { n++; return true })
	require.Equal(t, 10, n, "one outcome row per tool call")
}

// TestToolArtifactsAreReferenced: files a tool returns become artifacts the
// result and the checkpoint refer to by artifact:// URI.
func TestToolArtifactsAreReferenced(t *testing.T) {
	t.Parallel()
	def := &agent.Definition{
		Name: "filer", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "f", Name: "file", Input: json.RawMessage(`{}`)}}},
			{Text: "done"},
		}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "file", Kind: "builtin", Builtin: "file", ReplayPolicy: "safe"}}},
	}
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	sum := sha256.Sum256([]byte("%PDF-1.7 report"))
	uri := "artifact://" + hex.EncodeToString(sum[:])
	all, _ := json.Marshal(journalOf(t, tb, res.RunID))
	require.Contains(t, string(all), uri)
	data, err := tb.store.ArtifactGet(ctx, hex.EncodeToString(sum[:]))
	require.NoError(t, err)
	require.Equal(t, "%PDF-1.7 report", string(data))
}

// TestManualTimeoutIsUncertain: a manual tool that times out may have taken
// effect, so it becomes uncertain with recovery_required (REFERENCE §4.2
// step 3), and tool.failed says its outcome is unknown; a safe tool that
// times out is retried, then answered with an error result.
func TestManualTimeoutIsUncertain(t *testing.T) {
	t.Parallel()
	def := func(name, policy string) *agent.Definition {
		return oneCallAgent(name, model.ToolCall{ID: "b", Name: "block"}, tool.Config{Name: "block", Kind: "builtin", Builtin: "block",
			ReplayPolicy: policy, TimeoutSeconds: 0.05, Retry: &tool.Retry{Attempts: 2}})
	}
	manual, safe := def("manual-timeout", "manual"), def("safe-timeout", "safe")
	tb := setup(t, manual, safe)
	ctx := context.Background()

	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: manual.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusAwaitingInput, res.Status)
	require.Len(t, res.Pending, 1)
	require.Equal(t, hxruntime.ToolUncertain, res.Pending[0].Status)
	require.EqualValues(t, 1, tb.toolCalls("block"), "a manual tool is never called again on its own")
	failed := ofKind(journalOf(t, tb, res.RunID), journal.KindToolFailed)
	require.Len(t, failed, 1)
	var p map[string]any
	require.NoError(t, json.Unmarshal(failed[0].Payload, &p))
	require.Equal(t, "TimeoutError", p["type"])
	require.Equal(t, "unknown", p["outcome"])

	sess, err = tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: safe.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res = runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.EqualValues(t, 3, tb.toolCalls("block"), "two attempts of the safe tool")
}

// TestSpillFailureKeepsTheRawResult: when spilling a long result fails, the
// raw result is committed first (REFERENCE §4.2 step 6), so the resumed run
// processes it again instead of calling the tool again.
func TestSpillFailureKeepsTheRawResult(t *testing.T) {
	t.Parallel()
	def := oneCallAgent("spill-fail", model.ToolCall{ID: "c", Name: "count", Input: json.RawMessage(`{"text":"far longer than ten characters"}`)},
		tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"})
	def.MaxResultChars = 10
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	tb.store.failPuts.Store(1)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusFailed, res.Status)
	require.EqualValues(t, 1, tb.toolCalls("count"))
	require.Len(t, ofKind(journalOf(t, tb, res.RunID), journal.KindToolReturned), 1, "the raw result is in the journal")

	runID, err := tb.rt.Resume(ctx, sess.ID, hxruntime.ResumeParams{})
	require.NoError(t, err)
	res = waitRun(t, tb, runID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.EqualValues(t, 1, tb.toolCalls("count"), "the tool is not called again")
}

// TestRawResultCommitsBeforeProcessing: a tool's raw result commits on its
// own (entry raw_completed, tool.returned) before result middleware runs
// (REFERENCE §4.2 step 6), in a batch run in turn and in a concurrent one;
// tool.processed commits with a later boundary.
func TestRawResultCommitsBeforeProcessing(t *testing.T) {
	t.Parallel()
	for _, concurrent := range []bool{false, true} {
		t.Run(fmt.Sprintf("concurrent=%v", concurrent), func(t *testing.T) {
			t.Parallel()
			suffix := " [checked]"
			cfg := tool.Config{Name: "leak", Kind: "builtin", Builtin: "leak", ReplayPolicy: "manual", Concurrent: concurrent}
			def := &agent.Definition{
				Name: "raw-first", Version: "v1",
				Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
					{ToolCalls: []model.ToolCall{{ID: "a", Name: "leak", Input: json.RawMessage(`{}`)}, {ID: "b", Name: "leak", Input: json.RawMessage(`{}`)}}},
					{Text: "done"},
				}},
				Tools: []agent.ToolDef{{Config: cfg, ResultMiddleware: []agent.Middleware{{AppendText: &suffix}}}},
			}
			var mu sync.Mutex
			var commits [][]journal.Kind
			tb := setupCfg(t, func(c *hxruntime.Config) {
				c.AfterCommitFunc = func(kinds []journal.Kind) {
					mu.Lock()
					defer mu.Unlock()
					commits = append(commits, slices.Clone(kinds))
				}
			}, def)
			sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
			require.NoError(t, err)
			res := runToEnd(t, tb, sess.ID, "go")
			require.Equal(t, hxruntime.StatusCompleted, res.Status)

			// Every tool.processed commits after the tool.returned it
			// processes: a commit holds no more of them than raw results
			// committed before it.
			mu.Lock()
			defer mu.Unlock()
			returned, processed := 0, 0
			for _, kinds := range commits {
				p := 0
				for _, k := range kinds {
					if k == journal.KindToolProcessed {
						p++
					}
				}
				processed += p
				require.LessOrEqual(t, processed, returned, "a result is processed before its raw result committed: %v", commits)
				for _, k := range kinds {
					if k == journal.KindToolReturned {
						returned++
					}
				}
			}
			require.Equal(t, 2, returned, "commits: %v", commits)
			require.Equal(t, 2, processed, "commits: %v", commits)

			recs := journalOf(t, tb, res.RunID)
			for _, r := range ofKind(recs, journal.KindToolReturned) {
				require.NotContains(t, string(r.Payload), "[checked]", "the raw result is the handler's")
			}
			for _, r := range ofKind(recs, journal.KindToolProcessed) {
				require.Contains(t, string(r.Payload), "[checked]")
			}
		})
	}
}

// TestCancelAsAToolReturns: a tool that returns as the run is cancelled
// (or its session deadline passes) keeps its result, no further tool is
// called, and the run ends cancelled (REFERENCE §4.5) instead of staying
// running with no driver.
func TestCancelAsAToolReturns(t *testing.T) {
	t.Parallel()
	def := &agent.Definition{
		Name: "late", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "a", Name: "late"}, {ID: "b", Name: "count"}}}, {Text: "done"},
		}},
		Tools: []agent.ToolDef{
			{Config: tool.Config{Name: "late", Kind: "builtin", Builtin: "meet", ReplayPolicy: "safe"}},
			{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"}},
		},
	}
	for _, tc := range []struct {
		name       string
		deadline   time.Duration // 0: cancelled through Cancel
		stopReason string
	}{
		{"cancel", 0, "cancelled"},
		{"deadline", 200 * time.Millisecond, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			started := make(chan struct{})
			var once sync.Once
			tb := setupCfg(t, func(c *hxruntime.Config) {
				c.MaxSessionDuration = tc.deadline
				c.ToolOptions.Builtins["meet"] = func(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
					once.Do(func() { close(started) })
					<-ctx.Done() // returns its result as the cancel arrives
					return tool.Outcome{Result: model.ToolResult{Content: jsonString("late but done")}}, nil
				}
			}, def)
			ctx := context.Background()
			sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
			require.NoError(t, err)
			run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
			require.NoError(t, err)
			<-started
			if tc.deadline == 0 {
				_, err := tb.rt.Cancel(ctx, sess.ID)
				require.NoError(t, err)
			}
			res := waitRun(t, tb, run.RunID)
			require.Equal(t, hxruntime.StatusCancelled, res.Status)
			require.Equal(t, tc.stopReason, *res.StopReason)
			require.Zero(t, tb.toolCalls("count"), "no tool is called after the cancel")
			require.Len(t, ofKind(journalOf(t, tb, run.RunID), journal.KindToolReturned), 1, "the late tool's result is kept")
		})
	}
}

// TestAbortOnACancelledRunAnswersOnce: cancelling answers the step's open
// tool calls; aborting the uncertain call of that cancelled run afterwards
// does not answer it a second time (REFERENCE §4.4: abort answers the open
// calls).
func TestAbortOnACancelledRunAnswersOnce(t *testing.T) {
	t.Parallel()
	def := oneCallAgent("manual-block", model.ToolCall{ID: "b", Name: "block"},
		tool.Config{Name: "block", Kind: "builtin", Builtin: "block", ReplayPolicy: "manual"})
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref()})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tb.toolCalls("block") == 1 }, 5*time.Second, 10*time.Millisecond)
	res, err := tb.rt.Cancel(ctx, sess.ID)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusCancelled, res.Status)
	require.Len(t, res.Pending, 1)
	require.Equal(t, hxruntime.ToolUncertain, res.Pending[0].Status)

	_, err = tb.rt.Resolve(ctx, hxruntime.ResolveParams{SessionID: sess.ID, ExecutionKey: res.Pending[0].ExecutionKey, Abort: true})
	require.NoError(t, err)
	row, err := tb.store.RunGet(ctx, run.RunID)
	require.NoError(t, err)
	var st struct {
		Messages []model.Message `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(row.State, &st))
	answers := 0
	for _, m := range st.Messages {
		for _, b := range m.Content {
			if b.Type == model.BlockToolResult && b.ToolUseID == "b" {
				answers++
			}
		}
	}
	require.Equal(t, 1, answers, "the tool call is answered once")
}

// TestCancelWhileAnApprovalHoldsTheLock: a cancel that comes while an
// approval holds the session's lock (driving nothing) is not dropped: it
// waits for the lock and cancels the run (REFERENCE §4.5: with no local
// task, the run is cancelled directly under the lease).
func TestCancelWhileAnApprovalHoldsTheLock(t *testing.T) {
	t.Parallel()
	def := oneCallAgent("asker", model.ToolCall{ID: "a", Name: "count", Input: json.RawMessage(`{"n":1}`)},
		tool.Config{Name: "count", Kind: "builtin", Builtin: "count", Permission: "ask"})
	tb := setup(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusAwaitingInput, res.Status)

	type result struct {
		res *hxruntime.RunResult
		err error
	}
	cancelled := make(chan result, 1)
	var once sync.Once
	tb.store.commitHook = func(cm *rtstore.Commit) {
		for _, r := range cm.Records {
			if r.Kind == journal.KindToolResolved {
				// The approval holds the lock for this commit.
				once.Do(func() {
					go func() {
						res, err := tb.rt.Cancel(ctx, sess.ID)
						cancelled <- result{res, err}
					}()
					time.Sleep(100 * time.Millisecond) // the cancel finds the lock held
				})
			}
		}
	}
	_, err = tb.rt.Approve(ctx, hxruntime.ApproveParams{SessionID: sess.ID, ExecutionKey: res.Pending[0].ExecutionKey, Allow: true})
	require.NoError(t, err)
	got := <-cancelled
	require.NoError(t, got.err)
	require.Equal(t, hxruntime.StatusCancelled, got.res.Status)
	final, err := tb.rt.GetRun(ctx, res.RunID)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusCancelled, final.Status)
	require.Zero(t, tb.toolCalls("count"))
}

// TestNotifyRunLeavesOwnDriveAlone: the database's notifications of a run
// this process drives (its own commits, coming back through LISTEN) do not
// make a waiting ?wait= request read the run again, and the run's own
// settling commit ends the wait (TestNotifyRunSkipsRunsDrivenHere: other
// runs' notifications still wake their waiters).
func TestNotifyRunLeavesOwnDriveAlone(t *testing.T) {
	t.Parallel()
	tb := setupCfg(t, func(c *hxruntime.Config) { c.WatchPoll = time.Hour }, blockerAgent())
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "blocker", Version: "v1"}})
	require.NoError(t, err)
	run, created, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	require.True(t, created)
	require.Eventually(t, func() bool { return tb.toolCalls("block") == 1 }, 10*time.Second, time.Millisecond)

	done := make(chan *hxruntime.RunResult, 1)
	go func() {
		res, err := tb.rt.WaitRun(ctx, run.RunID, time.Minute)
		assert.NoError(t, err)
		done <- res
	}()
	// The wait has read the run once and waits.
	require.Eventually(t, func() bool { return tb.store.runGets.Load() >= 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	before := tb.store.runGets.Load()
	for range 20 {
		tb.rt.NotifyRun(run.RunID)
	}
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, before, tb.store.runGets.Load(), "notifications of a run driven here made the wait read it")
	select {
	case res := <-done:
		t.Fatalf("the wait returned while the run runs: %+v", res)
	default:
	}

	_, err = tb.rt.Cancel(ctx, sess.ID)
	require.NoError(t, err)
	select {
	case res := <-done:
		require.Equal(t, hxruntime.StatusCancelled, res.Status)
	case <-time.After(10 * time.Second):
		t.Fatal("the run's settling commit did not end the wait")
	}

}
