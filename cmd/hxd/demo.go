package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"hxd/internal/agent"
	hxhttp "hxd/internal/http"
	"hxd/internal/hxbundle"
	"hxd/internal/journal"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/sqlite"
	"hxd/internal/tool"
)

// This file holds `hxd demo crash-recovery crash|status|resume`
// (REFERENCE §10.2 on SQLite): crash exits the process with code 42 right
// after the report tool's result is committed, status shows the saved state
// without changing anything, resume finishes the same run without running
// the tool again. And `hxd demo flight-recorder` (REFERENCE §10.1): a
// recorded run with an injected model failure, exported with payloads,
// verified and played back offline.

const demoUsage = `Usage:
  hxd demo flight-recorder [--output FILE.hx]
  hxd demo crash-recovery crash|status|resume [--workspace DIR] [--db FILE]
      [--database-url URL] [--schema S] [--lease-duration D]

flight-recorder: run the invoice-analyst@v1 agent (an injected model
connection failure, a retry, the safe overdue_balance tool) on a temporary
database, export the recorded run with payloads to --output (default
invoice-incident.hx, never overwritten), then verify it and print its
model/tool timeline. No network, no API key.

crash-recovery commands:
  crash    start the crash-recovery@v1 agent; the process exits with code 42
           right after the write_report result is committed
  status   show the saved state (read-only)
  resume   finish the same run; write_report must not run again

crash and resume stop with exit code 3 if the session lease is lost while
they drive the run (another process may own the session now).

Flags:
  --workspace DIR  folder of session.json, report.txt and tool-invocations.txt
                   (default .agent_sessions/sqlite-demo)
  --db FILE        SQLite database (default <workspace>/hxd.db; status and
                   resume default to the one saved in session.json)
  --database-url URL
                   run on PostgreSQL instead (or DATABASE_URL); crash
                   provisions the schema, status and resume only validate
  --schema S       PostgreSQL schema (default harness_x; status and resume
                   default to the one saved in session.json)
  --lease-duration D
                   PostgreSQL session lease (default 30s): resume works once
                   the crashed process's lease expired
`

// Demo texts of REFERENCE §10.2.
const (
	demoSessionFile = "session.json"
	demoMessage     = "Create the weekly sales report"
	demoRequestID   = "weekly-report"
	demoCrashCode   = 42
	demoCrashNotice = "Tool result committed. Intentionally exiting this process (code 42)."
	demoResumeHint  = "Run the resume command to finish the same run."
	// demoResumeWaitHint is the hint on PostgreSQL, whose session lease
	// outlives the crashed process (REFERENCE §10.2).
	demoResumeWaitHint = "Wait %d seconds for the lease to expire, then run the resume command."
	demoNoSession      = "No demo session found. Run crash first with the same --workspace."
	demoSessionBusy    = "Session is still owned by another process; retry when it has exited."
	demoLeaseBusy      = "Session lease is still active. Wait at least %d seconds after the crash, then retry resume."
	demoNothingToDo    = "No unfinished run; showing saved results."
	demoDefaultFolder  = ".agent_sessions/sqlite-demo"
)

// sentence is an error whose text is a whole sentence for the user,
// worded as REFERENCE §10 gives it (capitalised, with its full stop), not
// an error string meant to be wrapped into another.
type sentence string

func (s sentence) Error() string { return string(s) }

// demoConfig is what `hxd demo crash-recovery` reads from its flags.
type demoConfig struct {
	// Workspace holds the demo files. Default: .agent_sessions/sqlite-demo.
	Workspace string
	// DB is the SQLite file. Default: <Workspace>/hxd.db for crash, the
	// path saved in session.json for status and resume.
	DB string
	// PG: PostgreSQL instead of SQLite when PG.URL is set.
	PG pgOptions
	// schemaSet: --schema was given (else status and resume use the saved one).
	schemaSet bool
}

// demoSession is session.json: what status and resume need from crash.
type demoSession struct {
	SessionID string `json:"session_id"`
	DB        string `json:"db,omitempty"`
	// Schema and LeaseSeconds: the PostgreSQL schema and lease of crash.
	Schema       string  `json:"schema,omitempty"`
	LeaseSeconds float64 `json:"lease_seconds,omitempty"`
}

