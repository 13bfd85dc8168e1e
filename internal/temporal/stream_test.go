package temporal

import (
	"encoding/json"
	"testing"
	"time"

	"hxd/internal/agent"
	"hxd/internal/model"
	"hxd/internal/runtime"
)

// submitStream submits message as a streamed run at workflow time at.
func (h *harness) submitStream(at time.Duration, requestID, runID, message string) *updateResult {
	msg, _ := json.Marshal(message)
	return h.update(at, UpdateSubmit, requestID, SubmitRequest{Message: msg, RequestID: requestID, RunID: runID, Stream: true})
}

// deltas returns the events of run of type typ as "attempt:text".
func (h *harness) deltas(runID string, types ...string) []string {
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	var out []string
	for _, e := range h.sink.events[runID] {
		for _, typ := range types {
			if e.Type != typ {
				continue
			}
			var s string
			_ = json.Unmarshal(e.Data, &s)
			out = append(out, e.Type+"@"+e.AttemptID+":"+s)
		}
	}
	return out
}

// TestStreamedModelPublishesDeltas: a streamed run's model activity
// publishes each piece of the answer as it arrives (thinking first), then
// text_complete; the model input carries the stream flag.
func TestStreamedModelPublishesDeltas(t *testing.T) {
	def := scriptedAgent("streamer", nil, model.ScriptStep{Text: "one two three", Thinking: "hm ok"})
	h := newHarness(t, def, harnessOpts{})
	h.submitStream(time.Second, "req-1", "run-1", "count")
	h.run(time.Hour)
	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	if !h.lastModelInput().Stream {
		t.Fatal("model input without stream")
	}
	got := h.deltas("run-1", runtime.EventTextDelta, runtime.EventThinkingDelta, runtime.EventTextComplete)
	want := []string{
		"thinking_delta@1:hm ", "thinking_delta@1:ok",
		"text_delta@1:one ", "text_delta@1:two ", "text_delta@1:three",
		"text_complete@1:one two three",
	}
	if len(got) != len(want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events = %q, want %q", got, want)
		}
	}
}

// TestStreamedModelBrokenStreamRetries: a stream that breaks after one
// piece leaves that piece published; the retried activity publishes
// attempt_reset, then attempt 2's pieces.
func TestStreamedModelBrokenStreamRetries(t *testing.T) {
	def := scriptedAgent("breaker", nil, model.ScriptStep{Text: "one two", FailAttempts: 1, FailAfterDeltas: 1})
	def.Retry = &agent.RetryPolicy{Attempts: 2, BackoffSeconds: 0.1, MaxBackoffSeconds: 1}
	h := newHarness(t, def, harnessOpts{})
	h.submitStream(time.Second, "req-1", "run-1", "count")
	h.run(time.Hour)
	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	got := h.deltas("run-1", runtime.EventTextDelta, runtime.EventAttemptReset)
	want := []string{"text_delta@1:one ", "attempt_reset@2:", "text_delta@2:one ", "text_delta@2:two"}
	if len(got) != len(want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events = %q, want %q", got, want)
		}
	}
}

// TestStreamedModelWithMiddlewareBuffers: with response middleware the
// activity publishes one text_delta with the post-middleware text.
func TestStreamedModelWithMiddlewareBuffers(t *testing.T) {
	def := scriptedAgent("mw", nil, model.ScriptStep{Text: "one two"})
	suffix := " (checked)"
	def.ResponseMiddleware = []agent.Middleware{{AppendText: &suffix}}
	h := newHarness(t, def, harnessOpts{})
	h.submitStream(time.Second, "req-1", "run-1", "count")
	h.run(time.Hour)
	assertStatus(t, h.getRun("run-1"), runtime.StatusCompleted)
	got := h.deltas("run-1", runtime.EventTextDelta)
	if len(got) != 1 || got[0] != "text_delta@1:one two (checked)" {
		t.Fatalf("text deltas = %q", got)
	}
}
