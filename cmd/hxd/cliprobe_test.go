package main

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A named pipe given to verify or playback is refused at once: opening it
// for reading would block until some writer appears.
func TestVerifyPlaybackRefuseFIFO(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "pipe.hx")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, cmd := range []string{"verify", "playback"} {
		done := make(chan cliResult, 1)
		go func() { done <- runCLI(t, cmd, fifo) }()
		select {
		case res := <-done:
			require.Equal(t, 2, res.code, res.stderr)
			require.Contains(t, res.stderr, "not a regular file")
		case <-time.After(5 * time.Second):
			t.Fatalf("%s blocked on a named pipe", cmd)
		}
	}
}

// "--output -" does not write a file named "-" (nor to stdout: a bundle is
// a zip archive): it is a usage error.
func TestOutputDashIsUsageError(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"export", "--db", filepath.Join(dir, "none.db"), "--session", "s", "--run", "r", "--output", "-"},
		{"demo", "flight-recorder", "--output", "-"},
	} {
		res := runCLI(t, args...)
		require.Equal(t, 2, res.code, res.stderr)
		require.Contains(t, res.stderr, "--output -")
		require.NoFileExists(t, filepath.Join(dir, "-"))
	}
}

// Negative durations are refused like the agent file's negative
// max_session_duration_seconds, not silently read as "none" or "at once".
func TestServeNegativeDurationsAreUsageErrors(t *testing.T) {
	t.Parallel()
	e := env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard}
	for _, f := range []string{"--max-session-duration", "--shutdown-timeout"} {
		_, err := parseServeFlags([]string{f, "-5s"}, e)
		var ee *exitError
		require.ErrorAs(t, err, &ee, f)
		require.Equal(t, 2, ee.code)
		require.Contains(t, err.Error(), f+" must not be negative", f)
	}
	cfg, err := parseServeFlags([]string{"--max-session-duration", "0", "--shutdown-timeout", "0"}, e)
	require.NoError(t, err)
	require.Zero(t, cfg.MaxSessionDuration)
}

// version takes no arguments: a flag or word after it is a usage error,
// not silently ignored.
func TestVersionRefusesArguments(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "version")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "hxd "+version+"\n", res.stdout)
	for _, extra := range []string{"extra", "--bogus"} {
		res := runCLI(t, "version", extra)
		require.Equal(t, 2, res.code, extra)
		require.Empty(t, res.stdout, extra)
		require.Contains(t, res.stderr, "version takes no arguments", extra)
	}
}

// A --db that is a folder is named as such, not reported as SQLite's
// "unable to open database file (14)".
func TestDBDirectoryIsNamed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--db", dir},
		{"migrate", "--db", dir},
		{"export", "--db", dir, "--session", "s", "--run", "r", "--output", filepath.Join(t.TempDir(), "x.hx")},
		{"demo", "crash-recovery", "crash", "--workspace", t.TempDir(), "--db", dir},
	} {
		res := runCLI(t, args...)
		require.Equal(t, 1, res.code, "%v: %s", args, res.stderr)
		require.Contains(t, res.stderr, dir+" is a directory, not a SQLite database file", args)
		require.NotContains(t, res.stderr, "(14)", args)
	}
}

// A --db that is not a SQLite file is named in the message.
func TestNotSQLiteFileIsNamed(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "notes.db")
	require.NoError(t, os.WriteFile(db, []byte("not a database, just notes\n"), 0o600))
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--db", db},
		{"migrate", "--db", db},
	} {
		res := runCLI(t, args...)
		require.Equal(t, 1, res.code, "%v: %s", args, res.stderr)
		require.Contains(t, res.stderr, db, args)
		require.Contains(t, res.stderr, "file is not a database", args)
	}
}