// demo dispatches `hxd demo <name>`.
func demo(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, demoUsage)
		return &exitError{code: 2}
	}
	switch args[0] {
	case "crash-recovery":
		return crashRecoveryDemo(ctx, args[1:], e)
	case "flight-recorder":
		return flightRecorderDemo(ctx, args[1:], e)
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, demoUsage)
		return nil
	}
	fmt.Fprint(e.stderr, demoUsage)
	return &exitError{code: 2, err: fmt.Errorf("unknown demo %q", args[0])}
}

// crashRecoveryDemo runs one command of the crash-recovery demo.
func crashRecoveryDemo(ctx context.Context, args []string, e env) error {
	cmd, cfg, err := parseDemoFlags(args, e)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	switch cmd {
	case "crash":
		return demoCrash(ctx, cfg, e, log)
	case "status":
		return demoStatus(ctx, cfg, e, log)
	case "resume":
		return demoResume(ctx, cfg, e, log)
	}
	fmt.Fprint(e.stderr, demoUsage)
	return &exitError{code: 2, err: fmt.Errorf("unknown crash-recovery command %q: use crash, status or resume", cmd)}
}

// parseDemoFlags returns the command and the flags, which may come before
// or after it.
func parseDemoFlags(args []string, e env) (string, demoConfig, error) {
	var cfg demoConfig
	fs := flag.NewFlagSet("demo crash-recovery", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, demoUsage) }
	fs.StringVar(&cfg.Workspace, "workspace", demoDefaultFolder, "folder of the demo files")
	fs.StringVar(&cfg.DB, "db", "", "SQLite database file")
	ef := newEnvFlags(fs, e)
	cfg.PG.register(fs, ef, true)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", cfg, &exitError{code: 0}
			}
			return "", cfg, &exitError{code: 2, err: err}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 {
		fmt.Fprint(e.stderr, demoUsage)
		return "", cfg, &exitError{code: 2, err: fmt.Errorf("crash-recovery takes one command (crash, status or resume), got %q", positional)}
	}
	if cfg.Workspace == "" {
		return "", cfg, &exitError{code: 2, err: errors.New("--workspace must not be empty")}
	}
	set, err := ef.apply()
	if err != nil {
		return "", cfg, &exitError{code: 2, err: err}
	}
	cfg.schemaSet = set["schema"] || e.getenv("HXD_SCHEMA") != ""
	if err := cfg.PG.resolve("demo crash-recovery", set, e, true, false); err != nil {
		return "", cfg, &exitError{code: 2, err: err}
	}
	return positional[0], cfg, nil
}

// demoCrash starts the demo run in a fresh workspace; the process exits
// with code 42 inside the run, right after the commit holding tool.returned.
func demoCrash(ctx context.Context, cfg demoConfig, e env, log *slog.Logger) (err error) {
	ws := cfg.Workspace
	var existing []string
	for _, name := range []string{demoSessionFile, tool.ReportFile, tool.InvocationLogFile} {
		_, err := os.Stat(filepath.Join(ws, name))
		switch {
		case err == nil:
			existing = append(existing, name)
		case !errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("check workspace: %w", err)
		}
	}
	if len(existing) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("demo files already exist in %s (%s): use another --workspace or remove them",
			ws, strings.Join(existing, ", "))}
	}
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return fmt.Errorf("create workspace: %w", err)
	}
	var ds demoSession
	if cfg.PG.URL == "" {
		db := cfg.DB
		if db == "" {
			db = filepath.Join(ws, "hxd.db")
		}
		db, err := filepath.Abs(db)
		if err != nil {
			return fmt.Errorf("database path: %w", err)
		}
		ds.DB = db
	} else {
		ds.Schema, ds.LeaseSeconds = cfg.PG.Schema, cfg.PG.LeaseDuration.Seconds()
	}
	// crash provisions the schema (REFERENCE §10.2: the demo's backend
	// auto-migrates); status and resume only validate.
	pg := cfg.PG
	pg.AutoMigrate = true
	store, err := openStore(ctx, pg, ds.DB, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()

	crashed := make(chan struct{})
	afterCommit := func(kinds []journal.Kind) {
		if !slices.Contains(kinds, journal.KindToolReturned) {
			return
		}
		fmt.Fprintln(e.stdout, demoCrashNotice)
		fmt.Fprintln(e.stdout, resumeHint(ds))
		e.exit(demoCrashCode)
		// Reached only when exit is injected (tests): end this driver
		// goroutine as the process would have ended, so nothing after the
		// crash point runs, and let the command return code 42.
		close(crashed)
		runtime.Goexit()
	}
	rt, lost, err := newDemoRuntime(store, ws, log, afterCommit)
	if err != nil {
		return err
	}
	defer func() { _ = rt.Stop(context.WithoutCancel(ctx)) }()

	recording := true
	sess, err := rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.DemoCrashRecovery, Recording: &recording})
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	ds.SessionID = sess.ID
	if err := writeDemoSession(ws, ds); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "Session:", sess.ID)
	fmt.Fprintln(e.stdout, "Workspace:", ws)
	msg, _ := json.Marshal(demoMessage)
	run, _, err := rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: msg, RequestID: demoRequestID})
	if err != nil {
		return fmt.Errorf("submit run: %w", err)
	}
	res, err := waitDemoRun(ctx, rt, run.RunID, crashed, lost)
	if errors.Is(err, errDemoCrashed) {
		return &exitError{code: demoCrashCode}
	}
	if err != nil {
		return demoWaitErr(err)
	}
	return &exitError{code: 1, err: fmt.Errorf("the run ended %s before the tool result was committed%s", res.Status, runErrorSuffix(res))}
}

