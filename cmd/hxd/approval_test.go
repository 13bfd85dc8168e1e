package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/journal"
	"hxd/internal/store/sqlite"
)

// Approvals, recovery decisions, resume, pause and the session deadline
// over HTTP (REFERENCE §4.4, §4.5; DESIGN §4), against an in-process
// `hxd serve` with the agents below.

// apAgents are the agent files of these tests, by file name.
var apAgents = map[string]string{
	// Three calls needing approval in step 1, an answer in step 2.
	"approver.yaml": `name: approver
version: v1
model:
  provider: scripted
  script:
    - tool_calls:
        - {id: a, name: echo, input: {text: one}}
        - {id: b, name: echo, input: {text: two}}
        - {id: c, name: echo, input: {text: three}}
    - text: done
tools:
  - name: echo
    kind: builtin
    replay_policy: safe
    permission: ask
    input_schema: {type: object, properties: {text: {type: string}}}
`,
	// A client tool: its result is posted with resolve {result}.
	"asker.yaml": `name: asker
version: v1
model:
  provider: scripted
  script:
    - tool_calls: [{id: q, name: lookup, input: {question: meaning}}]
    - text: The answer is in.
tools:
  - name: lookup
    kind: client
    input_schema: {type: object, properties: {question: {type: string}}}
`,
	"dozer.yaml":     napAgent("dozer", 0.4, ""),
	"insomniac.yaml": napAgent("insomniac", 30, ""),
	"deadline.yaml":  napAgent("deadline", 30, "max_session_duration_seconds: 1\n"),
	"quick.yaml": `name: quick
version: v1
model:
  provider: scripted
  script:
    - text: hi
`,
}

// napAgent sleeps `seconds` in step 1 (a safe tool) and answers "awake".
func napAgent(name string, seconds float64, extra string) string {
	return "name: " + name + "\nversion: v1\n" + extra + `model:
  provider: scripted
  script:
    - tool_calls: [{id: nap, name: sleep, input: {seconds: ` + strconv.FormatFloat(seconds, 'f', -1, 64) + `}}]
    - text: awake
tools:
  - name: sleep
    kind: builtin
    replay_policy: safe
    input_schema: {type: object, properties: {seconds: {type: number}}}
`
}

// apStartDaemon runs `hxd serve` in process on 127.0.0.1:0 with apAgents.
func apStartDaemon(t *testing.T) *daemon {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	for name, body := range apAgents {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
	}
	db := filepath.Join(t.TempDir(), "hxd.db")
	ctx, cancel := context.WithCancel(context.Background())
	addrCh, errCh := make(chan string, 1), make(chan error, 1)
	args := []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--agents", dir,
		"--workdir", t.TempDir(), "--shutdown-timeout", "200ms"}
	go func() {
		errCh <- run(ctx, args, env{
			getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard,
			onListen: func(addr string) { addrCh <- addr },
		})
	}()
	d := &daemon{db: db}
	select {
	case addr := <-addrCh:
		d.base = "http://" + addr
	case err := <-errCh:
		cancel()
		t.Fatalf("hxd serve exited: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("hxd serve did not start")
	}
	stopped := false
	d.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-errCh)
		}
	}
	t.Cleanup(d.stop)
	return d
}

// apSession creates a session of agent and returns its id.
func apSession(t *testing.T, d *daemon, agentName string, recording bool) string {
	t.Helper()
	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{
		"agent": map[string]string{"name": agentName, "version": "v1"}, "recording": recording,
	})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	return decode(t, body)["session_id"].(string)
}

// apSubmit starts a run (waiting up to 10 s while it is running when wait)
// and returns its RunResult.
func apSubmit(t *testing.T, d *daemon, sid string, wait bool) map[string]any {
	t.Helper()
	path := "/sessions/" + sid + "/runs"
	if wait {
		path += "?wait=10"
	}
	resp, body := d.do(t, http.MethodPost, path, map[string]any{"message": "go"})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	return decode(t, body)
}

