package journal

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// Kind is a journal record kind.
type Kind string

// The 18 record kinds (REFERENCE §2.4).
const (
	KindRunStarted       Kind = "run.started"
	KindRunResumed       Kind = "run.resumed"
	KindCheckpoint       Kind = "checkpoint"
	KindEvent            Kind = "event"
	KindCommandFailed    Kind = "command.failed"
	KindModelStarted     Kind = "model.started"
	KindModelResponse    Kind = "model.response"
	KindModelProcessed   Kind = "model.processed"
	KindModelCompleted   Kind = "model.completed"
	KindModelFailed      Kind = "model.failed"
	KindModelInterrupted Kind = "model.interrupted"
	KindToolStarted      Kind = "tool.started"
	KindToolDispatched   Kind = "tool.dispatched"
	KindToolReturned     Kind = "tool.returned"
	KindToolProcessed    Kind = "tool.processed"
	KindToolFailed       Kind = "tool.failed"
	KindToolInterrupted  Kind = "tool.interrupted"
	KindToolResolved     Kind = "tool.resolved"
)

// Kinds lists every kind in the reference's order.
var Kinds = []Kind{
	KindRunStarted, KindRunResumed, KindCheckpoint, KindEvent, KindCommandFailed,
	KindModelStarted, KindModelResponse, KindModelProcessed, KindModelCompleted,
	KindModelFailed, KindModelInterrupted, KindToolStarted, KindToolDispatched,
	KindToolReturned, KindToolProcessed, KindToolFailed, KindToolInterrupted,
	KindToolResolved,
}

// Valid reports whether k is one of the 18 kinds.
func (k Kind) Valid() bool {
	for _, x := range Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// Record is one journal entry (11 stored fields, REFERENCE §2.1).
type Record struct {
	Version      int             `json:"version"`
	ID           string          `json:"id"`
	Kind         Kind            `json:"kind"`
	RecordedAt   string          `json:"recorded_at"`
	SessionID    string          `json:"session_id"`
	RunID        string          `json:"run_id"`
	StepID       string          `json:"step_id"`
	AttemptID    string          `json:"attempt_id"`
	ExecutionKey *string         `json:"execution_key"`
	Payload      json.RawMessage `json:"payload"`
	// Seq is assigned by the store on insert: per run, contiguous from 1.
	Seq int64 `json:"seq"`
}

// Timestamp formats t like Python's datetime.isoformat() of an aware UTC
// time: YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00, fraction omitted when zero.
func Timestamp(t time.Time) string {
	t = t.UTC().Truncate(time.Microsecond)
	if t.Nanosecond() == 0 {
		return t.Format("2006-01-02T15:04:05") + "+00:00"
	}
	return t.Format("2006-01-02T15:04:05.000000") + "+00:00"
}

// Float is a float64 that marshals like Python's float repr, so the
// int/float distinction survives storage (300.0, 1e-07, 1e+16).
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	return []byte(FormatFloat(float64(f))), nil
}

// FormatFloat renders f as Python's repr does. NaN and infinities, which
// JSON cannot hold, render as null.
func FormatFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	// Shortest round-trip digits and decimal exponent.
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign = "-"
			exp = -exp
		}
		es := strconv.Itoa(exp)
		if len(es) < 2 {
			es = "0" + es
		}
		return mant + "e" + sign + es
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// SameContent reports whether two records are equal in every field but
// Seq, payloads compared with Equal (Python equality of the decoded JSON,
// as the reference's idempotent re-send does; an absent payload is null).
// Stores use it to tell an identical re-send from a conflicting one.
func SameContent(a, b *Record) bool {
	if a.Version != b.Version || a.ID != b.ID || a.Kind != b.Kind || a.RecordedAt != b.RecordedAt ||
		a.SessionID != b.SessionID || a.RunID != b.RunID || a.StepID != b.StepID || a.AttemptID != b.AttemptID {
		return false
	}
	if (a.ExecutionKey == nil) != (b.ExecutionKey == nil) ||
		(a.ExecutionKey != nil && *a.ExecutionKey != *b.ExecutionKey) {
		return false
	}
	pa, pb := []byte(a.Payload), []byte(b.Payload)
	if len(pa) == 0 {
		pa = []byte("null")
	}
	if len(pb) == 0 {
		pb = []byte("null")
	}
	eq, err := Equal(pa, pb)
	return err == nil && eq
}
