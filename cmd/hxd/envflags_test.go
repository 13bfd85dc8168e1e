package main

import (
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// secretDBURL and secretRedis hold passwords that must never be printed.
const (
	secretDBURL = "postgres://hxd:S3cretPW@db.example:5432/hxd"
	secretRedis = "redis://:R3disPW@redis.example:6379/0"
)

// unreachableDBURL names a PostgreSQL that refuses connections at once.
const unreachableDBURL = "postgres://hxd:S3cretPW@127.0.0.1:1/hxd?connect_timeout=2"

// TestUsageHidesEnvSecrets: usage (printed on a bad flag or -h) never shows
// a database or Redis URL from the environment; it names the variable.
func TestUsageHidesEnvSecrets(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DATABASE_URL": secretDBURL, "HXD_DATABASE_URL": secretDBURL, "HXD_REDIS_ADDR": secretRedis}
	tests := []struct {
		name string
		args []string
		code int
		want string // a part of the usage
	}{
		{name: "serve bad flag", args: []string{"serve", "--bogus"}, code: 2, want: "DATABASE_URL"},
		{name: "serve help", args: []string{"serve", "-h"}, code: 0, want: "DATABASE_URL"},
		{name: "migrate bad flag", args: []string{"migrate", "--pool-size", "3"}, code: 2, want: "DATABASE_URL"},
		{name: "export bad flag", args: []string{"export", "--nope"}, code: 2, want: "DATABASE_URL"},
		{name: "export help", args: []string{"export", "-h"}, code: 0, want: "DATABASE_URL"},
		{name: "worker bad flag", args: []string{"worker", "--bogus"}, code: 2, want: "HXD_REDIS_ADDR"},
		{name: "demo bad flag", args: []string{"demo", "crash-recovery", "status", "--bogus"}, code: 2, want: "--database-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := runCLIEnv(t, vars, tt.args...)
			require.Equal(t, tt.code, res.code, res.stderr)
			out := res.stdout + res.stderr
			require.Contains(t, out, tt.want)
			for _, secret := range []string{"S3cretPW", "R3disPW"} {
				require.NotContains(t, out, secret)
			}
		})
	}
}

// TestInvalidEnvIsUsageError: an environment value a flag would refuse is
// a usage error naming the variable and the value, as the flag's is.
func TestInvalidEnvIsUsageError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		parse  func(env) error
		envVar string // the variable
		value  string
	}{
		{"serve resume", func(e env) error { _, err := parseServeFlags(nil, e); return err }, "HXD_RESUME_INTERRUPTED", "no"},
		{"serve demo", func(e env) error { _, err := parseServeFlags(nil, e); return err }, "HXD_DEMO", "yes"},
		{"serve pool size", func(e env) error { _, err := parseServeFlags(nil, e); return err }, "HXD_POOL_SIZE", "abc"},
		{"serve lease", func(e env) error { _, err := parseServeFlags(nil, e); return err }, "HXD_LEASE_DURATION", "5"},
		{"serve auto-migrate", func(e env) error { _, err := parseServeFlags(nil, e); return err }, "HXD_AUTO_MIGRATE", "maybe"},
		{"serve watch poll", func(e env) error { _, err := parseServeFlags(nil, e); return err }, "HXD_WATCH_POLL", "often"},
		{"worker demo", func(e env) error { _, err := parseWorkerFlags(nil, e); return err }, "HXD_DEMO", "yes"},
		{"demo pool size", func(e env) error { _, _, err := parseDemoFlags([]string{"status"}, e); return err }, "HXD_POOL_SIZE", "abc"},
		{"demo lease", func(e env) error { _, _, err := parseDemoFlags([]string{"status"}, e); return err }, "HXD_LEASE_DURATION", "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.parse(env{getenv: func(k string) string {
				if k == tt.envVar {
					return tt.value
				}
				return ""
			}, stdout: io.Discard, stderr: io.Discard})
			var ee *exitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, 2, ee.code, "%v", err)
			require.ErrorContains(t, err, tt.envVar)
			require.ErrorContains(t, err, `"`+tt.value+`"`)
		})
	}
}

