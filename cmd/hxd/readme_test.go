package main

// The README's commands are run as written (issue 18, item 13), so that
// they cannot drift from what hxd does. The convention, also in
// DEVELOPERS.md ("The README's commands"):
//
//   - Every fenced block names its language. Blocks fenced ```sh are run;
//     other languages (json, text, ts, ...) are not. A shell block fenced
//     as bash, shell, console, zsh or sh-session is refused, so a new
//     shell block is either run or explicitly excluded.
//   - A ```sh block right after `<!-- readme-test: skip REASON -->` is not
//     run (a template, a make target, a server on a fixed port); the reason
//     is required. After `<!-- readme-test: postgres -->` it runs only
//     when the test PostgreSQL is reachable (always under CI=true), in a
//     schema of its own (HXD_SCHEMA), with HXD_TEST_DATABASE_URL in place
//     of the default URL.
//   - The runnable blocks run in README order as one bash script (set
//     -Eeuo pipefail: a failing command or an unset variable fails it;
//     shell variables carry from block to block), in a fresh folder, with
//     `bin/hxd` being this test binary run as hxd (main_test.go) and
//     `make run`'s server, `hxd serve --demo --db ./hxd.db`, started
//     in-process on 127.0.0.1:0 in place of 127.0.0.1:8080.
//
// Afterwards the test checks that the walkthrough reached its documented
// end: the invoice run and the approved run completed, the approved tool
// ran once, and the crash demo exited 42 and resumed to completion.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/hxtest"
)

// readmeBlock is one fenced block of a Markdown file.
type readmeBlock struct {
	Line int    // of the opening fence, 1-based
	Lang string // the fence's info string
	Body string
	// Mode is how the test treats a sh block: run, skip or postgres;
	// empty for other languages.
	Mode   string
	Reason string // of a skip
}

const (
	readmeRun      = "run"
	readmeSkip     = "skip"
	readmePostgres = "postgres"
)

// readmeDirective is the marker comment before a fence.
var readmeDirective = regexp.MustCompile(`^<!--\s*readme-test:\s*(\S+)\s*(.*?)\s*-->$`)

// readmeShellLangs are shell fences other than sh: refused, so that every
// shell block is run or explicitly excluded.
var readmeShellLangs = map[string]bool{"bash": true, "shell": true, "console": true, "zsh": true, "sh-session": true, "shell-session": true}

