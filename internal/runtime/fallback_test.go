package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/hxbundle"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/store/sqlite"
	"hxd/internal/tool"
)

// countTool is the builtin "count" tool of setup.
var countTool = agent.ToolDef{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"}}

// modelTries lists the model.started records of recs as
// "step/attempt model".
func modelTries(t *testing.T, recs []journal.Record) []string {
	t.Helper()
	var out []string
	for _, r := range ofKind(recs, journal.KindModelStarted) {
		var req struct {
			Model string `json:"model"`
		}
		require.NoError(t, json.Unmarshal(r.Payload, &req))
		out = append(out, r.StepID+"/"+r.AttemptID+" "+req.Model)
	}
	return out
}

// answeredBy lists the model.response records of recs as
// "step/attempt provider model" (empty names when the keys are absent).
func answeredBy(t *testing.T, recs []journal.Record) []string {
	t.Helper()
	var out []string
	for _, r := range ofKind(recs, journal.KindModelResponse) {
		var p map[string]any
		require.NoError(t, json.Unmarshal(r.Payload, &p))
		out = append(out, fmt.Sprintf("%s/%s %v %v", r.StepID, r.AttemptID, p["provider"], p["model"]))
	}
	return out
}

// eventsOfType lists the events of one type as "step/attempt data".
func eventsOfType(evs []hxruntime.RunEvent, typ string) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev.StepID+"/"+ev.AttemptID+" "+string(ev.Data))
		}
	}
	return out
}

// TestFallbackChainAfterRetries (issue 20, item 4): a model whose
// transient failures used up the retry policy hands the step to the next
// model of the chain; each try is an attempt of its own, numbered on, its
// model.started naming its model; model.response records the provider
// and model that answered; the next step starts again at the primary; the
// run's usage sums its attempts'.
func TestFallbackChainAfterRetries(t *testing.T) {
	t.Parallel()
	u1 := &model.Usage{InputTokens: 100, OutputTokens: 10, CacheReadInputTokens: 7}
	u2 := &model.Usage{InputTokens: 50, OutputTokens: 5, CacheCreationInputTokens: 3}
	// leak answers with text: a tool result the bundle verifier takes.
	call := model.ToolCall{ID: "c1", Name: "leak", Input: json.RawMessage(`{}`)}
	def := &agent.Definition{
		Name: "chain", Version: "v1",
		Model: model.Config{Provider: "scripted", Model: "model-a", Script: []model.ScriptStep{
			{Text: "never", FailAttempts: 100},
			{Text: "done", Usage: u2},
		}, Fallback: []model.Config{
			{Provider: "scripted", Model: "model-b", Script: []model.ScriptStep{{Text: "never", FailAttempts: 100}, {Text: "never"}}},
			// Attempts are numbered per step across the chain: 5 fails, 6 answers.
			{Provider: "scripted", Model: "model-c", Script: []model.ScriptStep{{ToolCalls: []model.ToolCall{call}, FailAttempts: 5, Usage: u1}, {Text: "never"}}},
		}},
		Retry: &agent.RetryPolicy{Attempts: 2, BackoffSeconds: 0.01, MaxBackoffSeconds: 0.01},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "leak", Kind: "builtin", Builtin: "leak", ReplayPolicy: "safe"}}},
	}
	tb := setup(t, def)
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "done", *res.Output)

	recs := journalOf(t, tb, res.RunID)
	require.Equal(t, []string{
		"1/1 model-a", "1/2 model-a", "1/3 model-b", "1/4 model-b", "1/5 model-c", "1/6 model-c",
		"2/1 model-a",
	}, modelTries(t, recs))
	require.Len(t, ofKind(recs, journal.KindModelFailed), 5)
	require.Equal(t, []string{"1/6 scripted model-c", "2/1 scripted model-a"}, answeredBy(t, recs))

	evs := eventsOf(t, tb, res.RunID)
	require.Equal(t, []string{
		`1/1 {"attempt":1}`, `1/2 {"attempt":2}`, `1/3 {"attempt":3}`, `1/4 {"attempt":4}`, `1/5 {"attempt":5}`,
	}, eventsOfType(evs, hxruntime.EventAttemptReset), "attempt_reset as for any retry")
	var waits []string
	for _, w := range eventsOfType(evs, hxruntime.EventWaiting) {
		waits = append(waits, strings.Fields(w)[0])
	}
	require.Equal(t, []string{"1/1", "1/3", "1/5"}, waits, "a retry on the same model waits; a move to the next model does not")

	requireRunUsage(t, tb, res.RunID, u1.Add(*u2), true)

	// The run exports as a valid, complete bundle: the verifier takes the
	// extra keys of model.response.
	ctx := context.Background()
	require.NoError(t, tb.rt.Export(ctx, res.RunID, func(inc *hxruntime.Incident) error {
		a, err := hxbundle.Build(ctx, hxbundle.RunInfo{RunID: inc.RunID, SessionID: inc.SessionID, Status: string(inc.Status), Phase: string(inc.Phase)},
			inc, hxbundle.Policy{IncludePayloads: true}, t.TempDir())
		require.NoError(t, err)
		defer func() { require.NoError(t, a.Close()) }()
		rep := hxbundle.Verify(a.ReaderAt(), a.Size(), hxbundle.DefaultLimits)
		require.True(t, rep.Valid, "%+v", rep)
		require.True(t, rep.Complete, "%+v", rep)
		return nil
	}))
}

