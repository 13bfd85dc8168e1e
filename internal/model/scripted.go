package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// Scripted is the deterministic provider of `provider: scripted` (DESIGN §5).
// It keeps no state between calls: the answer depends only on the script and
// on (req.Step, req.Attempt), so a restarted process, a second instance or a
// Temporal activity replay gets the same answer for the same step and
// attempt. Safe for concurrent use.
type Scripted struct {
	script []ScriptStep
}

// NewScripted returns a scripted provider over a private copy of script.
// Step k (1-based) of a run uses script[k-1].
func NewScripted(script []ScriptStep) *Scripted {
	steps := make([]ScriptStep, len(script))
	for i, s := range script {
		steps[i] = s
		steps[i].ToolCalls = copyToolCalls(s.ToolCalls)
		if s.Usage != nil {
			u := *s.Usage
			steps[i].Usage = &u
		}
	}
	return &Scripted{script: steps}
}

// Complete answers step req.Step with script entry req.Step-1:
//
//   - a step beyond the script (or below 1) → non-retryable Failure of type
//     ScriptExhausted;
//   - attempts 1..FailAttempts of the step (req.Attempt; values below 1 count
//     as 1) → retryable ConnectionError "Injected model connection failure";
//   - otherwise the step's text, thinking and tool calls (a copy; an empty tool input
//     becomes {}), its stop reason (default "tool_use" with tool calls, else
//     "end_turn") and its usage (default zero, with UsageReported false:
//     a step without `usage:` reports none).
//
// A cancelled ctx returns an error satisfying errors.Is(err, ctx.Err()).
func (s *Scripted) Complete(ctx context.Context, req *Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted model call: %w", err)
	}
	if req == nil {
		return nil, &Failure{Type: FailureInvalidRequest, Message: "nil model request"}
	}
	if req.Step < 1 || req.Step > len(s.script) {
		return nil, &Failure{
			Type:    FailureScriptExhausted,
			Message: fmt.Sprintf("script has %d steps, step %d requested", len(s.script), req.Step),
		}
	}
	step := s.script[req.Step-1]
	attempt := max(req.Attempt, 1)
	if attempt <= step.FailAttempts {
		return nil, &Failure{Type: FailureConnection, Message: "Injected model connection failure", Retryable: true}
	}
	resp := &Response{
		Text:       step.Text,
		Thinking:   step.Thinking,
		ToolCalls:  copyToolCalls(step.ToolCalls),
		StopReason: step.StopReason,
	}
	if resp.StopReason == "" {
		resp.StopReason = "end_turn"
		if len(resp.ToolCalls) > 0 {
			resp.StopReason = "tool_use"
		}
	}
	if step.Usage != nil {
		resp.Usage = *step.Usage
		resp.UsageReported = true
	}
	return resp, nil
}

// copyToolCalls deep-copies calls; an empty or whitespace-only input becomes
// {}. It returns nil for no calls.
func copyToolCalls(calls []ToolCall) []ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]ToolCall, len(calls))
	for i, c := range calls {
		input := json.RawMessage(`{}`)
		if len(bytes.TrimSpace(c.Input)) > 0 {
			input = bytes.Clone(c.Input)
		}
		out[i] = ToolCall{ID: c.ID, Name: c.Name, Input: input}
	}
	return out
}