// apPost POSTs body and requires 200; it returns the decoded answer.
func apPost(t *testing.T, d *daemon, path string, body any) map[string]any {
	t.Helper()
	resp, raw := d.do(t, http.MethodPost, path, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	return decode(t, raw)
}

func apRun(t *testing.T, d *daemon, rid string) map[string]any {
	t.Helper()
	resp, body := d.do(t, http.MethodGet, "/runs/"+rid, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return decode(t, body)
}

// apWaitStatus polls the run until it has status and returns it.
func apWaitStatus(t *testing.T, d *daemon, rid, status string) map[string]any {
	t.Helper()
	var run map[string]any
	require.Eventually(t, func() bool {
		run = apRun(t, d, rid)
		return run["status"] == status
	}, 10*time.Second, 20*time.Millisecond, "run %s never became %s", rid, status)
	return run
}

// apEvents returns the run's public events (JSON page form).
func apEvents(t *testing.T, d *daemon, rid string) []map[string]any {
	t.Helper()
	resp, body := d.do(t, http.MethodGet, "/runs/"+rid+"/events?after=0", nil, "Accept", "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var page struct{ Events []map[string]any }
	require.NoError(t, json.Unmarshal(body, &page))
	for _, ev := range page.Events {
		requireContractEvent(t, ev)
	}
	return page.Events
}

// apOfType filters events by type.
func apOfType(evs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e["type"] == typ {
			out = append(out, e)
		}
	}
	return out
}

// apJournal reads a run's journal from the (stopped) daemon's database.
func apJournal(t *testing.T, d *daemon, rid string) []journal.Record {
	t.Helper()
	d.stop()
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: d.db})
	require.NoError(t, err)
	defer hxtest.Close(t, st)
	recs, err := st.JournalList(context.Background(), rid, 0, 0)
	require.NoError(t, err)
	return recs
}

func apPayload(t *testing.T, r journal.Record) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Payload, &m), string(r.Payload))
	return m
}

func apKeys(pending any) []string {
	var keys []string
	for _, p := range pending.([]any) {
		keys = append(keys, p.(map[string]any)["execution_key"].(string))
	}
	return keys
}