// TestNoFallbackResponseUnchanged: an agent without a fallback list
// records model.response as before, without provider and model keys.
func TestNoFallbackResponseUnchanged(t *testing.T) {
	t.Parallel()
	def := &agent.Definition{Name: "plain", Version: "v1",
		Model: model.Config{Provider: "scripted", Model: "m", Script: []model.ScriptStep{{Text: "hi", Usage: &model.Usage{InputTokens: 1}}}}}
	tb := setup(t, def)
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status, "%+v", res.Error)
	resp := ofKind(journalOf(t, tb, res.RunID), journal.KindModelResponse)
	require.Len(t, resp, 1)
	require.JSONEq(t, `{"text":"hi","thinking":"","tool_calls":null,"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":0,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}`,
		string(resp[0].Payload))
}

// TestFallbackNotTriedAfterPermanentFailure: a permanent failure of the
// primary model fails the run as without a chain; the fallback is never
// called.
func TestFallbackNotTriedAfterPermanentFailure(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"bad","type":"invalid_request_error"}}`))
	}))
	t.Cleanup(srv.Close)
	def := &agent.Definition{
		Name: "perm", Version: "v1",
		Model: model.Config{Provider: "openai", Model: "gpt-x", BaseURL: srv.URL, Fallback: []model.Config{
			{Provider: "scripted", Model: "backup", Script: []model.ScriptStep{{Text: "from the fallback"}}},
		}},
		Retry: &agent.RetryPolicy{Attempts: 3, BackoffSeconds: 0.01, MaxBackoffSeconds: 0.01},
	}
	tb := setup(t, def)
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusFailed, res.Status)
	require.NotNil(t, res.Error)
	require.Equal(t, model.FailureBadRequest, res.Error.Type)
	require.Equal(t, int32(1), hits.Load())
	recs := journalOf(t, tb, res.RunID)
	require.Equal(t, []string{"1/1 gpt-x"}, modelTries(t, recs))
	require.Empty(t, ofKind(recs, journal.KindModelResponse))
	srv.CloseClientConnections()
}

// TestFallbackResumesOnStoredModel: a process lost while the fallback
// model's call is in flight leaves the chain position in the stored
// state; the resumed run goes on with the fallback (its lost attempt
// closed, a new one numbered on), never calling the primary again.
func TestFallbackResumesOnStoredModel(t *testing.T) {
	t.Parallel()
	var primaryHits atomic.Int32
	primary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		primaryHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"message":"down","type":"server_error"}}`))
	}))
	t.Cleanup(primary.Close)
	var fbHits atomic.Int32
	inFlight := make(chan struct{})
	fallback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read to its end, so the server notices the client going.
		_, _ = io.Copy(io.Discard, r.Body)
		if fbHits.Add(1) == 1 {
			close(inFlight)
			<-r.Context().Done() // held until the process goes
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"backup","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"from the fallback"}}],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}`))
	}))
	t.Cleanup(fallback.Close)
	def := &agent.Definition{
		Name: "resume", Version: "v1",
		Model: model.Config{Provider: "openai", Model: "primary", BaseURL: primary.URL, Fallback: []model.Config{
			{Provider: "openai", Model: "backup", BaseURL: fallback.URL},
		}},
		Retry: &agent.RetryPolicy{Attempts: 2, BackoffSeconds: 0.01, MaxBackoffSeconds: 0.01},
	}
	a := setup(t, def)
	ctx := context.Background()
	sess, err := a.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	run, _, err := a.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)
	// The run must reach the fallback's call, not settle before it.
	wctx, stopWait := context.WithCancel(ctx)
	settled := make(chan *hxruntime.RunResult, 1)
	go func() {
		res, _ := a.rt.WaitRun(wctx, run.RunID, time.Hour)
		settled <- res
	}()
	select {
	case <-inFlight:
		stopWait()
		<-settled
	case res := <-settled:
		stopWait()
		require.FailNow(t, "the run settled without calling the fallback", "%+v", res)
	}
	// The process goes while the fallback's call is in flight: a stop that
	// does not wait for the drive leaves storage as last committed.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, a.rt.Stop(gone))
	require.Equal(t, int32(2), primaryHits.Load())

	// Another process on the same database resumes it.
	st, err := sqlite.Open(ctx, sqlite.Config{Path: a.path, Logger: hxtest.Logger(t)})
	require.NoError(t, err)
	reg := agent.NewRegistry()
	require.NoError(t, reg.Register(def))
	b, err := hxruntime.New(hxruntime.Config{Store: st, Agents: reg, Logger: hxtest.Logger(t),
		SleepFunc: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Stop(context.Background()))
		require.NoError(t, st.Close())
	})
	n, err := b.ResumeInterrupted(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	res, err := b.WaitRun(ctx, run.RunID, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, hxruntime.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "from the fallback", *res.Output)
	require.Equal(t, int32(2), primaryHits.Load(), "the primary is not called again")
	require.Equal(t, int32(2), fbHits.Load())

	recs, err := st.JournalList(ctx, run.RunID, 0, 1000)
	require.NoError(t, err)
	require.Equal(t, []string{"1/1 primary", "1/2 primary", "1/3 backup", "1/4 backup"}, modelTries(t, recs))
	var lost []string
	for _, r := range ofKind(recs, journal.KindModelFailed) {
		if strings.Contains(string(r.Payload), "ProcessLost") {
			lost = append(lost, r.AttemptID)
		}
	}
	require.Equal(t, []string{"3"}, lost, "the lost attempt is closed")
	require.Equal(t, []string{"1/4 openai backup"}, answeredBy(t, recs))
	primary.CloseClientConnections()
	fallback.CloseClientConnections()
}