// demoStatus prints the saved state; it changes nothing (the store is
// opened without migrating and no run is resumed).
func demoStatus(ctx context.Context, cfg demoConfig, e env, log *slog.Logger) (err error) {
	ds, err := readDemoSession(cfg.Workspace)
	if err != nil {
		return err
	}
	store, err := openDemoStore(ctx, cfg, ds, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	return printDemoStatus(ctx, e.stdout, store, ds.SessionID, cfg.Workspace)
}

// demoResume finishes the crashed run in this process and checks that the
// report tool ran exactly once.
func demoResume(ctx context.Context, cfg demoConfig, e env, log *slog.Logger) (err error) {
	ds, err := readDemoSession(cfg.Workspace)
	if err != nil {
		return err
	}
	store, err := openDemoStore(ctx, cfg, ds, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	rt, lost, err := newDemoRuntime(store, cfg.Workspace, log, nil)
	if err != nil {
		return err
	}
	defer func() { _ = rt.Stop(context.WithoutCancel(ctx)) }()

	runID, err := rt.Resume(ctx, ds.SessionID, hxruntime.ResumeParams{})
	if errors.Is(err, hxruntime.ErrSessionBusy) {
		if store.pg != nil {
			secs := ds.LeaseSeconds
			if secs <= 0 {
				secs = store.pg.LeaseDuration().Seconds()
			}
			return &exitError{code: 1, err: sentence(fmt.Sprintf(demoLeaseBusy, int(math.Ceil(secs))))}
		}
		return &exitError{code: 1, err: sentence(demoSessionBusy)}
	}
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if runID == "" {
		fmt.Fprintln(e.stdout, demoNothingToDo)
	} else {
		res, err := waitDemoRun(ctx, rt, runID, nil, lost)
		if err != nil {
			return demoWaitErr(err)
		}
		if res.Status != hxruntime.StatusCompleted {
			return &exitError{code: 1, err: fmt.Errorf("the resumed run ended %s, not completed%s", res.Status, runErrorSuffix(res))}
		}
	}
	if err := printDemoStatus(ctx, e.stdout, store, ds.SessionID, cfg.Workspace); err != nil {
		return err
	}
	inv, err := os.ReadFile(filepath.Join(cfg.Workspace, tool.InvocationLogFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read invocation log: %w", err)
	}
	if string(inv) != tool.BuiltinWriteReport+"\n" {
		return &exitError{code: 1, err: fmt.Errorf("%s must hold exactly one %s line, it holds %d lines",
			tool.InvocationLogFile, tool.BuiltinWriteReport, countLines(inv))}
	}
	report, err := os.ReadFile(filepath.Join(cfg.Workspace, tool.ReportFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read report: %w", err)
	}
	if string(report) != tool.ReportText {
		return &exitError{code: 1, err: fmt.Errorf("%s is missing or its content changed", tool.ReportFile)}
	}
	return nil
}

// newDemoRuntime returns a runtime over store with the demo agents, whose
// write_report writes in ws; afterCommit is the crash hook (nil: none).
// The channel receives the error when the session lease is lost (a renewal
// or a commit reports it): the driver then stops without committing and
// the run stays running in storage, so waiting for it would never end.
func newDemoRuntime(store *openedStore, ws string, log *slog.Logger, afterCommit func([]journal.Kind)) (*hxruntime.Runtime, <-chan error, error) {
	registry := agent.NewRegistry()
	for _, d := range agent.Demo() {
		if err := registry.Register(d); err != nil {
			return nil, nil, fmt.Errorf("register demo agents: %w", err)
		}
	}
	lost := make(chan error, 1)
	report := func(err error) {
		select {
		case lost <- err:
		default:
		}
	}
	after := afterCommit
	if hook := demoTestAfterCommit.Load(); hook != nil {
		after = func(kinds []journal.Kind) {
			(*hook)(ws, kinds)
			if afterCommit != nil {
				afterCommit(kinds)
			}
		}
	}
	cfg := hxruntime.Config{
		Store: &leaseWatchStore{Store: store, lost: report}, Agents: registry, Logger: log,
		ToolOptions:     tool.Options{WorkDir: ws},
		AfterCommitFunc: after,
	}
	store.wire(&cfg)
	cfg.ExpiredRunsFunc = nil // the demo resumes explicitly
	cfg.LeaseLostFunc = func(_, _ string, err error) { report(err) }
	rt, err := hxruntime.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("build runtime: %w", err)
	}
	return rt, lost, nil
}

// demoTestAfterCommit, when set (tests only), runs after every boundary
// commit of a demo run with the demo's workspace, before the crash hook.
var demoTestAfterCommit atomic.Pointer[func(ws string, kinds []journal.Kind)]

// leaseWatchStore reports the commits that fail because the session lease
// was lost (the runtime's heartbeat reports lost renewals through
// Config.LeaseLostFunc).
type leaseWatchStore struct {
	rtstore.Store
	lost func(error)
}

func (s *leaseWatchStore) Commit(ctx context.Context, c *rtstore.Commit) error {
	err := s.Store.Commit(ctx, c)
	if errors.Is(err, rtstore.ErrLeaseLost) {
		s.lost(err)
	}
	return err
}

func (s *leaseWatchStore) RunInsert(ctx context.Context, p *rtstore.RunInsertParams) (*rtstore.RunRow, bool, error) {
	row, created, err := s.Store.RunInsert(ctx, p)
	if errors.Is(err, rtstore.ErrLeaseLost) {
		s.lost(err)
	}
	return row, created, err
}

// resumeHint is what crash says to do next: on SQLite the crashed
// process's lock went with it; on PostgreSQL its lease must expire first.
func resumeHint(ds demoSession) string {
	if ds.DB != "" {
		return demoResumeHint
	}
	return fmt.Sprintf(demoResumeWaitHint, int(math.Ceil(ds.LeaseSeconds)))
}

// demoLeaseLost is the message of a demo command whose lease was lost.
const demoLeaseLost = "Session lease lost: this process stopped driving the run without committing " +
	"(another process may own the session now). Run the resume command once no other process drives it."

// demoLeaseLostCode is the exit code of a demo command whose session lease
// was lost while it drove the run.
const demoLeaseLostCode = 3

// errDemoLeaseLost tells waitDemoRun's caller that the lease was lost.
var errDemoLeaseLost = errors.New("session lease lost")

// demoWaitErr turns a lost lease into its exit code and message.
func demoWaitErr(err error) error {
	if errors.Is(err, errDemoLeaseLost) {
		return &exitError{code: demoLeaseLostCode, err: fmt.Errorf("%s (%w)", demoLeaseLost, err)}
	}
	return err
}

// errDemoCrashed tells waitDemoRun's caller that the crash hook ended the
// driver (injected exit only).
var errDemoCrashed = errors.New("the demo run crashed")

// waitDemoRun waits until the run is no longer running; errDemoCrashed
// when crashed is closed first (a nil channel never is), errDemoLeaseLost
// when lost receives first.
func waitDemoRun(ctx context.Context, rt *hxruntime.Runtime, runID string, crashed <-chan struct{}, lost <-chan error) (*hxruntime.RunResult, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type outcome struct {
		res *hxruntime.RunResult
		err error
	}
	ch := make(chan outcome, 1)
	go func() {
		for {
			res, err := rt.WaitRun(wctx, runID, time.Minute)
			if err != nil || res.Status != hxruntime.StatusRunning {
				ch <- outcome{res, err}
				return
			}
		}
	}()
	select {
	case <-crashed:
		cancel()
		<-ch
		return nil, errDemoCrashed
	case err := <-lost:
		cancel()
		<-ch
		return nil, fmt.Errorf("run %s: %w: %w", runID, errDemoLeaseLost, err)
	case o := <-ch:
		if o.err != nil {
			return nil, fmt.Errorf("wait for run %s: %w", runID, o.err)
		}
		return o.res, nil
	}
}

// runErrorSuffix renders a run's error for a message ("" when none).
func runErrorSuffix(res *hxruntime.RunResult) string {
	if res.Error == nil {
		return ""
	}
	return fmt.Sprintf(" (%s: %s)", res.Error.Type, res.Error.Message)
}

// printDemoStatus prints the status block of REFERENCE §10.2 from storage
// and the workspace files, reading only. The demo's session belongs to
// hxruntime.LocalPrincipal.
func printDemoStatus(ctx context.Context, w io.Writer, store rtstore.Store, sessionID, ws string) error {
	sess, err := store.SessionGet(ctx, hxruntime.SessionKey(hxruntime.LocalPrincipal, sessionID))
	if err != nil {
		return fmt.Errorf("session %s: %w", sessionID, err)
	}
	var st hxruntime.RunState
	var status hxruntime.RunStatus
	var tools []demoTool
	if sess.LastRunID != "" {
		row, err := store.RunGet(ctx, sess.LastRunID)
		if err != nil {
			return fmt.Errorf("run %s: %w", sess.LastRunID, err)
		}
		if err := json.Unmarshal(row.State, &st); err != nil {
			return fmt.Errorf("decode state of run %s: %w", row.ID, err)
		}
		status = row.Status
		if tools, err = demoToolEntries(ctx, store, row.ID, st.Tools); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "Session:", sessionID)
	if status == "" {
		fmt.Fprintln(w, "Run: not submitted")
		fmt.Fprintln(w, "Status: idle")
	} else {
		fmt.Fprintln(w, "Run:", sess.LastRunID)
		fmt.Fprintln(w, "Status:", status)
	}
	for _, t := range tools {
		fmt.Fprintf(w, "Tool: %s | Saved state: %s\n", t.name, t.status)
	}
	_, err = os.Stat(filepath.Join(ws, tool.ReportFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("check report: %w", err)
	}
	fmt.Fprintln(w, "Report exists:", err == nil)
	inv, err := os.ReadFile(filepath.Join(ws, tool.InvocationLogFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read invocation log: %w", err)
	}
	fmt.Fprintln(w, "Tool invocations:", countLines(inv))
	if st.Output != nil {
		fmt.Fprintln(w, "Answer:", *st.Output)
	}
	return nil
}

// demoTool is one tool entry of the status block.
type demoTool struct {
	name   string
	status hxruntime.ToolStatus
}

// demoToolEntries lists the run's tool entries: those of earlier steps,
// then those of the current step (state.tools). The runtime clears
// state.tools when the next step opens, and the commit holding the
// previous tools' outcomes is that step's first one, so entries of earlier
// steps are read back from the run's journal (the demo session records):
// the last of tool.started, tool.returned, tool.processed per execution
// key gives started, raw_completed, completed.
func demoToolEntries(ctx context.Context, store rtstore.Store, runID string, current []hxruntime.ToolEntry) ([]demoTool, error) {
	inState := make(map[string]bool, len(current))
	for _, e := range current {
		inState[e.ExecutionKey] = true
	}
	recs, err := store.JournalList(ctx, runID, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("journal of run %s: %w", runID, err)
	}
	var keys []string
	byKey := map[string]*demoTool{}
	for _, r := range recs {
		if r.ExecutionKey == nil || inState[*r.ExecutionKey] {
			continue
		}
		key := *r.ExecutionKey
		t := byKey[key]
		switch r.Kind {
		case journal.KindToolStarted:
			if t == nil {
				var p struct {
					Call struct {
						Name string `json:"name"`
					} `json:"call"`
				}
				if err := json.Unmarshal(r.Payload, &p); err != nil {
					return nil, fmt.Errorf("decode %s record of run %s: %w", r.Kind, runID, err)
				}
				t = &demoTool{name: p.Call.Name}
				byKey[key] = t
				keys = append(keys, key)
			}
			t.status = hxruntime.ToolStarted
		case journal.KindToolReturned:
			if t != nil {
				t.status = hxruntime.ToolRawCompleted
			}
		case journal.KindToolProcessed:
			if t != nil {
				t.status = hxruntime.ToolCompleted
			}
		}
	}
	out := make([]demoTool, 0, len(keys)+len(current))
	for _, k := range keys {
		out = append(out, *byKey[k])
	}
	for _, e := range current {
		out = append(out, demoTool{name: e.Call.Name, status: e.Status})
	}
	return out, nil
}

// countLines counts the non-empty lines of b.
func countLines(b []byte) int {
	n := 0
	for line := range strings.Lines(string(b)) {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

// writeDemoSession creates session.json exclusively (mode 0600).
func writeDemoSession(ws string, ds demoSession) error {
	raw, err := json.MarshalIndent(ds, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", demoSessionFile, err)
	}
	f, err := os.OpenFile(filepath.Join(ws, demoSessionFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", demoSessionFile, err)
	}
	_, err = f.Write(append(raw, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", demoSessionFile, err)
	}
	return nil
}

// readDemoSession reads session.json; a missing file is exit code 1 with
// the reference's message.
func readDemoSession(ws string) (demoSession, error) {
	var ds demoSession
	raw, err := os.ReadFile(filepath.Join(ws, demoSessionFile))
	if errors.Is(err, os.ErrNotExist) {
		return ds, &exitError{code: 1, err: sentence(demoNoSession)}
	}
	if err != nil {
		return ds, fmt.Errorf("read %s: %w", demoSessionFile, err)
	}
	if err := json.Unmarshal(raw, &ds); err != nil {
		return ds, &exitError{code: 1, err: fmt.Errorf("%s in %s is not a demo session file: %w", demoSessionFile, ws, err)}
	}
	if ds.SessionID == "" {
		return ds, &exitError{code: 1, err: fmt.Errorf("%s in %s names no session", demoSessionFile, ws)}
	}
	return ds, nil
}

// openDemoStore opens the store of status and resume without migrating:
// PostgreSQL when --database-url (or DATABASE_URL) is set, in --schema or
// else the schema saved in session.json; SQLite otherwise.
func openDemoStore(ctx context.Context, cfg demoConfig, ds demoSession, log *slog.Logger) (*openedStore, error) {
	pg := cfg.PG
	pg.AutoMigrate = false
	if pg.URL != "" && !cfg.schemaSet && ds.Schema != "" {
		pg.Schema = ds.Schema
	}
	if pg.URL == "" && cfg.DB == "" && ds.DB == "" && ds.Schema != "" {
		return nil, &exitError{code: 1, err: fmt.Errorf("the demo session in %s is on PostgreSQL (schema %q): set DATABASE_URL or pass --database-url",
			cfg.Workspace, ds.Schema)}
	}
	if pg.URL == "" {
		db := demoDB(cfg, ds)
		st, err := sqlite.Open(ctx, sqlite.Config{Path: db, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", db, err)
		}
		return &openedStore{Store: st, desc: "sqlite"}, nil
	}
	return openStore(ctx, pg, "", log)
}

// demoDB is the database of status and resume: --db when given, else the
// one saved in session.json, else <workspace>/hxd.db.
func demoDB(cfg demoConfig, ds demoSession) string {
	switch {
	case cfg.DB != "":
		return cfg.DB
	case ds.DB != "":
		return ds.DB
	}
	return filepath.Join(cfg.Workspace, "hxd.db")
}

// Flight-recorder demo texts (REFERENCE §10.1).
const (
	recorderDefaultOutput = "invoice-incident.hx"
	recorderMessage       = "Analyze overdue invoices for the demo account"
	recorderTempPrefix    = "hxd-recorder-"
)

// flightRecorderDemo is `hxd demo flight-recorder [--output F]`.
func flightRecorderDemo(ctx context.Context, args []string, e env) (err error) {
	flags := flag.NewFlagSet("demo flight-recorder", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	flags.Usage = func() { fmt.Fprint(e.stderr, demoUsage) }
	output := flags.String("output", recorderDefaultOutput, "bundle file to create (never overwritten)")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &exitError{code: 0}
		}
		return &exitError{code: 2, err: err}
	}
	if flags.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("flight-recorder takes no arguments, got %q", flags.Args())}
	}
	if *output == "" {
		return &exitError{code: 2, err: errors.New("--output must not be empty")}
	}
	if err := checkOutputFlag(*output); err != nil {
		return err
	}
	path, err := filepath.Abs(*output)
	if err != nil {
		return fmt.Errorf("output path: %w", err)
	}
	if err := refuseExisting(path); err != nil {
		return err
	}

	answer, err := recordDemoIncident(ctx, path, e)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, answer)

	// Offline playback: the temporary database is gone; only the file is read.
	f, size, err := openBundle(path)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	played, err := hxbundle.Playback(f, size, hxbundle.DefaultLimits)
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("the exported bundle does not verify: %w", err)}
	}
	if !played.Report.Valid || !played.Report.Complete {
		return &exitError{code: 1, err: fmt.Errorf("the exported bundle is not complete: %s", strings.Join(played.Report.Issues, ", "))}
	}
	// The reference checks its provider and tool counters: 3 model calls
	// (the injected failure, the retry, the answer) and 1 tool call. The
	// recording says the same; playback itself can call nothing.
	calls := map[string]int{}
	for _, raw := range played.Records {
		var r timelineRecord
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("decode record: %w", err)
		}
		calls[r.Kind]++
	}
	if calls["model.started"] != 3 || calls["tool.dispatched"] != 1 {
		return &exitError{code: 1, err: fmt.Errorf("the bundle records %d model and %d tool calls, want 3 and 1",
			calls["model.started"], calls["tool.dispatched"])}
	}
	if err := printTimeline(e.stdout, played, false); err != nil {
		return err
	}
	printVerified(e.stdout, played)
	fmt.Fprintln(e.stdout, "Bundle:", path)
	return nil
}

// recordDemoIncident runs the invoice-analyst demo agent with recording
// in a temporary folder, exports the run with payloads to path, then
// closes everything and deletes the folder. It returns the run's output.
func recordDemoIncident(ctx context.Context, path string, e env) (string, error) {
	tmp, err := os.MkdirTemp(e.getenv("TMPDIR"), recorderTempPrefix) // "" → os.TempDir()
	if err != nil {
		return "", fmt.Errorf("create temporary folder: %w", err)
	}
	// The deferred cleanups cover an early return; the end of this function
	// closes and removes everything itself and checks the errors.
	defer func() { _ = os.RemoveAll(tmp) }()
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(tmp, "runtime.db"), Logger: log, AutoMigrate: true})
	if err != nil {
		return "", fmt.Errorf("open store: %w", err)
	}
	defer func() { _ = store.Close() }()
	rt, lost, err := newDemoRuntime(&openedStore{Store: store}, tmp, log, nil)
	if err != nil {
		return "", err
	}
	defer func() { _ = rt.Stop(context.WithoutCancel(ctx)) }()

	recording := true
	sess, err := rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.DemoInvoiceAnalyst, Recording: &recording})
	if err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	msg, _ := json.Marshal(recorderMessage)
	run, _, err := rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: msg})
	if err != nil {
		return "", fmt.Errorf("submit run: %w", err)
	}
	res, err := waitDemoRun(ctx, rt, run.RunID, nil, lost)
	if err != nil {
		return "", demoWaitErr(err)
	}
	if res.Status != hxruntime.StatusCompleted || res.Output == nil {
		reason := string(res.Status)
		if res.Error != nil && res.Error.Message != "" {
			reason = res.Error.Message
		}
		fmt.Fprintln(e.stdout, "Error:", reason)
		return "", &exitError{code: 1}
	}

	// Signed like every export, with a key of the temporary store's own.
	signer, _, err := (&bundleKeyConfig{}).load(filepath.Join(tmp, "runtime.db"))
	if err != nil {
		return "", err
	}
	archive, _, err := hxhttp.ExportBundle(ctx, func(fn func(*hxruntime.Incident) error) error {
		return rt.Export(ctx, run.RunID, fn)
	}, hxhttp.BundleOptions{Policy: hxbundle.Policy{IncludePayloads: true, Signer: signer}, Version: version, Dir: tmp})
	if err != nil {
		return "", fmt.Errorf("export run %s: %w", run.RunID, err)
	}
	defer func() { _ = archive.Close() }()
	if err := archive.Publish(path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return "", &exitError{code: 1, err: existsError(path)}
		}
		return "", &exitError{code: 1, err: err}
	}
	// Everything is closed and the folder deleted before playback: the
	// deferred calls repeat harmlessly.
	err = errors.Join(archive.Close(), rt.Stop(context.WithoutCancel(ctx)), store.Close(), os.RemoveAll(tmp))
	if err != nil {
		return "", fmt.Errorf("clean up the demo runtime: %w", err)
	}
	return *res.Output, nil
}