// TestApprovalSeveralPending: three calls awaiting approval get one
// decision each (allow, decline, allow + resume) and one resume; the
// declined call answers "Permission denied", the others run once each.
func TestApprovalSeveralPending(t *testing.T) {
	t.Parallel()
	d := apStartDaemon(t)
	sid := apSession(t, d, "approver", true)
	run := apSubmit(t, d, sid, true)
	require.Equal(t, "awaiting_input", run["status"])
	rid := run["run_id"].(string)
	key := func(id string) string { return rid + ":1:" + id }
	require.Equal(t, []string{key("a"), key("b"), key("c")}, apKeys(run["pending"]))
	for _, p := range run["pending"].([]any) {
		require.Equal(t, "approval", p.(map[string]any)["status"])
	}
	require.Len(t, apOfType(apEvents(t, d, rid), "approval_required"), 3)
	resp, body := d.do(t, http.MethodGet, "/sessions/"+sid+"/pending", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	list := decode(t, body)
	require.Equal(t, []string{key("a"), key("b"), key("c")}, apKeys(list["items"]))
	require.Nil(t, list["next_cursor"])

	tools := "/sessions/" + sid + "/tools/"
	run = apPost(t, d, tools+key("a")+"/approve", map[string]any{"allow": true})
	require.Equal(t, "awaiting_input", run["status"])
	require.Equal(t, []string{key("b"), key("c")}, apKeys(run["pending"]))
	// A second decision on the same call: it no longer awaits approval.
	resp, body = d.do(t, http.MethodPost, tools+key("a")+"/approve", map[string]any{"allow": false})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "resolution_invalid")
	require.Equal(t, "Tool is not awaiting approval", decode(t, body)["detail"])
	run = apPost(t, d, tools+key("b")+"/approve", map[string]any{"allow": false})
	require.Equal(t, "awaiting_input", run["status"])
	require.Equal(t, []string{key("c")}, apKeys(run["pending"]))
	// (What this answer holds is TestApprovalResumeAnswersStoppedRun's.)
	apPost(t, d, tools+key("c")+"/approve", map[string]any{"allow": true, "resume": true})
	run = apWaitStatus(t, d, rid, "completed")
	require.Equal(t, "done", run["output"])
	require.Empty(t, run["pending"])

	evs := apEvents(t, d, rid)
	starts := apOfType(evs, "tool_call_start")
	require.Len(t, starts, 2, "echo runs for the allowed calls only")
	var results []string
	for _, e := range apOfType(evs, "tool_result") {
		data := e["data"].(map[string]any)
		require.NotEqual(t, true, data["is_error"])
		results = append(results, data["tool_call_id"].(string)+"="+data["content"].(string))
	}
	// A call declined by a decision is answered in the state, not run, so
	// (as in the reference engine) it has no tool_result event: the model's
	// request below shows its answer.
	require.Equal(t, []string{"a=one", "c=three"}, results)
	last := evs[len(evs)-1]
	require.Equal(t, "run_result", last["type"])
	require.Equal(t, "completed", last["data"].(map[string]any)["status"])

	// After completion: 409 not_awaiting_resolution.
	resp, body = d.do(t, http.MethodPost, tools+key("a")+"/approve", map[string]any{"allow": true})
	requireProblem(t, resp, body, http.StatusConflict, "not_awaiting_resolution")

	recs := apJournal(t, d, rid)
	var resolved []map[string]any
	var resolvedKeys, dispatched []string
	resumed := 0
	var step2 map[string]any
	for _, r := range recs {
		switch r.Kind {
		case journal.KindToolResolved:
			resolved = append(resolved, apPayload(t, r))
			resolvedKeys = append(resolvedKeys, *r.ExecutionKey)
		case journal.KindToolDispatched:
			dispatched = append(dispatched, *r.ExecutionKey)
		case journal.KindRunResumed:
			resumed++
			require.Equal(t, "awaiting_input", apPayload(t, r)["previous_status"])
		case journal.KindModelStarted:
			if r.StepID == "2" {
				step2 = apPayload(t, r)
			}
		}
	}
	require.Equal(t, []string{key("a"), key("b"), key("c")}, resolvedKeys)
	require.Equal(t, []map[string]any{
		{"allow": true, "result": nil, "retry": false, "abort": false, "status": "prepared"},
		{"allow": false, "result": nil, "retry": false, "abort": false, "status": "completed"},
		{"allow": true, "result": nil, "retry": false, "abort": false, "status": "prepared"},
	}, resolved)
	require.Equal(t, 1, resumed, "one resume after all decisions")
	require.Equal(t, []string{key("a"), key("c")}, dispatched)
	// The model's second request carries "Permission denied" for b.
	require.NotNil(t, step2)
	msgs := step2["messages"].([]any)
	lastMsg := msgs[len(msgs)-1].(map[string]any)
	require.Equal(t, "user", lastMsg["role"])
	var answers []string
	for _, b := range lastMsg["content"].([]any) {
		blk := b.(map[string]any)
		answers = append(answers, fmt.Sprintf("%s=%s/%v", blk["tool_use_id"], blk["content"], blk["is_error"] == true))
	}
	require.Equal(t, []string{"a=one/false", "b=Permission denied/true", "c=three/false"}, answers)
}