// A redaction rules file of the wrong shape is explained without Go type
// names (such as []hxbundle.Rule).
func TestRedactFileErrorsNameNoGoTypes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, body := range []string{`{"x":1}`, `[{"kind": 5}]`, `[1]`, `[{`} {
		rules := filepath.Join(dir, "rules.json")
		require.NoError(t, os.WriteFile(rules, []byte(body), 0o600))
		res := runCLI(t, "export", "--db", filepath.Join(dir, "none.db"), "--session", "s", "--run", "r",
			"--output", filepath.Join(dir, "x.hx"), "--redact-file", rules)
		require.Equal(t, 1, res.code, body)
		require.Contains(t, res.stderr, "redaction rules "+rules, body)
		require.NotContains(t, res.stderr, "Go value", body)
		require.NotContains(t, res.stderr, "hxbundle", body)
		require.NotContains(t, res.stderr, "json: ", body)
	}
}

// Flags may follow the bundle file ("hxd verify X.hx --json"), as they
// may precede it.
func TestVerifyFlagAfterFile(t *testing.T) {
	t.Parallel()
	empty := filepath.Join(t.TempDir(), "empty.hx")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	for _, args := range [][]string{{"verify", "--json", empty}, {"verify", empty, "--json"}} {
		res := runCLI(t, args...)
		require.Equal(t, 2, res.code, "%v: %s", args, res.stderr)
		require.Contains(t, res.stdout, `"valid": false`, args)
	}
	res := runCLI(t, "verify", empty, "--json", empty)
	require.Equal(t, 2, res.code)
	require.Contains(t, res.stderr, "verify takes one bundle file, got 2 arguments")
	res = runCLI(t, "playback", empty, "--bogus")
	require.Equal(t, 2, res.code)
	require.Contains(t, res.stderr, "flag provided but not defined: -bogus")
}

// A malformed --s3-endpoint is a usage error whose message never shows a
// password written into it; credentials come from the environment only.
func TestS3EndpointValidatedWithoutEchoingSecrets(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"HXD_S3_ACCESS_KEY": "ak", "HXD_S3_SECRET_KEY": "sk"}
	for _, ep := range []string{"ftp://u:S3cretPW@127.0.0.1:1", "http://u:S3cretPW@[::1", "http://u:S3cretPW@127.0.0.1:1", "u:S3cretPW@127.0.0.1:1", "http://127.0.0.1:1/path"} {
		for _, cmd := range [][]string{{"worker"}, {"serve", "--engine", "temporal"}} {
			args := append(cmd, "--temporal-address", "127.0.0.1:1", "--s3-endpoint", ep, "--s3-bucket", "b")
			res := runCLIEnv(t, vars, args...)
			require.Equal(t, 2, res.code, "%v: %s", args, res.stderr)
			require.Contains(t, res.stderr, "--s3-endpoint", ep)
			require.NotContains(t, res.stderr, "S3cretPW", ep)
		}
	}
}

// With --engine temporal no database is opened, so an empty --db is not
// a problem.
func TestTemporalEngineIgnoresEmptyDB(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"HXD_S3_ACCESS_KEY": "ak", "HXD_S3_SECRET_KEY": "sk"}
	e := env{getenv: func(k string) string { return vars[k] }, stdout: io.Discard, stderr: io.Discard}
	_, err := parseServeFlags([]string{"--engine", "temporal", "--temporal-address", "127.0.0.1:1",
		"--s3-endpoint", "127.0.0.1:1", "--s3-bucket", "b", "--db", ""}, e)
	require.NoError(t, err)
	_, err = parseServeFlags([]string{"--db", ""}, e)
	require.ErrorContains(t, err, "--db must not be empty")
}

// An agent file that redefines a demo agent under --demo is refused naming
// the file and --demo.
func TestAgentFileClashingWithDemoNamesFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	raw, err := os.ReadFile("../../examples/agents/invoice-analyst.yaml") // invoice-analyst@v1, as --demo
	require.NoError(t, err)
	file := filepath.Join(dir, "mine.yaml")
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	res := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "x.db"), "--demo", "--agents", dir)
	require.Equal(t, 1, res.code, res.stderr)
	require.Contains(t, res.stderr, file+": agent invoice-analyst@v1 is already defined by --demo")
	require.NoFileExists(t, filepath.Join(dir, "x.db"))
}
