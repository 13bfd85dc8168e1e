package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
)

// TestCrashMidStream: the crash matrix's mid-stream point. hxd exits (code
// 42) right after the first delta-only commit of a streamed model call
// (HXD_CRASH_AFTER=event: no other commit reports that kind); a fresh
// process recovers the call as one that started and never returned: the
// lost attempt gets model.failed (ProcessLost), its partial deltas stay in
// the event stream, attempt_reset follows and attempt 2, run by the new
// process, streams the whole answer (the run state keeps stream). The
// journal is gap-free and the bundle verifies.
func TestCrashMidStream(t *testing.T) {
	t.Parallel()
	const answer = "The overdue balance is 1500 dollars and it is due today."
	agents := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(agents, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(agents, "streamer.yaml"), []byte(`name: streamer
version: v1
model:
  provider: scripted
  script:
    - text: "`+answer+`"
      usage: {input_tokens: 12, output_tokens: 9}
`), 0o600))
	db := filepath.Join(t.TempDir(), "hxd.db")

	p1 := startHxd(t, "process 1", db, agents, "HXD_CRASH_AFTER=event")
	sid := p1.createSession("streamer")
	code, raw, err := p1.try(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs",
		map[string]any{"message": "how much is overdue?", "request_id": "crash-stream", "stream": true})
	if err == nil { // the exit may race the answer
		require.Equal(t, http.StatusAccepted, code, string(raw))
	}
	require.Equal(t, 42, p1.waitExit(15*time.Second), "HXD_CRASH_AFTER=event exit code")
	require.Contains(t, p1.log(), "HXD_CRASH_AFTER: exiting after boundary commit")

	p := startHxd(t, "final process", db, agents)
	rid := p.latestRunID(sid)
	run := p.settle(rid)
	require.Equal(t, "completed", run["status"], run)
	require.Equal(t, answer, run["output"], run)
	require.Equal(t, true, run["usage_incomplete"], "a crashed attempt makes usage incomplete")

	// Events: attempt 1's partial deltas, the reset, attempt 2's deltas.
	code, m := p.call(http.MethodGet, "/runs/"+url.PathEscape(rid)+"/events?after=0", nil)
	require.Equal(t, http.StatusOK, code, m)
	texts := map[string]string{}
	reset := false
	for _, e := range m["events"].([]any) {
		ev := e.(map[string]any)
		switch ev["type"] {
		case "text_delta":
			at := ev["attempt_id"].(string)
			require.Equal(t, at == "2", reset, "attempt %s's delta vs attempt_reset", at)
			texts[at] += ev["data"].(string)
		case "attempt_reset":
			require.Equal(t, map[string]any{"attempt": float64(1)}, ev["data"])
			reset = true
		}
	}
	require.True(t, reset, "no attempt_reset")
	require.NotEmpty(t, texts["1"], "attempt 1's committed delta stays")
	require.Contains(t, answer, texts["1"])
	require.Equal(t, answer, texts["2"])
	p.stop()

	// Journal: gap-free (readJournal), the bundle verifies, the lost
	// attempt is closed by model.failed ProcessLost and never completed.
	recs := readJournal(t, db, rid)
	trace := boundaryTrace(recs)
	failed := ofKind(recs, journal.KindModelFailed, "")
	require.Len(t, failed, 1, trace)
	require.Equal(t, "ProcessLost", payloadField(t, failed[0], "type"), string(failed[0].Payload))
	require.Equal(t, "1/1", failed[0].StepID+"/"+failed[0].AttemptID)
	require.Zero(t, count(trace, "model.completed@1/1"), trace)
	require.Equal(t, 1, count(trace, "model.completed@1/2"), trace)
	require.Len(t, ofKind(recs, journal.KindRunResumed, ""), 1, trace)
	// The delta records of attempt 1 precede model.failed, with no
	// checkpoint after model.started's before them.
	var seen []string
	for _, r := range recs {
		k := string(r.Kind)
		if r.Kind == journal.KindEvent {
			var ev map[string]any
			require.NoError(t, json.Unmarshal(r.Payload, &ev))
			k += ":" + ev["type"].(string) + "@" + r.AttemptID
		}
		seen = append(seen, k)
	}
	started := indexOfKind(seen, "model.started")
	require.Equal(t, "checkpoint", seen[started+1], seen)
	require.Equal(t, "event:text_delta@1", seen[started+2], seen)
	// The resumed run streams too: attempt 2's deltas are committed
	// between its model.started and its model.response.
	retried := started + 1 + indexOfKind(seen[started+1:], "model.started")
	response := indexOfKind(seen, "model.response")
	require.Greater(t, response, retried, seen)
	require.Contains(t, seen[retried:response], "event:text_delta@2", seen)
}