// TestApprovalResolveRuleErrors: every refused decision is a problem+json
// with a stable code (and the reference's message as detail).
func TestApprovalResolveRuleErrors(t *testing.T) {
	t.Parallel()
	d := apStartDaemon(t)
	sidA := apSession(t, d, "approver", false)
	ridA := apSubmit(t, d, sidA, true)["run_id"].(string)
	keyA := ridA + ":1:a"
	sidU := apSession(t, d, "asker", false)
	runU := apSubmit(t, d, sidU, true)
	require.Equal(t, "awaiting_input", runU["status"])
	keyU := runU["run_id"].(string) + ":1:q"
	sidR := apSession(t, d, "insomniac", false)
	ridR := apSubmit(t, d, sidR, false)["run_id"].(string)
	keyR := ridR + ":1:nap"
	sidC := apSession(t, d, "quick", false)
	runC := apSubmit(t, d, sidC, true)
	require.Equal(t, "completed", runC["status"])
	keyC := runC["run_id"].(string) + ":1:x"
	sidN := apSession(t, d, "quick", false) // no run yet

	approve := func(sid, key string) string { return "/sessions/" + sid + "/tools/" + key + "/approve" }
	resolve := func(sid, key string) string { return "/sessions/" + sid + "/tools/" + key + "/resolve" }
	const choose = "Choose exactly one of result, retry, abort"
	const noUncertain = "Tool has no uncertain outcome"
	for _, tc := range []struct {
		name, path string
		body       any
		status     int
		code       string
		detail     string
	}{
		{"approve an uncertain entry", approve(sidU, keyU), map[string]any{"allow": true}, 422, "resolution_invalid", "Tool is not awaiting approval"},
		{"decline an uncertain entry", approve(sidU, keyU), map[string]any{"allow": false}, 422, "resolution_invalid", "Tool is not awaiting approval"},
		{"retry and abort", resolve(sidU, keyU), map[string]any{"retry": true, "abort": true}, 422, "resolution_invalid", choose},
		{"result and retry", resolve(sidU, keyU), map[string]any{"retry": true, "result": map[string]any{"tool_call_id": "q", "content": "x"}}, 422, "resolution_invalid", choose},
		// The contract (ResolveRequest) has no required field: "none" passes
		// validation and the handler answers 422, not 400.
		{"none of result, retry, abort", resolve(sidU, keyU), map[string]any{}, 422, "resolution_invalid", choose},
		{"only resume", resolve(sidU, keyU), map[string]any{"resume": true}, 422, "resolution_invalid", choose},
		{"retry false", resolve(sidU, keyU), map[string]any{"retry": false}, 422, "resolution_invalid", choose},
		{"result for another call", resolve(sidU, keyU), map[string]any{"result": map[string]any{"tool_call_id": "other", "content": "42"}}, 422, "resolution_invalid", "Resolution must match tool call ID"},
		{"retry an approval entry", resolve(sidA, keyA), map[string]any{"retry": true}, 422, "resolution_invalid", noUncertain},
		{"result for an approval entry", resolve(sidA, keyA), map[string]any{"result": map[string]any{"tool_call_id": "a", "content": "x"}}, 422, "resolution_invalid", noUncertain},
		{"abort an approval entry", resolve(sidA, keyA), map[string]any{"abort": true}, 422, "resolution_invalid", noUncertain},
		{"approve unknown key", approve(sidA, ridA+":1:zzz"), map[string]any{"allow": true}, 404, "unknown_execution_key", "No pending tool has execution key '" + ridA + ":1:zzz'"},
		{"resolve unknown key", resolve(sidU, "nope"), map[string]any{"retry": true}, 404, "unknown_execution_key", "No pending tool has execution key 'nope'"},
		{"approve in a session without runs", approve(sidN, "nope"), map[string]any{"allow": true}, 404, "unknown_execution_key", ""},
		{"approve while running", approve(sidR, keyR), map[string]any{"allow": true}, 409, "not_awaiting_resolution", ""},
		{"resolve while running", resolve(sidR, keyR), map[string]any{"retry": true}, 409, "not_awaiting_resolution", ""},
		{"approve after completion", approve(sidC, keyC), map[string]any{"allow": true}, 409, "not_awaiting_resolution", ""},
		{"resolve after completion", resolve(sidC, keyC), map[string]any{"abort": true}, 409, "not_awaiting_resolution", ""},
		{"approve unknown session", approve("no-such-session", keyA), map[string]any{"allow": true}, 404, "not_found", ""},
		{"resolve unknown session", resolve("no-such-session", keyU), map[string]any{"retry": true}, 404, "not_found", ""},
		{"approve malformed JSON", approve(sidA, keyA), `{"allow":`, 400, "invalid_request", ""},
		{"approve without allow", approve(sidA, keyA), map[string]any{"resume": true}, 400, "invalid_request", ""},
		{"approve allow not a bool", approve(sidA, keyA), map[string]any{"allow": "yes"}, 400, "invalid_request", ""},
		{"approve unknown field", approve(sidA, keyA), map[string]any{"allow": true, "force": true}, 400, "invalid_request", ""},
		{"approve without body", approve(sidA, keyA), nil, 400, "invalid_request", ""},
		{"resolve malformed JSON", resolve(sidU, keyU), "not json", 400, "invalid_request", ""},
		{"resolve result without content", resolve(sidU, keyU), map[string]any{"result": map[string]any{"tool_call_id": "q"}}, 400, "invalid_request", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := d.do(t, http.MethodPost, tc.path, tc.body)
			requireProblem(t, resp, body, tc.status, tc.code)
			if tc.detail != "" {
				require.Equal(t, tc.detail, decode(t, body)["detail"])
			}
		})
	}
	resp, body := d.do(t, http.MethodGet, "/sessions/no-such-session/pending", nil)
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	// Refused decisions changed nothing.
	require.Len(t, apRun(t, d, ridA)["pending"], 3)
	pu := apRun(t, d, runU["run_id"].(string))["pending"].([]any)
	require.Len(t, pu, 1)
	require.Equal(t, "uncertain", pu[0].(map[string]any)["status"])
	require.Equal(t, "running", apRun(t, d, ridR)["status"])
	apPost(t, d, "/sessions/"+sidR+"/cancel", nil)
}

