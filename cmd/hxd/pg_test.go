package main

// PostgreSQL tests (issue 6): they need the database at
// HXD_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test);
// unreachable, they are skipped, or fail under CI=true. Every test works in
// a schema of its own, dropped at the end.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/journal"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/store/postgres"
	"hxd/internal/tool"
)

const defaultTestDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	pgReachOnce sync.Once
	pgReachErr  error
)

// testDatabase returns the test database URL and a fresh schema name that
// is dropped when the test ends; it skips the test (fails under CI=true)
// when the database cannot be reached.
func testDatabase(t *testing.T) (dbURL, schema string) {
	t.Helper()
	return testDatabaseTB(t)
}

func testDatabaseTB(t testing.TB) (dbURL, schema string) {
	t.Helper()
	dbURL = os.Getenv("HXD_TEST_DATABASE_URL")
	if dbURL == "" {
		dbURL = defaultTestDatabaseURL
	}
	pgReachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		pgReachErr = err
	})
	if pgReachErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL at HXD_TEST_DATABASE_URL unreachable under CI=true: %v", pgReachErr)
		}
		t.Skipf("PostgreSQL at HXD_TEST_DATABASE_URL unreachable: %v", pgReachErr)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = "hxd_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer func() {
			if err := conn.Close(ctx); err != nil {
				t.Logf("drop schema %s: close: %v", schema, err)
			}
		}()
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	return dbURL, schema
}

// openTestPG opens the schema (validate only) for checks from the parent.
func openTestPG(t *testing.T, dbURL, schema string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), postgres.Config{URL: dbURL, Schema: schema, PoolSize: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// exportAndVerify exports the run over HTTP with payloads and verifies the
// archive over HTTP; it returns the verification report.
func exportAndVerify(t *testing.T, base, rid string) verifyReport {
	t.Helper()
	post := func(path, ctype string, body []byte) (int, []byte) {
		req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer hxtest.Close(t, resp.Body)
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, out
	}
	code, archive := post("/runs/"+url.PathEscape(rid)+"/export", "application/json", []byte(`{"include_payloads":true}`))
	require.Equal(t, http.StatusOK, code, string(archive))
	code, body := post("/bundles/verify", "application/vnd.harnessx.incident+zip", archive)
	require.Equal(t, http.StatusOK, code, string(body))
	var rep verifyReport
	require.NoError(t, json.Unmarshal(body, &rep), string(body))
	return rep
}

// pgInvoiceRun starts `hxd serve --database-url … --auto-migrate` on a fresh
// schema and runs the recorded invoice demo there to its end.
func pgInvoiceRun(t *testing.T) (d *daemon, dbURL, schema, sid, rid string) {
	t.Helper()
	dbURL, schema = testDatabase(t)
	d = startDaemon(t, "",
		"--database-url", dbURL, "--schema", schema, "--auto-migrate", "--lease-duration", "3s", "--bundle-signing-key", testSigningKey(t))
	sid, rid = recordedRun(t, d, "invoice-analyst", true, "Analyze overdue invoices for the demo account")
	return d, dbURL, schema, sid, rid
}

// TestPostgresServeInvoiceDemo: `hxd serve --database-url … --auto-migrate`
// provisions a fresh schema, runs the recorded invoice demo to completed,
// and its bundle exports and verifies valid.
func TestPostgresServeInvoiceDemo(t *testing.T) {
	t.Parallel()
	d, _, _, _, rid := pgInvoiceRun(t)
	rep := exportAndVerify(t, d.base, rid)
	require.True(t, rep.Valid, "%+v", rep)
	require.True(t, rep.Complete, "%+v", rep)
	require.Greater(t, rep.RecordCount, 14)
}

// TestPostgresExportCLI: `hxd export --database-url --schema` exports a
// run of a PostgreSQL schema, beside the process that serves it, as a
// bundle that verifies; it migrates nothing and never echoes the password.
func TestPostgresExportCLI(t *testing.T) {
	t.Parallel()
	_, dbURL, schema, sid, rid := pgInvoiceRun(t)

	out := t.TempDir()
	bundle := filepath.Join(out, "pg.hx")
	key := testSigningKey(t)
	res := runCLI(t, "export", "--database-url", dbURL, "--schema", schema, "--session", sid, "--run", rid,
		"--output", bundle, "--include-payloads", "--bundle-signing-key", key)
	require.Equal(t, 0, res.code, res.stderr)
	st, err := os.Stat(bundle)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	res = runCLI(t, "verify", bundle)
	require.Equal(t, 0, res.code, res.stdout+res.stderr)

	// The URL may come from the environment; --db then still means SQLite.
	env := map[string]string{"DATABASE_URL": dbURL, "HXD_SCHEMA": schema, "HXD_BUNDLE_SIGNING_KEY": key}
	res = runCLIEnv(t, env, "export", "--session", sid, "--run", rid, "--output", filepath.Join(out, "env.hx"))
	require.Equal(t, 0, res.code, res.stderr)
	res = runCLIEnv(t, env, "export", "--db", filepath.Join(out, "none.db"), "--session", sid, "--run", rid,
		"--output", filepath.Join(out, "sqlite.hx"))
	require.Equal(t, 1, res.code, res.stderr)
	require.Contains(t, res.stderr, "none.db")

	// A schema hxd never provisioned: refused, nothing created, no password.
	secretURL := strings.Replace(dbURL, "postgres://postgres@", "postgres://postgres:s3cr3t-pw@", 1)
	other := schema + "_none"
	res = runCLI(t, "export", "--database-url", secretURL, "--schema", other, "--session", sid, "--run", rid,
		"--output", filepath.Join(out, "x.hx"), "--bundle-signing-key", key)
	require.Equal(t, 1, res.code, res.stderr)
	require.Contains(t, res.stderr, "open store")
	require.NotContains(t, res.stderr, "s3cr3t-pw")
	var exists bool
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Close(context.Background())) }()
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, other).Scan(&exists))
	require.False(t, exists, "export creates no schema")

	// Unknown run: exit 1 naming the schema; usage errors: exit 2.
	res = runCLI(t, "export", "--database-url", dbURL, "--schema", schema, "--session", sid, "--run", "nope",
		"--output", filepath.Join(out, "x.hx"), "--bundle-signing-key", key)
	require.Equal(t, 1, res.code, res.stderr)
	require.Contains(t, res.stderr, `not found in PostgreSQL schema "`+schema+`"`)
	for _, args := range [][]string{
		{"--db", "x.db", "--database-url", dbURL},
		{"--db", "x.db", "--schema", schema},
		{"--database-url", dbURL, "--schema", ""},
	} {
		res = runCLI(t, append(append([]string{"export"}, args...), "--session", sid, "--run", rid, "--output", filepath.Join(out, "x.hx"))...)
		require.Equal(t, 2, res.code, "%v: %s", args, res.stderr)
	}
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Len(t, entries, 2, "pg.hx and env.hx only")
}

