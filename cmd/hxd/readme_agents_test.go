package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/hxtest"
	"hxd/internal/model"
)

// TestReadmeAgentFiles (issue 20, item 5): the README's agent files, its
// ```yaml blocks, each named by its first line (`# agents/x.yaml`), load
// as written: a Claude agent and an OpenAI agent, each with its key named
// by api_key_env only. Without their variables they are refused with the
// message the README shows.
func TestReadmeAgentFiles(t *testing.T) {
	t.Parallel()
	root, err := hxtest.RepoRoot()
	require.NoError(t, err)
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks, err := parseReadme(string(text))
	require.NoError(t, err, "README.md")

	set := func(string) (string, bool) { return "sk-test-S3cret", true }
	unset := func(string) (string, bool) { return "", false }
	providers := map[string]bool{}
	for _, b := range blocks {
		if b.Lang != "yaml" {
			continue
		}
		first, _, _ := strings.Cut(b.Body, "\n")
		name, ok := strings.CutPrefix(first, "# ")
		require.True(t, ok, "README.md:%d: an agent file's first line names it (# agents/x.yaml)", b.Line)
		d, err := agent.LoadWith(strings.NewReader(b.Body), name, agent.LoadOptions{LookupEnv: set})
		require.NoError(t, err, "README.md:%d", b.Line)
		require.NotEmpty(t, d.Model.APIKeyEnv, "README.md:%d names its key variable", b.Line)
		require.NotContains(t, b.Body, "sk-", "README.md:%d: no key in the file", b.Line)
		providers[d.Model.Provider] = true

		_, err = agent.LoadWith(strings.NewReader(b.Body), name, agent.LoadOptions{LookupEnv: unset})
		require.ErrorIs(t, err, agent.ErrKeyNotSet, "README.md:%d", b.Line)
		require.ErrorContains(t, err, name+": model.api_key_env: environment variable "+d.Model.APIKeyEnv+" is not set or empty")
		if d.Model.Provider == model.ProviderAnthropic {
			require.Contains(t, string(text), "hxd: load agents: "+err.Error(), "the README shows the refusal as hxd prints it")
		}
	}
	require.Equal(t, map[string]bool{model.ProviderAnthropic: true, model.ProviderOpenAI: true}, providers,
		"the README shows a Claude agent and an OpenAI agent")
}
