package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/store/sqlite"
	"hxd/internal/tool"
)

// demoResult is what one in-process `hxd demo …` printed and returned.
type demoResult struct {
	stdout, stderr string
	code           int // exit code main would use
	err            error
}

// runDemoCmd runs `hxd demo crash-recovery <args>` in-process; exit is the
// injected process exit (nil: one failing the test if called).
func runDemoCmd(t *testing.T, exit func(int), args ...string) demoResult {
	t.Helper()
	if exit == nil {
		exit = func(code int) { t.Errorf("unexpected exit(%d)", code) }
	}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append([]string{"demo", "crash-recovery"}, args...), env{
		getenv: func(string) string { return "" }, stdout: &stdout, stderr: &stderr, exit: exit,
	})
	res := demoResult{stdout: stdout.String(), stderr: stderr.String(), err: err}
	if err != nil {
		res.code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			res.code = ee.code
		}
	}
	return res
}

// demoLine returns the value of the "<prefix>: " line of out.
func demoLine(t *testing.T, out, prefix string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `: (.*)$`).FindStringSubmatch(out)
	require.NotNil(t, m, "no %q line in:\n%s", prefix, out)
	return m[1]
}

// demoSnapshot is the stored state a read-only command must leave alone.
func demoSnapshot(t *testing.T, db, ws string) string {
	t.Helper()
	ds, err := readDemoSession(ws)
	require.NoError(t, err)
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: db})
	require.NoError(t, err)
	defer hxtest.Close(t, st)
	key := hxruntime.SessionKey(hxruntime.LocalPrincipal, ds.SessionID)
	sess, err := st.SessionGet(context.Background(), key)
	require.NoError(t, err)
	run, err := st.RunGet(context.Background(), sess.LastRunID)
	require.NoError(t, err)
	recs, err := st.JournalList(context.Background(), run.ID, 0, 0)
	require.NoError(t, err)
	ctl, err := st.SessionControlGet(context.Background(), key)
	require.NoError(t, err)
	return strings.Join([]string{string(run.Status), run.Phase, string(run.State), run.UpdatedAt.String(),
		ctl, strconv.Itoa(len(recs)), recs[len(recs)-1].ID}, "|")
}

// checkCrashed asserts the status block right after a crash and returns
// the run id.
func checkCrashed(t *testing.T, ws, db string) string {
	t.Helper()
	before := demoSnapshot(t, db, ws)
	st := runDemoCmd(t, nil, "status", "--workspace", ws)
	require.NoError(t, st.err, st.stderr)
	require.Equal(t, "running", demoLine(t, st.stdout, "Status"))
	// REFERENCE §10.2: the crash comes after the raw result commits and
	// before its processing.
	require.Regexp(t, `(?m)^Tool: write_report \| Saved state: raw_completed$`, st.stdout)
	require.Equal(t, "true", demoLine(t, st.stdout, "Report exists"))
	require.Equal(t, "1", demoLine(t, st.stdout, "Tool invocations"))
	require.NotContains(t, st.stdout, "Answer:")
	require.Equal(t, before, demoSnapshot(t, db, ws), "status must not change stored state")
	return demoLine(t, st.stdout, "Run")
}

// checkResumed runs resume and asserts the run completed without running
// the tool again.
func checkResumed(t *testing.T, ws, runID string) {
	t.Helper()
	res := runDemoCmd(t, nil, "resume", "--workspace", ws)
	require.NoError(t, res.err, res.stdout+res.stderr)
	require.NotContains(t, res.stdout, demoNothingToDo)
	require.Equal(t, runID, demoLine(t, res.stdout, "Run"))
	require.Equal(t, "completed", demoLine(t, res.stdout, "Status"))
	require.Equal(t, "The weekly report is ready: 12 orders, $1,200 revenue.", demoLine(t, res.stdout, "Answer"))
	require.Equal(t, "1", demoLine(t, res.stdout, "Tool invocations"))
	require.Regexp(t, `(?m)^Tool: write_report \| Saved state: completed$`, res.stdout)
	inv, err := os.ReadFile(filepath.Join(ws, tool.InvocationLogFile))
	require.NoError(t, err)
	require.Equal(t, "write_report\n", string(inv))
	report, err := os.ReadFile(filepath.Join(ws, tool.ReportFile))
	require.NoError(t, err)
	require.Equal(t, tool.ReportText, string(report))

	again := runDemoCmd(t, nil, "resume", "--workspace", ws)
	require.NoError(t, again.err, again.stderr)
	require.True(t, strings.HasPrefix(again.stdout, demoNothingToDo+"\n"), again.stdout)
	require.Equal(t, runID, demoLine(t, again.stdout, "Run"), "the second resume keeps the same run")
	require.Equal(t, "completed", demoLine(t, again.stdout, "Status"))
	require.Equal(t, "1", demoLine(t, again.stdout, "Tool invocations"))
}