// TestPostgresServeRefusesUnmigratedSchema: without --auto-migrate serve
// only validates, so a missing schema refuses start-up; the error names
// no password.
func TestPostgresServeRefusesUnmigratedSchema(t *testing.T) {
	t.Parallel()
	dbURL, schema := testDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw")
	var stderr bytes.Buffer
	err = run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--database-url", u.String(), "--schema", schema,
		"--bundle-signing-key", testSigningKey(t)},
		env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: &stderr})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret-pw")
	require.NotContains(t, stderr.String(), "s3cret-pw")
}

// TestPostgresMigrateCommand: `hxd migrate` provisions the schema; serve
// then starts validate-only.
func TestPostgresMigrateCommand(t *testing.T) {
	t.Parallel()
	dbURL, schema := testDatabase(t)
	var out bytes.Buffer
	e := env{getenv: func(string) string { return "" }, stdout: &out, stderr: io.Discard}
	require.NoError(t, run(context.Background(), []string{"migrate", "--database-url", dbURL, "--schema", schema}, e))
	require.Contains(t, out.String(), "is up to date")
	require.NoError(t, run(context.Background(), []string{"migrate", "--database-url", dbURL, "--schema", schema}, e), "re-running is a no-op")
	d := startDaemon(t, "", "--database-url", dbURL, "--schema", schema, "--bundle-signing-key", testSigningKey(t))
	_, rid := recordedRun(t, d, "invoice-analyst", true, "Analyze overdue invoices for the demo account")
	require.NotEmpty(t, rid)
}

