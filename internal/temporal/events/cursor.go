package events

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Cursor is a position in a run's event stream, as the int64 event cursor of
// the HTTP API. It maps a Redis stream entry ID "<ms>-<seq>" one to one:
//
//	cursor = ms<<SeqBits | seq     with seq < 2^SeqBits (1,048,576)
//	                               and  ms  < 2^(63-SeqBits) (~ year 2248)
//
// The mapping is order-preserving (entry IDs compare as (ms, seq) pairs,
// cursors as integers) and reversible: every cursor >= 0 is the image of
// exactly one entry ID, Start (0) is "0-0" (before every entry), and
// cursor+1 is the smallest entry ID after cursor. Negative int64 values are
// not cursors. An entry ID with seq >= 2^20 (more than a million entries
// appended to one stream within one millisecond) has no cursor: Publish
// refuses to create one and parsing reports ErrCursorRange.
type Cursor int64

// Start is the cursor before the first event of every stream ("0-0").
const Start Cursor = 0

// SeqBits is the number of low cursor bits holding an entry ID's sequence
// number; the remaining 43 bits hold its millisecond time.
const SeqBits = 20

const (
	maxSeq = 1<<SeqBits - 1
	maxMs  = math.MaxInt64 >> SeqBits
)

var (
	// ErrInvalidCursor is returned for a negative cursor or a malformed
	// stream entry ID.
	ErrInvalidCursor = errors.New("events: invalid cursor")
	// ErrCursorRange is returned for a well-formed stream entry ID that has
	// no cursor (seq >= 2^20 or ms >= 2^43).
	ErrCursorRange = errors.New("events: stream entry id out of cursor range")
)

// CursorFromInt64 returns the cursor n (as received from the HTTP layer).
// It returns ErrInvalidCursor if n is negative.
func CursorFromInt64(n int64) (Cursor, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: %d", ErrInvalidCursor, n)
	}
	return Cursor(n), nil
}

// ParseStreamID returns the cursor of a Redis stream entry ID "<ms>-<seq>"
// (canonical decimal: digits only, no sign, no leading zeros). It returns
// ErrInvalidCursor for a malformed ID and ErrCursorRange for an ID outside
// the cursor range.
func ParseStreamID(id string) (Cursor, error) {
	msPart, seqPart, ok := strings.Cut(id, "-")
	if !ok {
		return 0, fmt.Errorf("%w: stream id %q", ErrInvalidCursor, id)
	}
	ms, err := parseDecimal(msPart)
	if err != nil {
		return 0, fmt.Errorf("%w: stream id %q", err, id)
	}
	seq, err := parseDecimal(seqPart)
	if err != nil {
		return 0, fmt.Errorf("%w: stream id %q", err, id)
	}
	if ms > maxMs || seq > maxSeq {
		return 0, fmt.Errorf("%w: %q", ErrCursorRange, id)
	}
	return Cursor(ms<<SeqBits | seq), nil
}

// parseDecimal parses a canonical unsigned 64-bit decimal.
func parseDecimal(s string) (uint64, error) {
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, ErrInvalidCursor
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, ErrInvalidCursor
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		// Only reachable for 20-digit values above 2^64-1: well-formed but
		// out of range.
		return 0, ErrCursorRange
	}
	return n, nil
}

// StreamID returns the Redis stream entry ID "<ms>-<seq>" of c. A negative
// c (not a cursor) yields "0-0".
func (c Cursor) StreamID() string {
	if c < 0 {
		return "0-0"
	}
	return strconv.FormatInt(int64(c>>SeqBits), 10) + "-" + strconv.FormatInt(int64(c&maxSeq), 10)
}

// Time returns the time in c's entry ID (UTC, millisecond precision):
// Redis sets it as it appends the entry (XADD *), so it is the event's
// created_at, the same on every read. A negative c yields the Unix epoch.
func (c Cursor) Time() time.Time {
	if c < 0 {
		return time.UnixMilli(0).UTC()
	}
	return time.UnixMilli(int64(c >> SeqBits)).UTC()
}

// Int64 returns c as the HTTP API's int64 cursor.
func (c Cursor) Int64() int64 { return int64(c) }

// String returns c in decimal, the form of RunEvent.Cursor.
func (c Cursor) String() string { return strconv.FormatInt(int64(c), 10) }
