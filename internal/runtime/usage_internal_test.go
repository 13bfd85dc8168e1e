package runtime

import (
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/model"
)

// TestAttemptUsageAccounting: each attempt's report is added to the usage
// the run had before that attempt (usage_base), accounting an attempt
// again replaces its share, and an answer whose provider reported no usage
// marks the usage incomplete without changing the sum, whatever the
// provider reported as numbers (the flag decides, not a zero usage).
func TestAttemptUsageAccounting(t *testing.T) {
	t.Parallel()
	type step struct {
		begin    bool // a new attempt starts
		u        model.Usage
		reported bool // model.Response.UsageReported
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
				{true, model.Usage{InputTokens: 10, OutputTokens: 2, CacheReadInputTokens: 1, CacheCreationInputTokens: 4}, true},
				{true, model.Usage{InputTokens: 20, OutputTokens: 3, CacheReadInputTokens: 5}, true},
			},
			want:     model.Usage{InputTokens: 30, OutputTokens: 5, CacheReadInputTokens: 6, CacheCreationInputTokens: 4},
			wantBase: model.Usage{InputTokens: 10, OutputTokens: 2, CacheReadInputTokens: 1, CacheCreationInputTokens: 4},
		},
		{
			name: "an attempt accounted twice counts once, with its last report",
			steps: []step{
				{true, model.Usage{InputTokens: 10, OutputTokens: 2}, true},
				{true, model.Usage{InputTokens: 7}, true},
				{false, model.Usage{InputTokens: 7, OutputTokens: 9}, true},
			},
			want:     model.Usage{InputTokens: 17, OutputTokens: 11},
			wantBase: model.Usage{InputTokens: 10, OutputTokens: 2},
		},
		{
			name: "an answer without usage",
			steps: []step{
				{true, model.Usage{InputTokens: 10, OutputTokens: 2}, true},
				{true, model.Usage{}, false},
			},
			want:       model.Usage{InputTokens: 10, OutputTokens: 2},
			wantBase:   model.Usage{InputTokens: 10, OutputTokens: 2},
			incomplete: true,
		},
		{
			name:  "a reported all-zero usage is complete",
			steps: []step{{true, model.Usage{}, true}},
		},
		{
			name:       "an unreported nonzero usage is incomplete",
			steps:      []step{{true, model.Usage{InputTokens: 3}, false}},
			want:       model.Usage{InputTokens: 3},
			incomplete: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &RunState{}
			for _, s := range tc.steps {
				if s.begin {
					BeginAttemptUsage(st)
				}
				AccountAttemptUsage(st, s.u, s.reported)
			}
			require.Equal(t, tc.want, st.Usage)
			require.Equal(t, tc.wantBase, st.UsageBase)
			require.Equal(t, tc.incomplete, st.UsageIncomplete)
		})
	}
}