// parseReadme returns the fenced blocks of a Markdown text, with each sh
// block's mode. It refuses a fence without a language, a shell fence
// other than sh, an unknown or misplaced marker and a skip without reason.
func parseReadme(text string) ([]readmeBlock, error) {
	var (
		blocks  []readmeBlock
		errs    []error
		cur     *readmeBlock
		body    strings.Builder
		pending *readmeBlock // the marker waiting for its fence
		pendAt  int
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if trimmed == "```" {
				cur.Body = body.String()
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			body.WriteString(line)
			body.WriteByte('\n')
			continue
		}
		if lang, ok := strings.CutPrefix(trimmed, "```"); ok {
			b := readmeBlock{Line: n, Lang: strings.TrimSpace(lang)}
			switch {
			case b.Lang == "":
				errs = append(errs, fmt.Errorf("line %d: a fence without a language (```sh is run; text, json, ts, ... are not)", n))
			case readmeShellLangs[b.Lang]:
				errs = append(errs, fmt.Errorf("line %d: ```%s: fence shell commands as ```sh (run, or marked readme-test: skip REASON)", n, b.Lang))
			case b.Lang == "sh":
				b.Mode = readmeRun
				if pending != nil {
					b.Mode, b.Reason = pending.Mode, pending.Reason
				}
			case pending != nil:
				errs = append(errs, fmt.Errorf("line %d: a readme-test marker before a ```%s block (only sh blocks are run)", pendAt, b.Lang))
			}
			pending = nil
			cur = &b
			body.Reset()
			continue
		}
		if m := readmeDirective.FindStringSubmatch(trimmed); m != nil {
			if pending != nil {
				errs = append(errs, fmt.Errorf("line %d: a readme-test marker not followed by a ```sh block", pendAt))
			}
			pending, pendAt = &readmeBlock{Mode: m[1], Reason: m[2]}, n
			switch {
			case m[1] == readmeSkip && m[2] == "":
				errs = append(errs, fmt.Errorf("line %d: readme-test: skip needs a reason", n))
			case m[1] == readmePostgres && m[2] != "":
				errs = append(errs, fmt.Errorf("line %d: readme-test: postgres takes no argument", n))
			case m[1] != readmeSkip && m[1] != readmePostgres:
				errs = append(errs, fmt.Errorf("line %d: unknown readme-test marker %q (skip REASON or postgres)", n, m[1]))
			}
			continue
		}
		if trimmed != "" && pending != nil {
			errs = append(errs, fmt.Errorf("line %d: a readme-test marker not followed by a ```sh block", pendAt))
			pending = nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		errs = append(errs, fmt.Errorf("line %d: the fence is never closed", cur.Line))
	}
	if pending != nil {
		errs = append(errs, fmt.Errorf("line %d: a readme-test marker not followed by a ```sh block", pendAt))
	}
	return blocks, errors.Join(errs...)
}

func TestParseReadme(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		text string
		want []readmeBlock
		err  string
	}{
		{
			name: "sh runs, other languages do not",
			text: "# t\n\n```sh\necho a\n```\n\n```json\n{}\n```\n",
			want: []readmeBlock{{Line: 3, Lang: "sh", Body: "echo a\n", Mode: readmeRun}, {Line: 7, Lang: "json", Body: "{}\n"}},
		},
		{
			name: "skip with a reason",
			text: "<!-- readme-test: skip starts a server -->\n```sh\nmake run\n```\n",
			want: []readmeBlock{{Line: 2, Lang: "sh", Body: "make run\n", Mode: readmeSkip, Reason: "starts a server"}},
		},
		{
			name: "a blank line between marker and fence",
			text: "<!-- readme-test: postgres -->\n\n```sh\nx\n```\n",
			want: []readmeBlock{{Line: 3, Lang: "sh", Body: "x\n", Mode: readmePostgres}},
		},
		{name: "skip without a reason", text: "<!-- readme-test: skip -->\n```sh\nx\n```\n", err: "line 1: readme-test: skip needs a reason"},
		{name: "unknown marker", text: "<!-- readme-test: maybe -->\n```sh\nx\n```\n", err: `unknown readme-test marker "maybe"`},
		{name: "marker before text", text: "<!-- readme-test: skip r -->\nprose\n```sh\nx\n```\n", err: "line 1: a readme-test marker not followed by a ```sh block"},
		{name: "marker before json", text: "<!-- readme-test: skip r -->\n```json\n{}\n```\n", err: "line 1: a readme-test marker before a ```json block"},
		{name: "marker at the end", text: "```sh\nx\n```\n<!-- readme-test: skip r -->\n", err: "line 4: a readme-test marker not followed"},
		{name: "bash fence", text: "```bash\nx\n```\n", err: "line 1: ```bash: fence shell commands as ```sh"},
		{name: "console fence", text: "```console\n$ x\n```\n", err: "```console"},
		{name: "no language", text: "```\ntree\n```\n", err: "line 1: a fence without a language"},
		{name: "unclosed", text: "```sh\nx\n", err: "line 1: the fence is never closed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseReadme(tc.text)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// readmeAddr is the address the README's commands talk to (`make run`).
const readmeAddr = "127.0.0.1:8080"

func TestReadmeShellBlocks(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's commands need %s on PATH (Debian: apt-get install curl jq; macOS: brew install jq): %v", tool, err)
		}
	}
	root, err := hxtest.RepoRoot()
	require.NoError(t, err)
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks, err := parseReadme(string(text))
	require.NoError(t, err, "README.md")

	dir := t.TempDir()
	exe, err := os.Executable()
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o700))
	wrapper := "#!/bin/sh\n" + envRunMain + "=1 exec " + shellQuote(exe) + ` "$@"` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin", "hxd"), []byte(wrapper), 0o700))

	d := serveInProcess(t, func(string) string { return "" }, []string{"serve", "--demo",
		"--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "hxd.db"), "--workdir", dir, "--shutdown-timeout", "200ms"})
	addr := strings.TrimPrefix(d.base, "http://")

	scriptEnv := readmeEnv()
	var script strings.Builder
	script.WriteString("set -Eeuo pipefail\n")
	script.WriteString(`trap 'rc=$?; [ $rc -eq 0 ] || echo "readme-test: the block at $readme_test_block failed (exit status $rc)" >&2' EXIT` + "\n")
	var ran, pgRan int
	for _, b := range blocks {
		where := "README.md:" + strconv.Itoa(b.Line)
		body := b.Body
		switch b.Mode {
		case "":
			continue
		case readmeSkip:
			t.Logf("%s: not run: %s", where, b.Reason)
			continue
		case readmePostgres:
			dbURL, schema, ok := readmeDatabase(t)
			if !ok {
				continue
			}
			body = strings.ReplaceAll(body, defaultTestDatabaseURL, dbURL)
			scriptEnv = append(scriptEnv, "HXD_SCHEMA="+schema)
			pgRan++
		}
		ran++
		fmt.Fprintf(&script, "\nreadme_test_block=%s\n", where)
		script.WriteString(strings.ReplaceAll(body, readmeAddr, addr))
	}
	require.NotZero(t, ran, "README.md has no runnable ```sh block")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env = dir, scriptEnv
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	require.NoError(t, err, "the README's commands (%d blocks) failed; their output:\n%s", ran, out.String())
	t.Logf("%d README blocks ran; their output:\n%s", ran, out.String())

	// The crash demo exited 42 (once on SQLite, once on PostgreSQL) and
	// each resume finished its run.
	require.Equal(t, 1+pgRan, strings.Count(out.String(), "exit status 42"), "the crash demo exits 42")
	require.GreaterOrEqual(t, strings.Count(out.String(), "Status: completed"), 1+pgRan, "the crash demo's resume completes the run")

	// The walkthrough's sessions: the invoice run and the approved run
	// completed, and the approved tool ran.
	resp, body := d.do(t, http.MethodGet, "/sessions", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var list struct {
		Items []struct {
			SessionID string `json:"session_id"`
			Agent     struct{ Name string }
			LatestRun *struct {
				RunID  string `json:"run_id"`
				Status string
			} `json:"latest_run"`
		}
	}
	require.NoError(t, json.Unmarshal(body, &list), string(body))
	runs := map[string]string{} // agent → run
	for _, s := range list.Items {
		require.NotContains(t, runs, s.Agent.Name, "one session per agent")
		require.NotNil(t, s.LatestRun, "session %s has a run", s.SessionID)
		require.Equal(t, "completed", s.LatestRun.Status, "session %s (%s)", s.SessionID, s.Agent.Name)
		runs[s.Agent.Name] = s.LatestRun.RunID
	}
	require.Contains(t, runs, agent.DemoInvoiceAnalyst.Name)
	require.Contains(t, runs, agent.DemoInvoiceReminder.Name)

	var reminder *agent.Definition
	for _, def := range agent.Demo() {
		if def.Ref() == agent.DemoInvoiceReminder {
			reminder = def
		}
	}
	require.NotNil(t, reminder)
	call := reminder.Model.Script[0].ToolCalls[0]
	var input struct{ Text string }
	require.NoError(t, json.Unmarshal(call.Input, &input))
	evs := apEvents(t, d, runs[agent.DemoInvoiceReminder.Name])
	require.Len(t, apOfType(evs, "approval_required"), 1, "the run asked for approval")
	results := apOfType(evs, "tool_result")
	require.Len(t, results, 1, "the approved tool ran once")
	result := results[0]["data"].(map[string]any)
	require.Equal(t, false, result["is_error"], "approved, not declined: %v", result)
	require.Equal(t, input.Text, result["content"], "send_reminder (echo) answered the reminder")
	run := apRun(t, d, runs[agent.DemoInvoiceReminder.Name])
	require.Equal(t, reminder.Model.Script[1].Text, run["output"])

	for _, f := range []string{"run.hx", "offline.hx", "invoice-incident.hx"} {
		require.FileExists(t, filepath.Join(dir, f), "the flight-recorder commands write %s", f)
	}
}

// readmeEnv is the README script's environment: this process's without
// hxd's own variables, which would change what the commands do.
func readmeEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "HXD_") || k == "DATABASE_URL" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// readmeDatabase returns the test database and a schema of its own for a
// postgres block; ok is false (the block is not run) when the database is
// unreachable outside CI. Under CI=true that fails the test.
func readmeDatabase(t *testing.T) (dbURL, schema string, ok bool) {
	t.Helper()
	dbURL = os.Getenv("HXD_TEST_DATABASE_URL")
	if dbURL == "" {
		dbURL = defaultTestDatabaseURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err == nil {
		err = conn.Ping(ctx)
		_ = conn.Close(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL at HXD_TEST_DATABASE_URL unreachable under CI=true: %v", err)
		}
		t.Logf("PostgreSQL at HXD_TEST_DATABASE_URL unreachable: the README's postgres block is not run (CI would fail): %v", err)
		return "", "", false
	}
	dbURL, schema = testDatabase(t)
	return dbURL, schema, true
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