// TestEnvFlagPrecedence: a variable sets its flag, and a flag given on the
// command line wins over it.
func TestEnvFlagPrecedence(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"HXD_DEMO": "true", "HXD_RESUME_INTERRUPTED": "false", "HXD_POOL_SIZE": "7",
		"HXD_LEASE_DURATION": "9s", "HXD_WATCH_POLL": "1h", "HXD_REDIS_ADDR": secretRedis,
		"HXD_DATABASE_URL": "postgres://a@h/db", "DATABASE_URL": "postgres://b@h/db",
	}
	e := env{getenv: func(k string) string { return vars[k] }, stdout: io.Discard, stderr: io.Discard}
	cfg, err := parseServeFlags(nil, e)
	require.NoError(t, err)
	require.True(t, cfg.Demo)
	require.False(t, cfg.ResumeInterrupted)
	require.Equal(t, 7, cfg.PG.PoolSize)
	require.Equal(t, 9*time.Second, cfg.PG.LeaseDuration)
	require.Equal(t, time.Hour, cfg.PG.WatchPoll)
	require.Equal(t, secretRedis, cfg.Temporal.RedisAddr)
	require.Equal(t, "postgres://a@h/db", cfg.PG.URL, "HXD_DATABASE_URL wins over DATABASE_URL")

	cfg, err = parseServeFlags([]string{"--demo=false", "--resume-interrupted", "--pool-size", "3",
		"--lease-duration", "4s", "--redis-addr", "r:6379", "--database-url", "postgres://c@h/db"}, e)
	require.NoError(t, err)
	require.False(t, cfg.Demo)
	require.True(t, cfg.ResumeInterrupted)
	require.Equal(t, 3, cfg.PG.PoolSize)
	require.Equal(t, 4*time.Second, cfg.PG.LeaseDuration)
	require.Equal(t, "r:6379", cfg.Temporal.RedisAddr)
	require.Equal(t, "postgres://c@h/db", cfg.PG.URL)
}

// TestDBFlagWinsOverDatabaseURL: an explicit --db wins over a database URL
// of the environment; --db with --database-url is a usage error (migrate
// migrates both).
func TestDBFlagWinsOverDatabaseURL(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"DATABASE_URL": unreachableDBURL}
	e := env{getenv: func(k string) string { return vars[k] }, stdout: io.Discard, stderr: io.Discard}
	db := filepath.Join(t.TempDir(), "explicit.db")
	tests := []struct {
		name string
		// parse returns the chosen SQLite file and PostgreSQL URL.
		parse func(args ...string) (db, url string, err error)
	}{
		{"serve", func(args ...string) (string, string, error) {
			cfg, err := parseServeFlags(args, e)
			if err != nil {
				return "", "", err
			}
			return cfg.DB, cfg.PG.URL, nil
		}},
		{"demo", func(args ...string) (string, string, error) {
			_, cfg, err := parseDemoFlags(append([]string{"status"}, args...), e)
			return cfg.DB, cfg.PG.URL, err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gotDB, gotURL, err := tt.parse("--db", db)
			require.NoError(t, err)
			require.Equal(t, db, gotDB)
			require.Empty(t, gotURL, "--db wins over DATABASE_URL")
			_, gotURL, err = tt.parse()
			require.NoError(t, err)
			require.Equal(t, unreachableDBURL, gotURL, "without --db the environment selects PostgreSQL")

			_, _, err = tt.parse("--db", db, "--database-url", unreachableDBURL)
			var ee *exitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, 2, ee.code)
			require.ErrorContains(t, err, "--db or --database-url, not both")
			require.NotContains(t, err.Error(), "S3cretPW")
		})
	}
	t.Run("migrate", func(t *testing.T) {
		t.Parallel()
		res := runCLIEnv(t, vars, "migrate", "--db", db)
		require.Equal(t, 0, res.code, res.stderr)
		require.Equal(t, "SQLite database "+db+" is up to date.\n", res.stdout)
		require.NotContains(t, res.stdout+res.stderr, "PostgreSQL")
	})
}

// TestPostgresOptionsValidated: every command taking the PostgreSQL
// options refuses an empty --schema before connecting.
func TestPostgresOptionsValidated(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"migrate", "--database-url", unreachableDBURL, "--schema", ""},
		{"serve", "--database-url", unreachableDBURL, "--schema", ""},
		{"demo", "crash-recovery", "status", "--database-url", unreachableDBURL, "--schema", ""},
		{"export", "--database-url", unreachableDBURL, "--schema", "", "--session", "s", "--run", "r", "--output", "x.hx"},
	} {
		res := runCLI(t, args...)
		require.Equal(t, 2, res.code, "%v: %s", args, res.stderr)
		require.Contains(t, res.stderr, "--schema must not be empty", args)
		require.NotContains(t, res.stdout, "up to date", args)
	}
}

// TestExportUsageErrors: bad export flags are usage errors (exit 2) that
// name the flags, before any store is opened.
func TestExportUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "none.db")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"artifacts without payloads", []string{"--db", db, "--include-artifacts"}, "--include-artifacts needs --include-payloads"},
		{"db and database url", []string{"--db", db, "--database-url", unreachableDBURL}, "--db or --database-url, not both"},
		{"schema without database url", []string{"--db", db, "--schema", "s"}, "--schema needs --database-url"},
		{"no store", nil, "export needs --db or --database-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"export", "--session", "s", "--run", "r", "--output", filepath.Join(dir, "x.hx")}, tt.args...)
			res := runCLI(t, args...)
			require.Equal(t, 2, res.code, res.stderr)
			require.Contains(t, res.stderr, tt.want)
			require.NotContains(t, res.stderr, "S3cretPW")
		})
	}
	require.NoFileExists(t, db)
}
