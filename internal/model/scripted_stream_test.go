package model

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSplitPieces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"", nil},
		{"one", []string{"one"}},
		{"Hello big world", []string{"Hello ", "big ", "world"}},
		{"trailing ", []string{"trailing "}},
		{"a  b", []string{"a ", " ", "b"}},
	} {
		require.Equal(t, tc.want, SplitPieces(tc.text), tc.text)
	}
}

func TestScriptedCompleteStream(t *testing.T) {
	t.Parallel()
	s := NewScripted([]ScriptStep{
		{Text: "Hello big world", Thinking: "let me see"},
		{Text: "one two three", FailAttempts: 1, FailAfterDeltas: 2},
		{ToolCalls: []ToolCall{{ID: "c1", Name: "echo"}}},
	})
	for _, tc := range []struct {
		name          string
		step, attempt int
		wantDeltas    []Delta
		wantText      string
		wantFailure   bool
	}{
		{name: "thinking then text", step: 1, attempt: 1, wantText: "Hello big world", wantDeltas: []Delta{
			{DeltaThinking, "let "}, {DeltaThinking, "me "}, {DeltaThinking, "see"},
			{DeltaText, "Hello "}, {DeltaText, "big "}, {DeltaText, "world"},
		}},
		{name: "broken stream", step: 2, attempt: 1, wantFailure: true, wantDeltas: []Delta{
			{DeltaText, "one "}, {DeltaText, "two "},
		}},
		{name: "retry streams whole", step: 2, attempt: 2, wantText: "one two three", wantDeltas: []Delta{
			{DeltaText, "one "}, {DeltaText, "two "}, {DeltaText, "three"},
		}},
		{name: "no text", step: 3, attempt: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []Delta
			resp, err := s.CompleteStream(t.Context(), &Request{Step: tc.step, Attempt: tc.attempt}, func(d Delta) { got = append(got, d) })
			require.Equal(t, tc.wantDeltas, got)
			if tc.wantFailure {
				var f *Failure
				require.ErrorAs(t, err, &f)
				require.Equal(t, FailureConnection, f.Type)
				require.True(t, f.Retryable)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantText, resp.Text)
			plain, err := s.Complete(t.Context(), &Request{Step: tc.step, Attempt: tc.attempt})
			require.NoError(t, err)
			require.Equal(t, plain, resp)
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.CompleteStream(ctx, &Request{Step: 1, Attempt: 1}, func(Delta) {})
	require.True(t, errors.Is(err, context.Canceled))
}

func TestScriptValidateStreamFields(t *testing.T) {
	t.Parallel()
	for name, step := range map[string]ScriptStep{
		"negative":         {Text: "a b", FailAttempts: 1, FailAfterDeltas: -1},
		"without failures": {Text: "a b", FailAfterDeltas: 1},
		"more than pieces": {Text: "a b", FailAttempts: 1, FailAfterDeltas: 3},
	} {
		err := Config{Provider: ProviderScripted, Script: []ScriptStep{step}}.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	require.NoError(t, Config{Provider: ProviderScripted, Script: []ScriptStep{{Text: "a b", FailAttempts: 1, FailAfterDeltas: 2}}}.Validate())
}