// TestPostgresTwoProcessHandOver (issue 6): two hxd processes share one
// schema with a 2 s lease; N recorded runs call a counting webhook; one
// process is SIGKILLed mid-way and its runs finish on the other (reaper
// after lease expiry). Every tool whose raw result was committed ran
// exactly once, and every run's bundle verifies valid.
func TestPostgresTwoProcessHandOver(t *testing.T) {
	t.Parallel()
	dbURL, schema := testDatabase(t)
	const runs, steps = 50, 4
	hook := newHookServer(t, func(int) time.Duration { return 150 * time.Millisecond })
	agents := writeHookAgent(t, "hooked", hook.srv.URL, "safe", steps)
	work := t.TempDir()
	key := testSigningKey(t)
	args := func(extra ...string) []string {
		return append([]string{"serve", "--addr", "127.0.0.1:0", "--agents", agents,
			"--workdir", work, "--shutdown-timeout", "500ms",
			"--database-url", dbURL, "--schema", schema, "--lease-duration", "2s", "--pool-size", "20",
			"--bundle-signing-key", key}, extra...)
	}
	a := spawnHxdArgs(t, "process A", args("--auto-migrate"))
	b := spawnHxdArgs(t, "process B", args("--auto-migrate")) // concurrent provisioning
	a.awaitListening()
	b.awaitListening()

	// Sessions first, then the runs, half on each process.
	type runRef struct{ sid, rid string }
	refs := make([]runRef, runs)
	owner := func(i int) *hxdChild {
		if i%2 == 1 {
			return b
		}
		return a
	}
	for i := range refs {
		refs[i].sid = owner(i).createSession("hooked")
	}
	// At most 8 submissions at a time: a flood of claims waiting for pool
	// connections could outlast the 2 s lease before the run is inserted.
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	sem := make(chan struct{}, 8)
	for i := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			code, raw, err := owner(i).try(http.MethodPost, "/sessions/"+url.PathEscape(refs[i].sid)+"/runs", map[string]any{"message": "go"})
			var m map[string]any
			if err == nil {
				err = json.Unmarshal(raw, &m)
			}
			if err == nil && code != http.StatusAccepted {
				err = fmt.Errorf("submit run: %d %s", code, raw)
			}
			if err != nil {
				errs <- err
				return
			}
			refs[i].rid = m["run_id"].(string)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// Mid-way: when A's runs made half of their webhook calls.
	ofA := map[string]bool{}
	for i, ref := range refs {
		if owner(i) == a {
			ofA[ref.rid] = true
		}
	}
	callsOfA := func() int {
		n := 0
		for _, c := range hook.all() {
			if rid, _, ok := strings.Cut(c.Key, ":"); ok && ofA[rid] {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return callsOfA() >= len(ofA)*steps/2 }, 60*time.Second, 2*time.Millisecond)
	killedAt := callsOfA()
	a.kill()
	killed := time.Now()

	deadline := time.Now().Add(90 * time.Second)
	for _, ref := range refs {
		for {
			run := b.getRun(ref.rid)
			if run["status"] != "running" {
				require.Equal(t, "completed", run["status"], run)
				require.Equal(t, "done", run["output"], run)
				break
			}
			require.True(t, time.Now().Before(deadline), "run %s still running on B: %v", ref.rid, run)
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("%d runs × %d webhook steps; A killed after %d calls of its runs; all done on B %.1fs later; %d calls in all",
		runs, steps, killedAt, time.Since(killed).Seconds(), len(hook.all()))

	st := openTestPG(t, dbURL, schema)
	ctx := context.Background()
	rerun, resumed := 0, 0
	for _, ref := range refs {
		recs, err := st.JournalList(ctx, ref.rid, 0, 0)
		require.NoError(t, err)
		for i, r := range recs {
			require.Equal(t, int64(i+1), r.Seq, "journal seq gap in run %s", ref.rid)
		}
		if len(ofKind(recs, journal.KindRunResumed, "")) > 0 {
			resumed++
		}
		for s := 1; s <= steps; s++ {
			key := fmt.Sprintf("%s:%d:w%d", ref.rid, s, s)
			returned := ofKind(recs, journal.KindToolReturned, key)
			started := ofKind(recs, journal.KindToolStarted, key)
			calls := hook.callsFor(key)
			require.Len(t, returned, 1, "tool %s: %v", key, boundaryTrace(recs))
			require.NotEmpty(t, calls, key)
			// A call is made only after its tool.started committed, and
			// none after the raw result committed.
			require.LessOrEqual(t, len(calls), len(started), "tool %s: %d calls for %d dispatches", key, len(calls), len(started))
			for _, sr := range started {
				require.Less(t, sr.Seq, returned[0].Seq, "tool %s dispatched again after its result was committed", key)
			}
			requireIdempotentCalls(t, key, calls)
			if len(calls) > 1 {
				rerun++
			}
		}
	}
	t.Logf("%d runs resumed by B's reaper; %d in-flight tools re-dispatched (safe policy, no committed result)", resumed, rerun)
	require.Positive(t, resumed, "B took over A's runs")
	require.Equal(t, runs*steps, len(uniqueKeys(hook.all())))

	for _, ref := range refs {
		rep := exportAndVerify(t, b.base, ref.rid)
		require.True(t, rep.Valid, "run %s: %+v", ref.rid, rep)
	}
	b.stop()
}

func uniqueKeys(calls []hookCall) []string {
	var keys []string
	for _, c := range calls {
		keys = append(keys, c.Key)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// TestPostgresCrashRecoveryDemo: REFERENCE §10.2 on PostgreSQL — crash
// exits 42 after the tool result commit, status shows one invocation,
// resume completes (at once: the crashed process is gone) without running
// the tool again.
func TestPostgresCrashRecoveryDemo(t *testing.T) {
	t.Parallel()
	dbURL, schema := testDatabase(t)
	ws := filepath.Join(t.TempDir(), "ws")
	demoArgs := func(cmd string) []string {
		// 3 s: a shorter lease can lapse under the load of parallel tests.
		return []string{"demo", "crash-recovery", cmd, "--workspace", ws, "--lease-duration", "3s"}
	}
	runChild := func(name, cmd string, extraEnv ...string) (int, string) {
		c := spawnHxdArgs(t, name, demoArgs(cmd), append([]string{"DATABASE_URL=" + dbURL, "HXD_SCHEMA=" + schema}, extraEnv...)...)
		code := c.waitExit(60 * time.Second)
		return code, c.log()
	}
	// The child's stdout is not captured by the harness: read the workspace
	// and the database instead, and the child's stderr for errors.
	code, log := runChild("crash", "crash")
	require.Equal(t, demoCrashCode, code, log)
	inv, err := os.ReadFile(filepath.Join(ws, tool.InvocationLogFile))
	require.NoError(t, err)
	require.Equal(t, tool.BuiltinWriteReport+"\n", string(inv))
	ds, err := readDemoSession(ws)
	require.NoError(t, err)
	require.Equal(t, schema, ds.Schema)

	var out bytes.Buffer
	e := env{getenv: func(k string) string {
		switch k {
		case "DATABASE_URL":
			return dbURL
		case "HXD_SCHEMA":
			return schema
		}
		return ""
	}, stdout: &out, stderr: io.Discard}
	require.NoError(t, run(context.Background(), demoArgs("status"), e))
	require.Contains(t, out.String(), "Status: running")
	require.Contains(t, out.String(), "Tool invocations: 1")

	// Without the database URL, status names where the session is instead
	// of opening (or creating) a SQLite file in the workspace.
	noURL := env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard}
	err = run(context.Background(), demoArgs("status"), noURL)
	require.ErrorContains(t, err, "is on PostgreSQL (schema "+strconv.Quote(schema)+"): set DATABASE_URL or pass --database-url")
	_, statErr := os.Stat(filepath.Join(ws, "hxd.db"))
	require.ErrorIs(t, statErr, os.ErrNotExist)

	// Resume in this process at once: the crashed process's liveness lock
	// went with it, so its 3 s lease does not have to run out.
	out.Reset()
	require.NoError(t, run(context.Background(), demoArgs("resume"), e), out.String())
	require.Contains(t, out.String(), "Status: completed")
	require.Contains(t, out.String(), "Tool invocations: 1")
	out.Reset()
	require.NoError(t, run(context.Background(), demoArgs("resume"), e))
	require.Contains(t, out.String(), demoNothingToDo)
}

// TestPostgresDemoResumeWhileLeased: resume while a live process holds the
// session's lease is refused with the wait hint (exit 1). The crashed
// process holds nothing (its liveness lock went with it): another process
// claims the session at once, well inside the 60 s lease.
func TestPostgresDemoResumeWhileLeased(t *testing.T) {
	t.Parallel()
	dbURL, schema := testDatabase(t)
	ws := filepath.Join(t.TempDir(), "ws")
	c := spawnHxdArgs(t, "crash", []string{"demo", "crash-recovery", "crash", "--workspace", ws, "--lease-duration", "60s"},
		"DATABASE_URL="+dbURL, "HXD_SCHEMA="+schema)
	require.Equal(t, demoCrashCode, c.waitExit(60*time.Second), c.log())
	ds, err := readDemoSession(ws)
	require.NoError(t, err)
	live := openTestPG(t, dbURL, schema)
	l, err := live.SessionLock(context.Background(), hxruntime.SessionKey(hxruntime.LocalPrincipal, ds.SessionID))
	require.NoError(t, err, "the crashed process's lease does not block a live one")
	defer func() { require.NoError(t, l.Release(context.Background())) }()
	e := env{getenv: func(k string) string {
		if k == "DATABASE_URL" {
			return dbURL
		}
		return ""
	}, stdout: io.Discard, stderr: io.Discard}
	err = run(context.Background(), []string{"demo", "crash-recovery", "resume", "--workspace", ws}, e)
	require.Error(t, err)
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.code)
	require.True(t, strings.HasPrefix(err.Error(), "Session lease is still active. Wait at least 60 seconds"), err.Error())
}
