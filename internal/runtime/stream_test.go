package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/journal"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
)

// commitLog notes, per commit the store is asked for, whether it was
// delta-only and the event types it held.
type commitLog struct {
	mu      sync.Mutex
	commits []loggedCommit
}

type loggedCommit struct {
	deltaOnly bool
	events    []string
}

func (l *commitLog) hook(cm *rtstore.Commit) {
	lc := loggedCommit{deltaOnly: cm.DeltaOnly}
	for _, pe := range cm.Events {
		lc.events = append(lc.events, pe.Event.Type)
	}
	l.mu.Lock()
	l.commits = append(l.commits, lc)
	l.mu.Unlock()
}

// deltaEvents returns the event types of delta-only commits and of the
// others.
func (l *commitLog) split() (delta, other []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.commits {
		if c.deltaOnly {
			delta = append(delta, c.events...)
		} else {
			other = append(other, c.events...)
		}
	}
	return delta, other
}

func streamAgent(name string, steps []model.ScriptStep, mw ...agent.Middleware) *agent.Definition {
	return &agent.Definition{
		Name: name, Version: "v1",
		Model:              model.Config{Provider: "scripted", Script: steps},
		ResponseMiddleware: mw,
	}
}

// submitStream starts a recording session of def and runs msg with stream
// to its end.
func submitStream(t *testing.T, tb *testBundle, def *agent.Definition, stream bool) *hxruntime.RunResult {
	t.Helper()
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	run, created, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go"), Stream: stream})
	require.NoError(t, err)
	require.True(t, created)
	return waitRun(t, tb, run.RunID)
}

// deltaText concatenates the data of the events of typ (of attempt, or
// of any attempt when attempt is "").
func deltaText(t *testing.T, evs []hxruntime.RunEvent, typ, attempt string) (string, int) {
	t.Helper()
	var b strings.Builder
	n := 0
	for _, ev := range evs {
		if ev.Type != typ || (attempt != "" && ev.AttemptID != attempt) {
			continue
		}
		var s string
		require.NoError(t, json.Unmarshal(ev.Data, &s))
		b.WriteString(s)
		n++
	}
	return b.String(), n
}

func eventTypes(evs []hxruntime.RunEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// TestStreamTextDeltas: a streamed run commits its answer's pieces as
// text_delta (and thinking_delta) events through delta-only commits while
// the call runs, before model.completed; text_complete follows with the
// full text, and the deltas' concatenation is the output.
func TestStreamTextDeltas(t *testing.T) {
	t.Parallel()
	const answer = "The overdue balance is 1500 dollars."
	def := streamAgent("streamer", []model.ScriptStep{{Text: answer, Thinking: "sum the invoices"}})
	tb := setup(t, def)
	var log commitLog
	tb.store.commitHook = log.hook
	res := submitStream(t, tb, def, true)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, answer, *res.Output)

	evs := eventsOf(t, tb, res.RunID)
	text, n := deltaText(t, evs, hxruntime.EventTextDelta, "1")
	require.Equal(t, answer, text)
	require.GreaterOrEqual(t, n, 1)
	thinking, _ := deltaText(t, evs, hxruntime.EventThinkingDelta, "1")
	require.Equal(t, "sum the invoices", thinking)
	types := eventTypes(evs)
	require.Equal(t, []string{"text_complete", "turn_complete", "run_result"}, types[len(types)-3:])
	for _, typ := range types[:len(types)-3] {
		require.Contains(t, []string{"thinking_delta", "text_delta"}, typ)
	}
	// Thinking first, then the text.
	require.Equal(t, "thinking_delta", types[0])

	// Every delta went out in a delta-only commit, nothing else did.
	delta, other := log.split()
	require.NotContains(t, other, "text_delta")
	require.NotContains(t, other, "thinking_delta")
	require.Len(t, delta, len(types)-3)
	for _, typ := range delta {
		require.Contains(t, []string{"thinking_delta", "text_delta"}, typ)
	}

	// Journal: the delta event records sit between model.started's
	// checkpoint and model.response, with no checkpoint of their own.
	recs := journalOf(t, tb, res.RunID)
	var kinds []string
	for _, r := range recs {
		k := string(r.Kind)
		if r.Kind == journal.KindEvent {
			var ev hxruntime.RunEvent
			require.NoError(t, json.Unmarshal(r.Payload, &ev))
			k = "event:" + ev.Type
		}
		kinds = append(kinds, k)
	}
	start := indexOf(kinds, "model.started")
	resp := indexOf(kinds, "model.response")
	require.Equal(t, "checkpoint", kinds[start+1], kinds)
	between := kinds[start+2 : resp]
	require.Len(t, between, len(delta), kinds)
	for _, k := range between {
		require.Contains(t, []string{"event:thinking_delta", "event:text_delta"}, k, kinds)
	}
	require.Equal(t, []string{"model.response", "model.processed", "model.completed"}, kinds[resp:resp+3])
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// TestStreamWithResponseMiddleware: with response middleware nothing
// streams: one text_delta after the call holds the post-middleware text.
func TestStreamWithResponseMiddleware(t *testing.T) {
	t.Parallel()
	def := streamAgent("streamer-mw", []model.ScriptStep{{Text: "the SECRET answer is here"}},
		agent.Middleware{RegexReplace: &agent.RegexReplace{Pattern: "SECRET", Replace: "[hidden]"}})
	tb := setup(t, def)
	var log commitLog
	tb.store.commitHook = log.hook
	res := submitStream(t, tb, def, true)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	evs := eventsOf(t, tb, res.RunID)
	text, n := deltaText(t, evs, hxruntime.EventTextDelta, "")
	require.Equal(t, 1, n)
	require.Equal(t, "the [hidden] answer is here", text)
	require.Equal(t, []string{"text_delta", "text_complete", "turn_complete", "run_result"}, eventTypes(evs))
	delta, _ := log.split()
	require.Empty(t, delta, "no delta-only commit with response middleware")
}

// TestStreamOffUnchanged: without stream the answer is one text_delta
// committed with the call's outcome, and no delta-only commit happens.
func TestStreamOffUnchanged(t *testing.T) {
	t.Parallel()
	def := streamAgent("streamer-off", []model.ScriptStep{{Text: "one two three", Thinking: "hm"}})
	tb := setup(t, def)
	var log commitLog
	tb.store.commitHook = log.hook
	res := submitStream(t, tb, def, false)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, []string{"text_delta", "text_complete", "turn_complete", "run_result"}, eventTypes(eventsOf(t, tb, res.RunID)))
	delta, _ := log.split()
	require.Empty(t, delta)
	row, err := tb.store.RunGet(context.Background(), res.RunID)
	require.NoError(t, err)
	require.NotContains(t, string(row.State), `"stream"`, "a run that does not stream stores the state it always did")
}