// TestUncertainClientTool: a client tool stops the run with an uncertain
// entry; retry runs it again (uncertain again, next attempt); a supplied
// result is processed on resume and the model's next step answers.
func TestUncertainClientTool(t *testing.T) {
	t.Parallel()
	d := apStartDaemon(t)
	sid := apSession(t, d, "asker", true)
	run := apSubmit(t, d, sid, true)
	require.Equal(t, "awaiting_input", run["status"])
	rid := run["run_id"].(string)
	key := rid + ":1:q"
	pending := run["pending"].([]any)
	require.Len(t, pending, 1)
	require.Equal(t, "uncertain", pending[0].(map[string]any)["status"])
	require.EqualValues(t, 1, pending[0].(map[string]any)["attempt"])
	require.Len(t, apOfType(apEvents(t, d, rid), "recovery_required"), 1)

	path := "/sessions/" + sid + "/tools/" + key + "/resolve"
	apPost(t, d, path, map[string]any{"retry": true, "resume": true})
	require.Eventually(t, func() bool {
		r := apRun(t, d, rid)
		p, _ := r["pending"].([]any)
		return r["status"] == "awaiting_input" && len(p) == 1 && p[0].(map[string]any)["attempt"] == float64(2)
	}, 10*time.Second, 20*time.Millisecond, "retry makes the client tool uncertain again")
	require.Len(t, apOfType(apEvents(t, d, rid), "recovery_required"), 2)

	apPost(t, d, path, map[string]any{
		"result": map[string]any{"tool_call_id": "q", "content": "42", "is_error": false}, "resume": true,
	})
	run = apWaitStatus(t, d, rid, "completed")
	require.Equal(t, "The answer is in.", run["output"])
	var results []string
	for _, e := range apOfType(apEvents(t, d, rid), "tool_result") {
		results = append(results, e["data"].(map[string]any)["content"].(string))
	}
	require.Equal(t, []string{"42"}, results)

	recs := apJournal(t, d, rid)
	var tools []string
	var lastResolved map[string]any
	resumed := 0
	for _, r := range recs {
		if r.Kind == journal.KindRunResumed {
			resumed++
		}
		if !strings.HasPrefix(string(r.Kind), "tool.") {
			continue
		}
		tools = append(tools, string(r.Kind)+"#"+r.AttemptID)
		if r.Kind == journal.KindToolResolved {
			lastResolved = apPayload(t, r)
		}
		if r.Kind == journal.KindToolProcessed {
			require.Equal(t, map[string]any{"tool_call_id": "q", "content": "42", "is_error": false}, apPayload(t, r))
		}
	}
	require.Equal(t, []string{
		"tool.started#1", "tool.dispatched#1", "tool.resolved#1",
		"tool.started#2", "tool.dispatched#2", "tool.resolved#2", "tool.processed#2",
	}, tools, "the supplied result is processed without calling the tool again")
	require.Equal(t, map[string]any{
		"allow": nil, "result": map[string]any{"tool_call_id": "q", "content": "42", "is_error": false},
		"retry": false, "abort": false, "status": "raw_completed",
	}, lastResolved)
	require.Equal(t, 2, resumed)
}

// TestUncertainAbort: abort cancels the run; a cancelled run cannot be
// retried; cancelled runs do not block a new turn.
func TestUncertainAbort(t *testing.T) {
	t.Parallel()
	d := apStartDaemon(t)
	sid := apSession(t, d, "asker", false)
	run := apSubmit(t, d, sid, true)
	require.Equal(t, "awaiting_input", run["status"])
	rid := run["run_id"].(string)
	path := "/sessions/" + sid + "/tools/" + rid + ":1:q/resolve"
	run = apPost(t, d, path, map[string]any{"abort": true})
	require.Equal(t, "cancelled", run["status"])
	require.Equal(t, "cancelled", run["stop_reason"])
	evs := apEvents(t, d, rid)
	last := evs[len(evs)-1]
	require.Equal(t, "run_result", last["type"])
	require.Equal(t, "cancelled", last["data"].(map[string]any)["status"])

	resp, body := d.do(t, http.MethodPost, path, map[string]any{"retry": true})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "resolution_invalid")
	require.Equal(t, "Cancelled runs cannot be retried; supply a verified outcome or start a new turn", decode(t, body)["detail"])
	require.Equal(t, "cancelled", apRun(t, d, rid)["status"])
	// Resume skips a cancelled run.
	require.Equal(t, map[string]any{"run_id": nil}, apPost(t, d, "/sessions/"+sid+"/resume", map[string]any{}))
	require.Equal(t, "awaiting_input", apSubmit(t, d, sid, true)["status"])
}

