package model

import (
	"context"
	"errors"
	"fmt"
)

// Provider calls a language model. Implementations are safe for concurrent
// use. Complete returns a *Failure (wrapped or not) for every error it
// classifies; callers use IsTransient to decide on a retry.
type Provider interface {
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Delta kinds (Delta.Kind).
const (
	// DeltaText is a piece of the answer's text.
	DeltaText = "text"
	// DeltaThinking is a piece of the model's reasoning (Anthropic thinking,
	// OpenAI-compatible reasoning_content).
	DeltaThinking = "thinking"
)

// Delta is one piece of a streamed answer, as the provider sent it.
type Delta struct {
	// Kind is DeltaText or DeltaThinking.
	Kind string
	// Text is the piece (never empty).
	Text string
}

// Streamer is a Provider that passes the answer's pieces on as they
// arrive. CompleteStream behaves as Complete and also calls onDelta, on the
// calling goroutine and in order, for each text and thinking piece of the
// answer. The concatenation of the text deltas is the Response's Text unless
// the provider replaced it (a refusal); a failed call may have delivered
// some deltas before failing. onDelta must not block for long: the provider
// reads the stream only after it returns.
type Streamer interface {
	Provider
	CompleteStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error)
}

// Failure is a captured model failure: data with a stable kind and a
// retryability flag, recorded in model.failed as {type, message}.
type Failure struct {
	// Type is the failure kind, e.g. "ConnectionError", "RateLimitError",
	// "APIStatusError", "TimeoutError", "BadRequestError".
	Type string
	// Message is a client-safe description (never a payload or secret).
	Message string
	// Retryable reports whether a new attempt may succeed.
	Retryable bool
	// Status is the HTTP status of the provider reply, 0 when none.
	Status int
	// RetryAfterSeconds is the provider's Retry-After hint, 0 when none.
	RetryAfterSeconds float64
	// Usage is what the provider reported for the attempt before it
	// failed (a stream's message_start, a usage chunk); nil when nothing
	// was reported.
	Usage *Usage
	// Cause is the underlying error, if any.
	Cause error
}

// Error implements error.
func (f *Failure) Error() string {
	if f.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", f.Type, f.Message, f.Cause)
	}
	return f.Type + ": " + f.Message
}

// Unwrap returns the cause.
func (f *Failure) Unwrap() error { return f.Cause }

// AsFailure returns err as a *Failure, classifying unknown errors: context
// deadline → TimeoutError (retryable), anything else → a non-retryable
// failure of type "Error".
func AsFailure(err error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Failure{Type: "TimeoutError", Message: "model call timed out", Retryable: true, Cause: err}
	}
	return &Failure{Type: "Error", Message: "model call failed", Cause: err}
}

// IsTransient reports whether err is worth a new attempt.
func IsTransient(err error) bool {
	return AsFailure(err).Retryable
}