// TestStreamBrokenMidAnswer: a stream that breaks after two pieces fails
// the attempt as transient; its partial deltas stay, attempt_reset
// follows, and the retry streams the whole answer as attempt 2.
func TestStreamBrokenMidAnswer(t *testing.T) {
	t.Parallel()
	def := streamAgent("streamer-broken", []model.ScriptStep{{Text: "one two three four", FailAttempts: 1, FailAfterDeltas: 2}})
	tb := setup(t, def)
	res := submitStream(t, tb, def, true)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	require.Equal(t, "one two three four", *res.Output)
	require.True(t, res.UsageIncomplete)

	evs := eventsOf(t, tb, res.RunID)
	partial, _ := deltaText(t, evs, hxruntime.EventTextDelta, "1")
	require.Equal(t, "one two ", partial)
	full, _ := deltaText(t, evs, hxruntime.EventTextDelta, "2")
	require.Equal(t, "one two three four", full)
	reset := -1
	for i, ev := range evs {
		switch {
		case ev.Type == hxruntime.EventAttemptReset:
			require.JSONEq(t, `{"attempt":1}`, string(ev.Data))
			reset = i
		case ev.Type == hxruntime.EventTextDelta && ev.AttemptID == "1":
			require.Equal(t, -1, reset, "attempt 1's deltas come before the reset")
		case ev.Type == hxruntime.EventTextDelta && ev.AttemptID == "2":
			require.NotEqual(t, -1, reset, "attempt 2's deltas come after the reset")
		}
	}
	require.NotEqual(t, -1, reset)

	recs := journalOf(t, tb, res.RunID)
	require.Equal(t, []boundary{
		{"run.started", "0", "0"},
		{"model.started", "1", "1"},
		{"model.failed", "1", "1"},
		{"model.started", "1", "2"},
		{"model.response", "1", "2"},
		{"model.processed", "1", "2"},
		{"model.completed", "1", "2"},
	}, boundaries(recs))
}

// failingDeltas refuses every delta-only commit for good.
type failingDeltas struct {
	rtstore.Store
}

var errDeltaRefused = errors.New("delta commit refused")

func (f failingDeltas) Commit(ctx context.Context, cm *rtstore.Commit) error {
	if cm.DeltaOnly {
		return errDeltaRefused
	}
	return f.Store.Commit(ctx, cm)
}

// TestStreamDeltaCommitFailure: a delta commit that fails for good stops
// the call and fails the run as any failed commit does (RecordingError);
// the deltas it held are written with the failure, not lost.
func TestStreamDeltaCommitFailure(t *testing.T) {
	t.Parallel()
	def := streamAgent("streamer-fail", []model.ScriptStep{{Text: "never quite streamed"}})
	tb := setupCfg(t, func(c *hxruntime.Config) { c.Store = failingDeltas{c.Store} }, def)
	res := submitStream(t, tb, def, true)
	require.Equal(t, hxruntime.StatusFailed, res.Status)
	require.NotNil(t, res.Error)
	require.Equal(t, "RecordingError", res.Error.Type)
	evs := eventsOf(t, tb, res.RunID)
	text, _ := deltaText(t, evs, hxruntime.EventTextDelta, "1")
	require.NotEmpty(t, text)
	require.True(t, strings.HasPrefix("never quite streamed", text), text)
	require.NotContains(t, eventTypes(evs), "text_complete")
	recs := journalOf(t, tb, res.RunID)
	require.Len(t, ofKind(recs, journal.KindModelFailed), 1)
	require.Empty(t, ofKind(recs, journal.KindModelResponse))
}

// TestStreamUnrecorded: a session that does not record streams too: its
// delta-only commits carry the events alone, and no journal is written.
func TestStreamUnrecorded(t *testing.T) {
	t.Parallel()
	def := streamAgent("streamer-unrecorded", []model.ScriptStep{{Text: "quiet but streamed"}})
	tb := setup(t, def)
	var log commitLog
	tb.store.commitHook = log.hook
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(false)})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go"), Stream: true})
	require.NoError(t, err)
	res := waitRun(t, tb, run.RunID)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	text, _ := deltaText(t, eventsOf(t, tb, res.RunID), hxruntime.EventTextDelta, "1")
	require.Equal(t, "quiet but streamed", text)
	delta, _ := log.split()
	require.NotEmpty(t, delta)
	recs, err := tb.store.JournalList(ctx, res.RunID, 0, 1000)
	require.NoError(t, err)
	require.Empty(t, recs)
}