// TestResumeEndpoint: nothing to resume → {run_id: null}; a recording
// choice other than the session's → 409 recording_mismatch; resuming a run
// awaiting approval does not bypass the approval.
func TestResumeEndpoint(t *testing.T) {
	t.Parallel()
	d := apStartDaemon(t)
	rec := apSession(t, d, "quick", true)
	resume := func(sid string) string { return "/sessions/" + sid + "/resume" }

	resp, body := d.do(t, http.MethodPost, resume(rec), map[string]any{})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.JSONEq(t, `{"run_id": null}`, string(body))
	resp, body = d.do(t, http.MethodPost, resume(rec), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.JSONEq(t, `{"run_id": null}`, string(body))
	require.Equal(t, "completed", apSubmit(t, d, rec, true)["status"])
	require.Equal(t, map[string]any{"run_id": nil}, apPost(t, d, resume(rec), map[string]any{"recording": true}))

	resp, body = d.do(t, http.MethodPost, resume(rec), map[string]any{"recording": false})
	requireProblem(t, resp, body, http.StatusConflict, "recording_mismatch")
	plain := apSession(t, d, "quick", false)
	resp, body = d.do(t, http.MethodPost, resume(plain), map[string]any{"recording": true})
	requireProblem(t, resp, body, http.StatusConflict, "recording_mismatch")
	resp, body = d.do(t, http.MethodPost, resume("no-such-session"), map[string]any{})
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	resp, body = d.do(t, http.MethodPost, resume(plain), map[string]any{"recording": "yes"})
	requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")
	resp, body = d.do(t, http.MethodPost, resume(plain), `{"recording":`)
	requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")

	sid := apSession(t, d, "approver", false)
	rid := apSubmit(t, d, sid, true)["run_id"].(string)
	require.Equal(t, map[string]any{"run_id": rid}, apPost(t, d, resume(sid), map[string]any{}))
	run := apWaitStatus(t, d, rid, "awaiting_input")
	require.Len(t, run["pending"], 3)
	require.Empty(t, apOfType(apEvents(t, d, rid), "tool_call_start"), "no call ran without approval")
}

// TestSessionDeadline: max_session_duration_seconds ends an overlong run
// as cancelled/timeout (REFERENCE §4.5); the session takes a new run.
func TestSessionDeadline(t *testing.T) {
	t.Parallel()
	d := apStartDaemon(t)
	sid := apSession(t, d, "deadline", false)
	start := time.Now()
	run := apSubmit(t, d, sid, true)
	rid := run["run_id"].(string)
	if run["status"] == "running" { // ?wait bounded by the request, not the run
		run = apWaitStatus(t, d, rid, "cancelled")
	}
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, "cancelled", run["status"])
	require.Equal(t, "timeout", run["stop_reason"])
	require.Equal(t, map[string]any{"type": "TimeoutError", "message": "Session duration limit exceeded"}, run["error"])
	evs := apEvents(t, d, rid)
	last := evs[len(evs)-1]
	require.Equal(t, "run_result", last["type"])
	require.Equal(t, "timeout", last["data"].(map[string]any)["stop_reason"])

	next := apSubmit(t, d, sid, false)
	require.NotEqual(t, rid, next["run_id"])
	require.Equal(t, "running", next["status"])
	apPost(t, d, "/sessions/"+sid+"/cancel", nil)
}

