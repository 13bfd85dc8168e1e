package model

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func testScript() []ScriptStep {
	return []ScriptStep{
		{
			Text: "Let me look.",
			ToolCalls: []ToolCall{
				{ID: "call_1", Name: "overdue_balance", Input: json.RawMessage(`{"account":"A-1"}`)},
				{ID: "call_2", Name: "echo"},
			},
			Usage: &Usage{InputTokens: 12, OutputTokens: 5},
		},
		{Text: "Still thinking.", FailAttempts: 2},
		{Text: "Done.", StopReason: "max_tokens"},
	}
}

func TestScripted(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name          string
		step, attempt int
		want          *Response
		wantFailure   *Failure
	}{
		{
			name: "step 1 with tool calls", step: 1, attempt: 1,
			want: &Response{
				Text: "Let me look.",
				ToolCalls: []ToolCall{
					{ID: "call_1", Name: "overdue_balance", Input: json.RawMessage(`{"account":"A-1"}`)},
					{ID: "call_2", Name: "echo", Input: json.RawMessage(`{}`)},
				},
				StopReason:    "tool_use",
				Usage:         Usage{InputTokens: 12, OutputTokens: 5},
				UsageReported: true,
			},
		},
		{
			name: "fail attempt 1", step: 2, attempt: 1,
			wantFailure: &Failure{Type: "ConnectionError", Message: "Injected model connection failure", Retryable: true},
		},
		{
			name: "fail attempt 2", step: 2, attempt: 2,
			wantFailure: &Failure{Type: "ConnectionError", Message: "Injected model connection failure", Retryable: true},
		},
		{
			name: "unset attempt counts as 1", step: 2, attempt: 0,
			wantFailure: &Failure{Type: "ConnectionError", Message: "Injected model connection failure", Retryable: true},
		},
		{name: "attempt 3 succeeds", step: 2, attempt: 3, want: &Response{Text: "Still thinking.", StopReason: "end_turn"}},
		{name: "explicit stop reason", step: 3, attempt: 1, want: &Response{Text: "Done.", StopReason: "max_tokens"}},
		{
			name: "exhausted", step: 4, attempt: 1,
			wantFailure: &Failure{Type: "ScriptExhausted", Message: "script has 3 steps, step 4 requested"},
		},
		{
			name: "step 0", step: 0, attempt: 1,
			wantFailure: &Failure{Type: "ScriptExhausted", Message: "script has 3 steps, step 0 requested"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := NewScripted(testScript())
			got, err := p.Complete(t.Context(), &Request{Step: tt.step, Attempt: tt.attempt})
			if tt.wantFailure != nil {
				require.Nil(t, got)
				var f *Failure
				require.ErrorAs(t, err, &f)
				require.Equal(t, tt.wantFailure, f)
				require.Equal(t, tt.wantFailure.Retryable, IsTransient(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestScriptedRestartSafe(t *testing.T) {
	t.Parallel()

	cfg := Config{Provider: ProviderScripted, Script: testScript()}
	a, err := New(cfg, Options{})
	require.NoError(t, err)
	// Calls on a in a different order must not change what b answers: no
	// state is kept between calls.
	for _, step := range []int{3, 1, 2, 2, 1} {
		_, _ = a.Complete(t.Context(), &Request{Step: step, Attempt: 1})
	}
	b, err := New(cfg, Options{})
	require.NoError(t, err)
	for step := 1; step <= 4; step++ {
		for attempt := 1; attempt <= 3; attempt++ {
			ra, errA := a.Complete(t.Context(), &Request{Step: step, Attempt: attempt})
			rb, errB := b.Complete(t.Context(), &Request{Step: step, Attempt: attempt})
			require.Equal(t, ra, rb, "step %d attempt %d", step, attempt)
			require.Equal(t, errA, errB, "step %d attempt %d", step, attempt)
		}
	}
}

func TestScriptedIsolation(t *testing.T) {
	t.Parallel()

	script := testScript()
	p := NewScripted(script)
	// Mutating the config after New, or a returned response, must not change
	// later answers.
	script[0].Text = "changed"
	script[0].ToolCalls[0].Input[2] = 'X'
	r1, err := p.Complete(t.Context(), &Request{Step: 1, Attempt: 1})
	require.NoError(t, err)
	r1.ToolCalls[0].Input[2] = 'Y'
	r1.ToolCalls[0].Name = "mutated"
	r2, err := p.Complete(t.Context(), &Request{Step: 1, Attempt: 1})
	require.NoError(t, err)
	require.Equal(t, "Let me look.", r2.Text)
	require.Equal(t, "overdue_balance", r2.ToolCalls[0].Name)
	require.JSONEq(t, `{"account":"A-1"}`, string(r2.ToolCalls[0].Input))
}

func TestScriptedCancelled(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := NewScripted(testScript()).Complete(ctx, &Request{Step: 1, Attempt: 1})
	require.ErrorIs(t, err, context.Canceled)
	var f *Failure
	require.False(t, errors.As(err, &f), "cancellation is not a failure")
}
