package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/hxbundle"
)

// claudeAgent names its key variable; none of these tests sets it unless
// it says so.
const claudeAgent = `name: claude
version: v1
model:
  provider: anthropic
  model: claude-sonnet-4-5
  api_key_env: ANTHROPIC_API_KEY
`

// keyedAgents writes claudeAgent into a new agents folder.
func keyedAgents(t *testing.T) (dir, file string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	file = filepath.Join(dir, "claude.yaml")
	require.NoError(t, os.WriteFile(file, []byte(claudeAgent), 0o600))
	return dir, file
}

// runUntilDebug runs hxd with args (and --debug-addr 127.0.0.1:0) on the
// environment vars and returns whether it got as far as the
// debug listener, which serve and worker start right after loading their
// agents and before connecting to anything, its output and its error.
func runUntilDebug(t *testing.T, vars map[string]string, args ...string) (loaded bool, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var buf bytes.Buffer
	debugCh := make(chan string, 1)
	err = run(ctx, append(args, "--debug-addr", "127.0.0.1:0"), env{
		getenv: func(k string) string { return vars[k] }, stdout: &buf, stderr: &buf,
		onListen:      func(string) { t.Errorf("hxd %v served without Temporal", args) },
		onDebugListen: func(addr string) { debugCh <- addr },
		exit:          func(code int) { t.Errorf("unexpected exit(%d)", code) },
	})
	select {
	case <-debugCh:
		loaded = true
	default:
	}
	return loaded, buf.String(), err
}

// temporalVars are the S3 credentials serve --engine temporal and worker
// require (no S3 is reached: Temporal is dialed first and refuses).
var temporalVars = map[string]string{"HXD_S3_ACCESS_KEY": "ak", "HXD_S3_SECRET_KEY": "S3cretSK"}

// temporalArgs point at a Temporal frontend that refuses connections.
var temporalArgs = []string{"--temporal-address", "127.0.0.1:1", "--s3-endpoint", "http://127.0.0.1:1", "--s3-bucket", "hxd"}

// testSigningKey returns a new bundle signing key file (PostgreSQL and
// Temporal servers refuse to start without one).
func testSigningKey(t testing.TB) string {
	t.Helper()
	pemKey, err := hxbundle.GenerateKey()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "bundle-signing-key.pem")
	require.NoError(t, os.WriteFile(path, pemKey, 0o600))
	return path
}

// TestAgentKeysCheckedWhereModelsAreCalled (issue 20, item 5): an agent
// whose api_key_env variable is unset is refused at start-up, naming the
// file and the variable, where models are called: by `hxd serve` with the
// local engine and by `hxd worker` (before it connects to Temporal), but
// not by `hxd serve --engine temporal`, which never calls a model.
func TestAgentKeysCheckedWhereModelsAreCalled(t *testing.T) {
	t.Parallel()
	want := func(file string) string {
		return file + ": model.api_key_env: environment variable ANTHROPIC_API_KEY is not set or empty"
	}

	t.Run("serve local refuses", func(t *testing.T) {
		t.Parallel()
		dir, file := keyedAgents(t)
		db := filepath.Join(t.TempDir(), "hxd.db")
		loaded, _, err := runUntilDebug(t, map[string]string{"OPENAI_API_KEY": "sk-0penAI-S3cret"},
			"serve", "--addr", "127.0.0.1:0", "--db", db, "--agents", dir)
		require.ErrorIs(t, err, agent.ErrKeyNotSet)
		require.ErrorContains(t, err, want(file))
		require.NotContains(t, err.Error(), "S3cret", "no environment value shown")
		require.False(t, loaded, "refused before anything started")
		require.NoFileExists(t, db, "refused before the database is opened")
	})

	t.Run("serve local with the key", func(t *testing.T) {
		t.Parallel()
		dir, _ := keyedAgents(t)
		vars := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-S3cret"}
		d := serveInProcess(t, func(k string) string { return vars[k] }, []string{"serve", "--addr", "127.0.0.1:0",
			"--db", filepath.Join(t.TempDir(), "hxd.db"), "--agents", dir, "--shutdown-timeout", "200ms"})
		resp, body := d.do(t, http.MethodGet, "/agents/claude/v1", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Contains(t, string(body), `"provider":"anthropic"`)
		require.NotContains(t, string(body), "S3cret", "the agent listing never shows the key")
	})

	t.Run("serve temporal accepts", func(t *testing.T) {
		t.Parallel()
		dir, _ := keyedAgents(t)
		args := append([]string{"serve", "--engine", "temporal", "--addr", "127.0.0.1:0", "--agents", dir,
			"--bundle-signing-key", testSigningKey(t)}, temporalArgs...)
		loaded, _, err := runUntilDebug(t, temporalVars, args...)
		require.True(t, loaded, "the agents loaded without the key variable: %v", err)
		require.Error(t, err, "no Temporal to connect to")
		require.NotErrorIs(t, err, agent.ErrInvalidDefinition)
		require.ErrorContains(t, err, "temporal: connect 127.0.0.1:1")
	})

	t.Run("worker refuses", func(t *testing.T) {
		t.Parallel()
		dir, file := keyedAgents(t)
		args := append([]string{"worker", "--agents", dir}, temporalArgs...)
		loaded, _, err := runUntilDebug(t, temporalVars, args...)
		require.ErrorIs(t, err, agent.ErrKeyNotSet)
		require.ErrorContains(t, err, want(file))
		require.NotContains(t, err.Error(), "S3cret")
		require.False(t, loaded, "refused before connecting to anything")
	})

	t.Run("worker with the key", func(t *testing.T) {
		t.Parallel()
		dir, _ := keyedAgents(t)
		vars := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-S3cret"}
		for k, v := range temporalVars {
			vars[k] = v
		}
		args := append([]string{"worker", "--agents", dir}, temporalArgs...)
		loaded, stderr, err := runUntilDebug(t, vars, args...)
		require.True(t, loaded, "the agents loaded: %v", err)
		require.ErrorContains(t, err, "temporal: connect 127.0.0.1:1")
		require.NotContains(t, err.Error()+stderr, "sk-ant-S3cret")
	})
}
