package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
)

// fallbackKeyAgent is a Claude agent with an OpenAI fallback; the tests
// below set the primary's key and leave the fallback's unset.
const fallbackKeyAgent = claudeAgent + `  fallback:
    - provider: openai
      model: gpt-4o
      api_key_env: FALLBACK_OPENAI_KEY
`

// TestAgentFallbackKeysCheckedWhereModelsAreCalled (issue 20, items 4
// and 5): the key variable of a fallback entry is checked where models
// are called, as the primary's is (TestAgentKeysCheckedWhereModelsAreCalled):
// `hxd serve` with the local engine and `hxd worker` refuse the agent,
// naming the file, the entry and the variable, never its value; `hxd
// serve --engine temporal` loads it.
func TestAgentFallbackKeysCheckedWhereModelsAreCalled(t *testing.T) {
	t.Parallel()
	agents := func(t *testing.T) (dir, file string) {
		t.Helper()
		dir = filepath.Join(t.TempDir(), "agents")
		require.NoError(t, os.MkdirAll(dir, 0o700))
		file = filepath.Join(dir, "claude.yaml")
		require.NoError(t, os.WriteFile(file, []byte(fallbackKeyAgent), 0o600))
		return dir, file
	}
	want := func(file string) string {
		return file + ": model.fallback[0].api_key_env: environment variable FALLBACK_OPENAI_KEY is not set or empty"
	}
	vars := func(extra map[string]string) map[string]string {
		out := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-S3cret"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}

	t.Run("serve local refuses", func(t *testing.T) {
		t.Parallel()
		dir, file := agents(t)
		db := filepath.Join(t.TempDir(), "hxd.db")
		loaded, _, err := runUntilDebug(t, vars(nil), "serve", "--addr", "127.0.0.1:0", "--db", db, "--agents", dir)
		require.ErrorIs(t, err, agent.ErrKeyNotSet)
		require.ErrorContains(t, err, want(file))
		require.NotContains(t, err.Error(), "S3cret", "no environment value shown")
		require.False(t, loaded, "refused before anything started")
		require.NoFileExists(t, db)
	})

	t.Run("serve temporal accepts", func(t *testing.T) {
		t.Parallel()
		dir, _ := agents(t)
		args := append([]string{"serve", "--engine", "temporal", "--addr", "127.0.0.1:0", "--agents", dir,
			"--bundle-signing-key", testSigningKey(t)}, temporalArgs...)
		loaded, _, err := runUntilDebug(t, temporalVars, args...)
		require.True(t, loaded, "the agents loaded without any key variable: %v", err)
		require.NotErrorIs(t, err, agent.ErrInvalidDefinition)
		require.ErrorContains(t, err, "temporal: connect 127.0.0.1:1")
	})

	t.Run("worker refuses", func(t *testing.T) {
		t.Parallel()
		dir, file := agents(t)
		args := append([]string{"worker", "--agents", dir}, temporalArgs...)
		loaded, _, err := runUntilDebug(t, vars(temporalVars), args...)
		require.ErrorIs(t, err, agent.ErrKeyNotSet)
		require.ErrorContains(t, err, want(file))
		require.NotContains(t, err.Error(), "S3cret")
		require.False(t, loaded, "refused before connecting to anything")
	})

	t.Run("worker with both keys", func(t *testing.T) {
		t.Parallel()
		dir, _ := agents(t)
		args := append([]string{"worker", "--agents", dir}, temporalArgs...)
		v := vars(temporalVars)
		v["FALLBACK_OPENAI_KEY"] = "sk-S3cret"
		loaded, stderr, err := runUntilDebug(t, v, args...)
		require.True(t, loaded, "the agents loaded: %v", err)
		require.ErrorContains(t, err, "temporal: connect 127.0.0.1:1")
		require.NotContains(t, err.Error()+stderr, "S3cret")
	})
}
