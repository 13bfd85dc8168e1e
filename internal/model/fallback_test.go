package model

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigValidateFallback: every fallback entry is validated as a
// model section of its own, its problems carrying the entry's index
// (FallbackError); an entry with a fallback list of its own is refused.
func TestConfigValidateFallback(t *testing.T) {
	t.Parallel()
	primary := Config{Provider: ProviderAnthropic, Model: "claude"}
	with := func(fb ...Config) Config {
		c := primary
		c.Fallback = fb
		return c
	}
	tests := []struct {
		name string
		cfg  Config
		// want maps an entry index (-1: the section itself) to a problem.
		want map[int]string
	}{
		{name: "one fallback", cfg: with(Config{Provider: ProviderOpenAI, Model: "gpt-4o"})},
		{name: "two fallbacks", cfg: with(Config{Provider: ProviderOpenAI, Model: "gpt-4o"}, Config{Provider: ProviderScripted, Script: []ScriptStep{{Text: "x"}}})},
		{name: "unknown provider", cfg: with(Config{Provider: ProviderOpenAI, Model: "m"}, Config{Provider: "gemini", Model: "g"}),
			want: map[int]string{1: `unknown provider "gemini"`}},
		{name: "missing model", cfg: with(Config{Provider: ProviderOpenAI}),
			want: map[int]string{0: `model is required for provider "openai"`}},
		{name: "missing provider", cfg: with(Config{Model: "m"}),
			want: map[int]string{0: "provider is required"}},
		{name: "nested fallback", cfg: with(Config{Provider: ProviderOpenAI, Model: "m", Fallback: []Config{{Provider: ProviderOpenAI, Model: "n"}}}),
			want: map[int]string{0: "a fallback entry cannot have a fallback list of its own"}},
		{name: "thinking on an openai fallback", cfg: with(Config{Provider: ProviderOpenAI, Model: "m", Thinking: &Thinking{BudgetTokens: 2048}}),
			want: map[int]string{0: `thinking is only supported by provider "anthropic"`}},
		{name: "too many", cfg: with(make([]Config, MaxFallbacks+1)...),
			want: map[int]string{-1: "at most 8 are allowed", 0: "provider is required", MaxFallbacks: "provider is required"}},
		{name: "primary problems stay unindexed", cfg: Config{Provider: ProviderOpenAI, Fallback: []Config{{Provider: ProviderOpenAI, Model: "m"}}},
			want: map[int]string{-1: `model is required for provider "openai"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				require.NoError(t, err)
				_, err := New(tt.cfg, Options{})
				require.NoError(t, err, "New accepts the section")
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			got := map[int][]string{}
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var fe *FallbackError
				if errors.As(e, &fe) {
					require.ErrorIs(t, fe, ErrInvalidConfig)
					got[fe.Index] = append(got[fe.Index], fe.Err.Error())
				} else {
					got[-1] = append(got[-1], e.Error())
				}
			}
			for i, problem := range tt.want {
				require.Contains(t, got, i, "no problem reported for entry %d: %v", i, err)
				found := false
				for _, msg := range got[i] {
					if strings.Contains(msg, problem) {
						found = true
					}
				}
				require.True(t, found, "entry %d: want %q in %q", i, problem, got[i])
			}
		})
	}
}

// TestConfigChain: the chain is the section itself (its fallback list
// left out), then each fallback entry in order; ChainAt refuses a
// position outside it.
func TestConfigChain(t *testing.T) {
	t.Parallel()
	fb := []Config{{Provider: ProviderOpenAI, Model: "gpt"}, {Provider: ProviderAnthropic, Model: "haiku"}}
	c := Config{Provider: ProviderAnthropic, Model: "opus", Fallback: fb}
	chain := c.Chain()
	require.Len(t, chain, 3)
	require.Equal(t, "opus", chain[0].Model)
	require.Nil(t, chain[0].Fallback)
	require.Equal(t, fb, chain[1:])
	for i, want := range chain {
		got, err := c.ChainAt(i)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, i := range []int{-1, 3} {
		_, err := c.ChainAt(i)
		require.ErrorIs(t, err, ErrNoSuchModel)
	}
	require.Len(t, Config{Provider: ProviderScripted}.Chain(), 1)
}
