package agent

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMiddleware(t *testing.T) {
	t.Parallel()
	text := func(s string) *string { return &s }
	tests := []struct {
		name string
		ms   []Middleware
		in   string
		want string
	}{
		{name: "append_text", ms: []Middleware{{AppendText: text(" (synthetic fixture)")}},
			in: "Overdue balance: $1,500.", want: "Overdue balance: $1,500. (synthetic fixture)"},
		{name: "card", ms: []Middleware{{RegexReplace: &RegexReplace{Pattern: `\d{16}`, Replace: "[card]"}}},
			in: "paid with 4111111111111111 and 5500000000000004.", want: "paid with [card] and [card]."},
		{name: "no match", ms: []Middleware{{RegexReplace: &RegexReplace{Pattern: `\d{16}`, Replace: "[card]"}}},
			in: "1234", want: "1234"},
		{name: "group expansion", ms: []Middleware{{RegexReplace: &RegexReplace{Pattern: `(\w+)@example\.com`, Replace: "$1@[redacted]"}}},
			in: "mail bob@example.com", want: "mail bob@[redacted]"},
		{name: "in order", ms: []Middleware{
			{AppendText: text(" 1234567812345678")},
			{RegexReplace: &RegexReplace{Pattern: `\d{16}`, Replace: "[card]"}},
		}, in: "x", want: "x [card]"},
		{name: "empty text unchanged", ms: []Middleware{{AppendText: text(" (synthetic fixture)")}}, in: "", want: ""},
		{name: "invalid pattern unchanged", ms: []Middleware{{RegexReplace: &RegexReplace{Pattern: `(`, Replace: "x"}}}, in: "a(b", want: "a(b"},
		{name: "none", in: "x", want: "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, ApplyAll(tt.ms, tt.in))
		})
	}
}