// TestDemoCrashRecovery runs REFERENCE §10.2 in-process: the injected exit
// records code 42 and the crash hook then ends only the driver goroutine.
func TestDemoCrashRecovery(t *testing.T) {
	t.Parallel()
	ws := filepath.Join(t.TempDir(), "ws")
	db := filepath.Join(ws, "hxd.db")

	var exitCode atomic.Int32
	exitCode.Store(-1)
	crash := runDemoCmd(t, func(code int) { exitCode.Store(int32(code)) }, "crash", "--workspace", ws)
	require.Equal(t, 42, crash.code, crash.stdout+crash.stderr)
	require.EqualValues(t, 42, exitCode.Load(), "the process exit is called with 42")
	require.Regexp(t, `^Session: \S+\nWorkspace: `+regexp.QuoteMeta(ws)+`\n`+
		regexp.QuoteMeta(demoCrashNotice+"\n"+demoResumeHint+"\n")+`$`, crash.stdout)
	ds, err := readDemoSession(ws)
	require.NoError(t, err)
	require.Equal(t, demoLine(t, crash.stdout, "Session"), ds.SessionID)
	require.True(t, filepath.IsAbs(ds.DB))
	fi, err := os.Stat(filepath.Join(ws, demoSessionFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	fi, err = os.Stat(ws)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	runID := checkCrashed(t, ws, db)

	// While another owner holds the session, resume refuses.
	other, err := sqlite.Open(context.Background(), sqlite.Config{Path: db})
	require.NoError(t, err)
	lease, err := other.SessionLock(context.Background(), hxruntime.SessionKey(hxruntime.LocalPrincipal, ds.SessionID))
	require.NoError(t, err)
	busy := runDemoCmd(t, nil, "resume", "--workspace", ws)
	require.Equal(t, 1, busy.code)
	require.EqualError(t, busy.err, demoSessionBusy)
	require.NoError(t, lease.Release(context.Background()))
	require.NoError(t, other.Close())

	checkResumed(t, ws, runID)

	again := runDemoCmd(t, nil, "crash", "--workspace", ws)
	require.Equal(t, 1, again.code)
	require.ErrorContains(t, again.err, "already exist")
}

// TestDemoCrashRecoveryProcess crashes a real child process (the test
// binary re-executed as hxd, see main_test.go): it exits 42 without any
// cleanup, and a fresh process state resumes the same run.
func TestDemoCrashRecoveryProcess(t *testing.T) {
	t.Parallel()
	ws := filepath.Join(t.TempDir(), "ws")
	args, err := json.Marshal([]string{"demo", "crash-recovery", "crash", "--workspace", ws})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), envRunMain+"=1", envArgs+"="+string(args))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var xe *exec.ExitError
	require.ErrorAs(t, err, &xe, stderr.String())
	require.Equal(t, 42, xe.ExitCode(), stdout.String()+stderr.String())
	require.Contains(t, stdout.String(), demoCrashNotice+"\n"+demoResumeHint+"\n")

	runID := checkCrashed(t, ws, filepath.Join(ws, "hxd.db"))
	checkResumed(t, ws, runID)
}

func TestDemoUsage(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{name: "no demo", args: []string{"demo"}, code: 2},
		{name: "unknown demo", args: []string{"demo", "flight"}, code: 2, msg: `unknown demo "flight"`},
		{name: "no command", args: []string{"demo", "crash-recovery"}, code: 2, msg: "one command"},
		{name: "unknown command", args: []string{"demo", "crash-recovery", "boom"}, code: 2, msg: `unknown crash-recovery command "boom"`},
		{name: "two commands", args: []string{"demo", "crash-recovery", "status", "resume"}, code: 2, msg: "one command"},
		{name: "bad flag", args: []string{"demo", "crash-recovery", "status", "--nope"}, code: 2},
		{name: "help", args: []string{"demo", "--help"}},
		{name: "status without session", args: []string{"demo", "crash-recovery", "--workspace", empty, "status"}, code: 1, msg: demoNoSession},
		{name: "resume without session", args: []string{"demo", "crash-recovery", "resume", "--workspace=" + empty}, code: 1, msg: demoNoSession},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, env{
				getenv: func(string) string { return "" }, stdout: &stdout, stderr: &stderr,
				exit: func(code int) { t.Errorf("unexpected exit(%d)", code) },
			})
			if tt.code == 0 {
				require.NoError(t, err)
				require.Contains(t, stdout.String(), "crash-recovery crash|status|resume")
				return
			}
			var ee *exitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, tt.code, ee.code)
			if tt.msg != "" {
				require.ErrorContains(t, err, tt.msg)
			}
		})
	}
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	require.Empty(t, entries, "status and resume create nothing without a session")
}

// TestResumeHint: on PostgreSQL, crash says to wait out the lease, as the
// reference's demo does (REFERENCE §10.2); on SQLite, to resume at once.
func TestResumeHint(t *testing.T) {
	t.Parallel()
	require.Equal(t, demoResumeHint, resumeHint(demoSession{DB: "/ws/hxd.db"}))
	require.Equal(t, "Wait 30 seconds for the lease to expire, then run the resume command.",
		resumeHint(demoSession{Schema: "harness_x", LeaseSeconds: 30}))
	require.Equal(t, "Wait 3 seconds for the lease to expire, then run the resume command.",
		resumeHint(demoSession{Schema: "harness_x", LeaseSeconds: 2.5}))
}