// TestPauseAndResume: pause stops a running run at its next boundary as
// paused (no turn_complete, a run_result); a paused run blocks new turns;
// resume finishes it.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	d := apStartDaemon(t)
	sid := apSession(t, d, "dozer", false)
	rid := apSubmit(t, d, sid, false)["run_id"].(string)
	require.Eventually(t, func() bool {
		return len(apOfType(apEvents(t, d, rid), "tool_call_start")) > 0
	}, 10*time.Second, 10*time.Millisecond)
	ctl := apPost(t, d, "/sessions/"+sid+"/pause", nil)["run"].(map[string]any)
	require.Contains(t, []string{"running", "paused"}, ctl["status"])
	run := apWaitStatus(t, d, rid, "paused")
	require.Nil(t, run["output"])
	evs := apOfType(apEvents(t, d, rid), "run_result")
	require.Equal(t, "paused", evs[len(evs)-1]["data"].(map[string]any)["status"])
	require.Empty(t, apOfType(apEvents(t, d, rid), "turn_complete"))
	require.Len(t, apOfType(apEvents(t, d, rid), "tool_result"), 1, "the nap finished before the pause took effect")

	resp, body := d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "again"})
	requireProblem(t, resp, body, http.StatusConflict, "session_busy")

	require.Equal(t, map[string]any{"run_id": rid}, apPost(t, d, "/sessions/"+sid+"/resume", map[string]any{}))
	run = apWaitStatus(t, d, rid, "completed")
	require.Equal(t, "awake", run["output"])
	require.Len(t, apOfType(apEvents(t, d, rid), "tool_call_start"), 1, "the nap is not repeated")
}

// TestApprovalResumeAnswersStoppedRun: a decision with resume:true answers
// the run once it stops (contract approveTool: "With resume:true the run is
// resumed and the answer is its result once it stops"; REFERENCE §4.4:
// approve(..., resume=True) returns the final RunResult). resolveTool
// shares the flag ("Resume the run after the decision") and the code path.
func TestApprovalResumeAnswersStoppedRun(t *testing.T) {
	t.Parallel()
	d := apStartDaemon(t)
	t.Run("approve", func(t *testing.T) {
		sid := apSession(t, d, "approver", false)
		rid := apSubmit(t, d, sid, true)["run_id"].(string)
		tools := "/sessions/" + sid + "/tools/" + rid + ":1:"
		apPost(t, d, tools+"a/approve", map[string]any{"allow": true})
		apPost(t, d, tools+"b/approve", map[string]any{"allow": false})
		run := apPost(t, d, tools+"c/approve", map[string]any{"allow": true, "resume": true})
		require.Equal(t, "completed", run["status"], "approve {resume:true} answered before the run stopped")
		require.Equal(t, "done", run["output"])
	})
	t.Run("resolve", func(t *testing.T) {
		sid := apSession(t, d, "asker", false)
		rid := apSubmit(t, d, sid, true)["run_id"].(string)
		run := apPost(t, d, "/sessions/"+sid+"/tools/"+rid+":1:q/resolve", map[string]any{
			"result": map[string]any{"tool_call_id": "q", "content": "42"}, "resume": true,
		})
		require.Equal(t, "completed", run["status"], "resolve {resume:true} answered before the run stopped")
		require.Equal(t, "The answer is in.", run["output"])
	})
}

// TestApprovalConcurrentDecisions: decisions on different pending calls of
// one awaiting run, sent at the same time (a UI approving several tools),
// are all applied; none is refused as "not awaiting a resolution" while
// the run is awaiting one.
func TestApprovalConcurrentDecisions(t *testing.T) {
	t.Parallel()
	d := apStartDaemon(t)
	sid := apSession(t, d, "approver", false)
	rid := apSubmit(t, d, sid, true)["run_id"].(string)
	answers := make(chan string, 3)
	for _, id := range []string{"a", "b", "c"} {
		go func() {
			resp, err := http.Post(d.base+"/sessions/"+sid+"/tools/"+rid+":1:"+id+"/approve", "application/json", strings.NewReader(`{"allow":true}`))
			if err != nil {
				answers <- id + ": " + err.Error()
				return
			}
			defer hxtest.Close(t, resp.Body)
			b, _ := io.ReadAll(resp.Body)
			answers <- id + ": " + strconv.Itoa(resp.StatusCode) + " " + string(b)
		}()
	}
	for range 3 {
		a := <-answers
		require.Contains(t, a, ": 200 ", a)
	}
	run := apRun(t, d, rid)
	require.Equal(t, "awaiting_input", run["status"])
	require.Empty(t, run["pending"], "every decision applied")
}