// Anthropic Messages stream fixtures (the documented event sequence).
func antEvent(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

// thinkingToolStream answers with signed thinking, redacted thinking,
// text and a call of the count tool.
var thinkingToolStream = antEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}}`) +
	antEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`) +
	antEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"count it"}}`) +
	antEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG-secret-thinking"}}`) +
	antEvent("content_block_stop", `{"type":"content_block_stop","index":0}`) +
	antEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"REDACTED-blob"}}`) +
	antEvent("content_block_stop", `{"type":"content_block_stop","index":1}`) +
	antEvent("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`) +
	antEvent("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Counting."}}`) +
	antEvent("content_block_stop", `{"type":"content_block_stop","index":2}`) +
	antEvent("content_block_start", `{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_01","name":"count","input":{}}}`) +
	antEvent("content_block_delta", `{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"n\":1}"}}`) +
	antEvent("content_block_stop", `{"type":"content_block_stop","index":3}`) +
	antEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":30}}`) +
	antEvent("message_stop", `{"type":"message_stop"}`)

// TestFallbackSwitchesProvider (issue 20: "a fallback that switches
// provider"): Claude answers the first step with signed and redacted
// thinking and a tool call, then is overloaded (529) until its retries are
// used up; the OpenAI fallback answers the second step, its request
// holding the conversation without the thinking blocks.
func TestFallbackSwitchesProvider(t *testing.T) {
	t.Parallel()
	var antHits atomic.Int32
	ant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if antHits.Add(1) == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, thinkingToolStream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	}))
	t.Cleanup(ant.Close)
	var (
		mu      sync.Mutex
		oaiBody []byte
	)
	oai := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		oaiBody = body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"counted"}}],"usage":{"prompt_tokens":40,"completion_tokens":2,"total_tokens":42}}`))
	}))
	t.Cleanup(oai.Close)
	def := &agent.Definition{
		Name: "switch", Version: "v1",
		Model: model.Config{Provider: "anthropic", Model: "claude-x", BaseURL: ant.URL, MaxTokens: 2048,
			Thinking: &model.Thinking{BudgetTokens: 1024},
			Fallback: []model.Config{{Provider: "openai", Model: "gpt-x", BaseURL: oai.URL}}},
		Retry: &agent.RetryPolicy{Attempts: 2, BackoffSeconds: 0.01, MaxBackoffSeconds: 0.01},
		Tools: []agent.ToolDef{countTool},
	}
	tb := setup(t, def)
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "counted", *res.Output)
	require.Equal(t, int32(3), antHits.Load())

	recs := journalOf(t, tb, res.RunID)
	require.Equal(t, []string{"1/1 claude-x", "2/1 claude-x", "2/2 claude-x", "2/3 gpt-x"}, modelTries(t, recs))
	require.Equal(t, []string{"1/1 anthropic claude-x", "2/3 openai gpt-x"}, answeredBy(t, recs))
	require.Equal(t, int64(20+40), res.Usage.InputTokens)

	mu.Lock()
	defer mu.Unlock()
	var req struct {
		Model    string           `json:"model"`
		Messages []map[string]any `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(oaiBody, &req))
	require.Equal(t, "gpt-x", req.Model)
	msgs, err := json.Marshal(req.Messages)
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"role":"user","content":"go"},
		{"role":"assistant","content":"Counting.","tool_calls":[{"id":"toolu_01","type":"function","function":{"name":"count","arguments":"{\"n\":1}"}}]},
		{"role":"tool","content":"{\"n\":1}","tool_call_id":"toolu_01"}
	]`, string(msgs))
	for _, native := range []string{"SIG-secret-thinking", "REDACTED-blob", "count it"} {
		require.NotContains(t, string(oaiBody), native, "no Anthropic-native block reaches OpenAI")
	}
	ant.CloseClientConnections()
	oai.CloseClientConnections()
}

// TestToolResultEventIsText: a tool answering with a JSON object (echo
// returns its input) shows it on the tool_result event as text, as the
// reference's ToolResult holds it, so the run's bundle verifies; the
// journal keeps the object.
func TestToolResultEventIsText(t *testing.T) {
	t.Parallel()
	call := model.ToolCall{ID: "c1", Name: "echo", Input: json.RawMessage(`{"n": 1, "tags": ["a"]}`)}
	def := &agent.Definition{
		Name: "object-result", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{{ToolCalls: []model.ToolCall{call}}, {Text: "done"}}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "echo", Kind: "builtin", ReplayPolicy: "safe"}}},
	}
	tb := setup(t, def)
	sess, err := tb.rt.CreateSession(context.Background(), hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	res := runToEnd(t, tb, sess.ID, "go")
	require.Equal(t, hxruntime.StatusCompleted, res.Status, "%+v", res.Error)

	var results []json.RawMessage
	for _, ev := range eventsOf(t, tb, res.RunID) {
		if ev.Type == hxruntime.EventToolResult {
			var r model.ToolResult
			require.NoError(t, json.Unmarshal(ev.Data, &r))
			results = append(results, r.Content)
		}
	}
	require.Equal(t, []json.RawMessage{json.RawMessage(`"{\"n\":1,\"tags\":[\"a\"]}"`)}, results)
	for _, rec := range journalOf(t, tb, res.RunID) {
		if rec.Kind == journal.KindToolReturned {
			require.JSONEq(t, `{"tool_call_id":"c1","content":{"n":1,"tags":["a"]},"is_error":false}`, string(rec.Payload))
		}
	}

	ctx := context.Background()
	require.NoError(t, tb.rt.Export(ctx, res.RunID, func(inc *hxruntime.Incident) error {
		a, err := hxbundle.Build(ctx, hxbundle.RunInfo{RunID: inc.RunID, SessionID: inc.SessionID, Status: string(inc.Status), Phase: string(inc.Phase)},
			inc, hxbundle.Policy{IncludePayloads: true}, t.TempDir())
		require.NoError(t, err)
		defer func() { require.NoError(t, a.Close()) }()
		rep := hxbundle.Verify(a.ReaderAt(), a.Size(), hxbundle.DefaultLimits)
		require.True(t, rep.Valid, "%+v", rep)
		return nil
	}))
}
