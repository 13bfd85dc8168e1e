package events

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStreamID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		id      string
		want    Cursor
		wantErr error
	}{
		{name: "start", id: "0-0", want: Start},
		{name: "seq only", id: "0-5", want: 5},
		{name: "ms only", id: "1-0", want: 1 << SeqBits},
		{name: "typical", id: "1700000000000-3", want: 1700000000000<<SeqBits | 3},
		{name: "max seq", id: "7-1048575", want: 7<<SeqBits | 1048575},
		{name: "max cursor", id: "8796093022207-1048575", want: math.MaxInt64},
		{name: "seq overflow", id: "7-1048576", wantErr: ErrCursorRange},
		{name: "ms overflow", id: "8796093022208-0", wantErr: ErrCursorRange},
		{name: "uint64 max", id: "18446744073709551615-18446744073709551615", wantErr: ErrCursorRange},
		{name: "beyond uint64", id: "18446744073709551616-0", wantErr: ErrCursorRange},
		{name: "empty", id: "", wantErr: ErrInvalidCursor},
		{name: "no dash", id: "12", wantErr: ErrInvalidCursor},
		{name: "empty ms", id: "-1", wantErr: ErrInvalidCursor},
		{name: "empty seq", id: "1-", wantErr: ErrInvalidCursor},
		{name: "sign", id: "+1-0", wantErr: ErrInvalidCursor},
		{name: "negative seq", id: "1--1", wantErr: ErrInvalidCursor},
		{name: "leading zero", id: "01-0", wantErr: ErrInvalidCursor},
		{name: "two dashes", id: "1-2-3", wantErr: ErrInvalidCursor},
		{name: "space", id: "1-2 ", wantErr: ErrInvalidCursor},
		{name: "special id", id: "$", wantErr: ErrInvalidCursor},
		{name: "21 digits", id: "100000000000000000000-0", wantErr: ErrInvalidCursor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseStreamID(tt.id)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.id, got.StreamID(), "round trip")
			back, err := CursorFromInt64(got.Int64())
			require.NoError(t, err)
			require.Equal(t, got, back)
		})
	}
}

func TestCursorFromInt64(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		n      int64
		wantID string
		bad    bool
	}{
		{name: "zero", n: 0, wantID: "0-0"},
		{name: "one", n: 1, wantID: "0-1"},
		{name: "seq carry", n: 1 << SeqBits, wantID: "1-0"},
		{name: "just below carry", n: 1<<SeqBits - 1, wantID: "0-1048575"},
		{name: "max", n: math.MaxInt64, wantID: "8796093022207-1048575"},
		{name: "negative", n: -1, bad: true},
		{name: "min", n: math.MinInt64, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := CursorFromInt64(tt.n)
			if tt.bad {
				require.ErrorIs(t, err, ErrInvalidCursor)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantID, c.StreamID())
			require.Equal(t, strconv.FormatInt(tt.n, 10), c.String())
			back, err := ParseStreamID(c.StreamID())
			require.NoError(t, err)
			require.Equal(t, c, back)
		})
	}
}

// TestCursorOrder checks that cursor order is stream-ID order and that
// cursor+1 is the next stream ID.
func TestCursorOrder(t *testing.T) {
	t.Parallel()
	ids := []string{"0-0", "0-1", "0-1048575", "1-0", "1-1", "2-0", "1700000000000-0", "1700000000000-7", "1700000000001-0"}
	var prev Cursor = -1
	for _, id := range ids {
		c, err := ParseStreamID(id)
		require.NoError(t, err)
		require.Greater(t, c, prev, id)
		prev = c
	}
	require.Equal(t, "1-0", (Cursor(0<<SeqBits|1048575) + 1).StreamID())
	require.Equal(t, "5-4", (Cursor(5<<SeqBits|3) + 1).StreamID())
}

// FuzzParseStreamID: whatever parses is canonical (StreamID gives the
// input back), non-negative, and survives the int64 round trip.
func FuzzParseStreamID(f *testing.F) {
	for _, s := range []string{"0-0", "1-1", "1700000000000-3", "8796093022207-1048575", "7-1048576", "01-0", "-", "18446744073709551616-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		c, err := ParseStreamID(id)
		if err != nil {
			return
		}
		if c < 0 {
			t.Fatalf("ParseStreamID(%q) = %d < 0", id, c)
		}
		if got := c.StreamID(); got != id {
			t.Fatalf("ParseStreamID(%q).StreamID() = %q", id, got)
		}
		back, err := CursorFromInt64(c.Int64())
		if err != nil || back != c {
			t.Fatalf("CursorFromInt64(%d) = %d, %v", c.Int64(), back, err)
		}
	})
}

// FuzzCursorInt64: every int64 is refused (negative) or maps to a stream
// ID that parses back to it, preserving order with its successor.
func FuzzCursorInt64(f *testing.F) {
	for _, n := range []int64{0, 1, 1<<SeqBits - 1, 1 << SeqBits, math.MaxInt64, -1, math.MinInt64} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		c, err := CursorFromInt64(n)
		if n < 0 {
			if err == nil {
				t.Fatalf("CursorFromInt64(%d) accepted", n)
			}
			return
		}
		if err != nil {
			t.Fatalf("CursorFromInt64(%d): %v", n, err)
		}
		back, err := ParseStreamID(c.StreamID())
		if err != nil || back != c {
			t.Fatalf("ParseStreamID(%q) = %d, %v; want %d", c.StreamID(), back, err, c)
		}
		if n < math.MaxInt64 {
			next, err := ParseStreamID((c + 1).StreamID())
			if err != nil || next <= c {
				t.Fatalf("successor of %d: %d, %v", c, next, err)
			}
		}
	})
}

func TestDisplayAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"127.0.0.1:6379", "127.0.0.1:6379"},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://user:s3cret@cache:6379/0", "redis://user:xxxxx@cache:6379/0"},
		{"rediss://:s3cret@cache:6380", "rediss://:xxxxx@cache:6380"},
		{"redis://:s3cret@cache:6379/%zz", "(unparsable URL)"},
		// Passwords with an unescaped '?', '/' or '#' move into the query,
		// path or fragment, out of what Redacted masks.
		{"redis://default:123?s3cret@host:6379", "(unparsable URL)"},
		{"redis://default:/s3cret@host:6379", "(unparsable URL)"},
		{"redis://default:1234#s3cret@host:6379", "(unparsable URL)"},
	} {
		if got := DisplayAddr(tc.in); got != tc.want {
			t.Errorf("DisplayAddr(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"redis://:s3cret@cache:6379/%zz", "redis://default:123?s3cret@host:6379", "redis://default:/s3cret@host:6379"} {
		if _, err := Open(bad, Config{}); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("Open(%q): %v (must fail without the password)", bad, err)
		}
	}
}

func TestCursorTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want time.Time
	}{
		{"0-0", time.UnixMilli(0).UTC()},
		{"0-7", time.UnixMilli(0).UTC()},
		{"1767607201250-0", time.Date(2026, 1, 5, 10, 0, 1, 250_000_000, time.UTC)},
		{"1767607201250-1048575", time.Date(2026, 1, 5, 10, 0, 1, 250_000_000, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			c, err := ParseStreamID(tt.id)
			require.NoError(t, err)
			require.Equal(t, tt.want, c.Time())
		})
	}
	require.Equal(t, time.UnixMilli(0).UTC(), Cursor(-1).Time())
}
