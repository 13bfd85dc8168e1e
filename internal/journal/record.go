package journal

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
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
	var buf [32]byte
	return string(appendFloat(buf[:0], f))
}

// appendFloat appends FormatFloat(f) to dst without allocating.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	// Shortest round-trip digits and decimal exponent: [-]d[.ddd]e±XX.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	if e[0] == '-' {
		dst = append(dst, '-')
		e = e[1:]
	}
	k := bytes.IndexByte(e, 'e')
	mant := e[:k]
	exp := 0
	for _, c := range e[k+2:] {
		exp = exp*10 + int(c-'0')
	}
	if e[k+1] == '-' {
		exp = -exp
	}
	if exp < -4 || exp >= 16 {
		dst = append(dst, mant...)
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	// Positional: the digits d.ddd with the point moved by exp.
	var digits [24]byte
	n := copy(digits[:], mant[:1])
	if len(mant) > 2 {
		n += copy(digits[n:], mant[2:])
	}
	ds := digits[:n]
	if exp < 0 {
		dst = append(dst, "0."...)
		for range -exp - 1 {
			dst = append(dst, '0')
		}
		return append(dst, ds...)
	}
	if n <= exp+1 {
		dst = append(dst, ds...)
		for range exp + 1 - n {
			dst = append(dst, '0')
		}
		return append(dst, ".0"...)
	}
	dst = append(dst, ds[:exp+1]...)
	dst = append(dst, '.')
	return append(dst, ds[exp+1:]...)
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
