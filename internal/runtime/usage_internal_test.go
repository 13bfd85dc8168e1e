package runtime

import (
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/model"
)

// TestUsageReported: an all-zero usage is "not reported", except from the
// scripted provider, whose script sets usage (zero by default).
func TestUsageReported(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider string
		u        model.Usage
		want     bool
	}{
		{model.ProviderOpenAI, model.Usage{}, false},
		{model.ProviderAnthropic, model.Usage{}, false},
		{model.ProviderOpenAI, model.Usage{InputTokens: 1}, true},
		{model.ProviderAnthropic, model.Usage{CacheReadInputTokens: 5}, true},
		{model.ProviderOpenAI, model.Usage{OutputTokens: 2}, true},
		{model.ProviderScripted, model.Usage{}, true},
		{model.ProviderScripted, model.Usage{InputTokens: 3}, true},
	} {
		require.Equal(t, tc.want, UsageReported(tc.provider, tc.u), "%s %+v", tc.provider, tc.u)
	}
}

// TestAttemptUsageAccounting: each attempt's report is added to the usage
// the run had before that attempt (usage_base), accounting an attempt
// again replaces its share, and an answer without usage marks the usage
// incomplete without changing the sum.
func TestAttemptUsageAccounting(t *testing.T) {
	t.Parallel()
	type step struct {
		begin    bool // a new attempt starts
		provider string
		u        model.Usage
	}
	for _, tc := range []struct {
		name           string
		steps          []step
		want, wantBase model.Usage
		incomplete     bool
	}{
		{
			name: "two attempts add up",
			steps: []step{
				{true, model.ProviderAnthropic, model.Usage{InputTokens: 10, OutputTokens: 2, CacheReadInputTokens: 1, CacheCreationInputTokens: 4}},
				{true, model.ProviderAnthropic, model.Usage{InputTokens: 20, OutputTokens: 3, CacheReadInputTokens: 5}},
			},
			want:     model.Usage{InputTokens: 30, OutputTokens: 5, CacheReadInputTokens: 6, CacheCreationInputTokens: 4},
			wantBase: model.Usage{InputTokens: 10, OutputTokens: 2, CacheReadInputTokens: 1, CacheCreationInputTokens: 4},
		},
		{
			name: "an attempt accounted twice counts once, with its last report",
			steps: []step{
				{true, model.ProviderOpenAI, model.Usage{InputTokens: 10, OutputTokens: 2}},
				{true, model.ProviderOpenAI, model.Usage{InputTokens: 7}},
				{false, model.ProviderOpenAI, model.Usage{InputTokens: 7, OutputTokens: 9}},
			},
			want:     model.Usage{InputTokens: 17, OutputTokens: 11},
			wantBase: model.Usage{InputTokens: 10, OutputTokens: 2},
		},
		{
			name: "an answer without usage",
			steps: []step{
				{true, model.ProviderOpenAI, model.Usage{InputTokens: 10, OutputTokens: 2}},
				{true, model.ProviderOpenAI, model.Usage{}},
			},
			want:       model.Usage{InputTokens: 10, OutputTokens: 2},
			wantBase:   model.Usage{InputTokens: 10, OutputTokens: 2},
			incomplete: true,
		},
		{
			name:  "a scripted step without usage",
			steps: []step{{true, model.ProviderScripted, model.Usage{}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &RunState{}
			for _, s := range tc.steps {
				if s.begin {
					BeginAttemptUsage(st)
				}
				AccountAttemptUsage(st, s.provider, s.u)
			}
			require.Equal(t, tc.want, st.Usage)
			require.Equal(t, tc.wantBase, st.UsageBase)
			require.Equal(t, tc.incomplete, st.UsageIncomplete)
		})
	}
}
