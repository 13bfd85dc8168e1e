package model

import (
	"context"
	"fmt"
	"strings"
)

var _ Streamer = (*Scripted)(nil)

// CompleteStream answers as Complete and delivers the answer in pieces
// first (SplitPieces): the step's thinking as DeltaThinking pieces, then
// its text as DeltaText pieces. A failing attempt (1..FailAttempts)
// delivers the first FailAfterDeltas text pieces, then fails with the
// retryable ConnectionError "Injected model stream failure" (a stream that
// breaks mid-answer). ctx is checked before every piece.
func (s *Scripted) CompleteStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
	if req == nil || req.Step < 1 || req.Step > len(s.script) {
		return s.Complete(ctx, req)
	}
	step := s.script[req.Step-1]
	send := func(kind, text string, n int) error {
		for i, p := range SplitPieces(text) {
			if i == n {
				break
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("scripted model stream: %w", err)
			}
			onDelta(Delta{Kind: kind, Text: p})
		}
		return nil
	}
	if max(req.Attempt, 1) <= step.FailAttempts {
		if err := send(DeltaText, step.Text, step.FailAfterDeltas); err != nil {
			return nil, err
		}
		return nil, &Failure{Type: FailureConnection, Message: "Injected model stream failure", Retryable: true}
	}
	if err := send(DeltaThinking, step.Thinking, -1); err != nil {
		return nil, err
	}
	if err := send(DeltaText, step.Text, -1); err != nil {
		return nil, err
	}
	return s.Complete(ctx, req)
}

// SplitPieces splits text into the pieces the scripted provider streams:
// each ends after a space (the last one at the end of text), so their
// concatenation is text. Empty text has no pieces.
func SplitPieces(text string) []string {
	var out []string
	for text != "" {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}
