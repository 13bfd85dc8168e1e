package main

import (
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Takeover follows liveness (issue 18): the runs of a SIGKILLed process are
// resumed as soon as PostgreSQL closes its connection, not when its session
// leases expire. Both tests keep the default 30 s lease, so without the
// liveness locks they would wait for it.

// livenessRuns is the number of runs the killed process drives.
const livenessRuns = 20

// takeoverLimit is the functional bound asserted on a takeover: far below
// the 30 s lease (the target is 2 s; the measured times are logged).
const takeoverLimit = 5 * time.Second

// livenessSetup is a hook server whose calls hang until released (a
// process killed mid-call leaves its runs in flight) and a one-webhook
// agent with the safe policy (a resumed run calls the webhook again).
type livenessSetup struct {
	hook     *hookServer
	released atomic.Bool
	args     func() []string
}

func newLivenessSetup(t *testing.T) *livenessSetup {
	t.Helper()
	dbURL, schema := testDatabase(t)
	ls := &livenessSetup{}
	ls.hook = newHookServer(t, func(int) time.Duration {
		if ls.released.Load() {
			return 0
		}
		return 2 * time.Minute // until the caller dies
	})
	agents := writeHookAgent(t, "hooked", ls.hook.srv.URL, "safe", 1)
	work := t.TempDir()
	key := testSigningKey(t)
	ls.args = func() []string {
		// No --lease-duration: the default 30 s.
		return []string{"serve", "--addr", "127.0.0.1:0", "--agents", agents, "--workdir", work,
			"--shutdown-timeout", "500ms", "--database-url", dbURL, "--schema", schema, "--auto-migrate", "--bundle-signing-key", key}
	}
	return ls
}

// startHangingRuns submits livenessRuns runs on p and waits until each one
// hangs in its webhook call; it returns their ids.
func (ls *livenessSetup) startHangingRuns(t *testing.T, p *hxdChild) []string {
	t.Helper()
	var rids []string
	for range livenessRuns {
		sid := p.createSession("hooked")
		code, m := p.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "go"})
		require.Equal(t, http.StatusAccepted, code, m)
		rids = append(rids, m["run_id"].(string))
	}
	require.Eventually(t, func() bool {
		for _, rid := range rids {
			if len(ls.hook.callsFor(rid+":1:w1")) == 0 {
				return false
			}
		}
		return true
	}, 60*time.Second, 5*time.Millisecond, "every run calls its webhook")
	return rids
}

// awaitResumed waits (at most 30 s, the lease) until every run has called
// its webhook again, and returns the latest of those second calls.
func (ls *livenessSetup) awaitResumed(t *testing.T, rids []string) time.Time {
	t.Helper()
	var last time.Time
	deadline := time.Now().Add(30 * time.Second)
	for _, rid := range rids {
		for {
			calls := ls.hook.callsFor(rid + ":1:w1")
			if len(calls) >= 2 {
				if calls[1].At.After(last) {
					last = calls[1].At
				}
				break
			}
			require.True(t, time.Now().Before(deadline), "run %s not resumed within the 30 s lease", rid)
			time.Sleep(5 * time.Millisecond)
		}
	}
	return last
}

// requireCompleted requires every run completed, its tool called twice
// (the call in flight at the kill, then the resumed one).
func (ls *livenessSetup) requireCompleted(t *testing.T, p *hxdChild, rids []string) {
	t.Helper()
	for _, rid := range rids {
		run := p.settle(rid)
		require.Equal(t, "completed", run["status"], run)
		require.Len(t, ls.hook.callsFor(rid+":1:w1"), 2, rid)
	}
}

// TestPostgresTakeoverAfterKill: process A drives runs and is SIGKILLed;
// process B, whose reaper wakes when A's liveness lock goes, resumes all of
// them well within the lease.
func TestPostgresTakeoverAfterKill(t *testing.T) {
	t.Parallel()
	ls := newLivenessSetup(t)
	a := spawnHxdArgs(t, "process A", ls.args())
	a.awaitListening()
	b := spawnHxdArgs(t, "process B", ls.args())
	b.awaitListening()
	rids := ls.startHangingRuns(t, a)

	ls.released.Store(true)
	killed := time.Now()
	a.kill()
	last := ls.awaitResumed(t, rids)
	took := last.Sub(killed)
	t.Logf("all %d runs of the killed process resumed by the survivor %s after the kill (lease 30 s)",
		len(rids), took.Round(time.Millisecond))
	require.Less(t, took, takeoverLimit)
	ls.requireCompleted(t, b, rids)
	b.stop()
}

// TestPostgresTakeoverAfterRestart: process A drives runs, is SIGKILLed and
// restarted alone on the same host (a new process with a new liveness
// key); it resumes all of its old runs at start-up instead of after the
// lease.
func TestPostgresTakeoverAfterRestart(t *testing.T) {
	t.Parallel()
	ls := newLivenessSetup(t)
	a := spawnHxdArgs(t, "process A", ls.args())
	a.awaitListening()
	rids := ls.startHangingRuns(t, a)

	ls.released.Store(true)
	killed := time.Now()
	a.kill()
	again := spawnHxdArgs(t, "process A restarted", ls.args())
	again.awaitListening()
	ready := time.Now()
	last := ls.awaitResumed(t, rids)
	t.Logf("all %d runs resumed by the restarted process %s after it became ready, %s after the kill (start-up %s; lease 30 s)",
		len(rids), max(0, last.Sub(ready)).Round(time.Millisecond), last.Sub(killed).Round(time.Millisecond),
		ready.Sub(killed).Round(time.Millisecond))
	require.Less(t, last.Sub(ready), takeoverLimit)
	ls.requireCompleted(t, again, rids)
	again.stop()
}
