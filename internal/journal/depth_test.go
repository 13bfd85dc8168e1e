package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestDeeper(t *testing.T) {
	t.Parallel()
	nest := func(n int) string { return strings.Repeat(`{"a":[`, n) + `1` + strings.Repeat(`]}`, n) }
	for _, tc := range []struct {
		name string
		src  string
		max  int
		want bool
	}{
		{"scalar", `1`, 0, false},
		{"empty object at 0", `{}`, 0, true},
		{"empty object at 1", `{}`, 1, false},
		{"array in object", `{"a":[1,2]}`, 1, true},
		{"array in object at 2", `{"a":[1,2]}`, 2, false},
		{"siblings do not add up", `[[1],[2],{"a":3}]`, 2, false},
		{"brackets in strings", `["[[[{{{", "\"[[[", "\\"]`, 1, false},
		{"escaped quote keeps the string open", `["\"[[["]`, 1, false},
		{"escaped backslash closes the string", `["\\",[[1]]]`, 2, true},
		{"at the limit", nest(64), 128, false},
		{"one past the limit", nest(64) + "", 127, true},
		{"malformed closers", `]]]]][[`, 2, false},
		{"unterminated", `[[[[`, 3, true},
		{"empty", ``, 0, false},
	} {
		if got := Deeper([]byte(tc.src), tc.max); got != tc.want {
			t.Errorf("%s: Deeper(%q, %d) = %v, want %v", tc.name, tc.src, tc.max, got, tc.want)
		}
	}
}

// jsonDepth is the nesting depth of valid JSON as encoding/json reads it.
func jsonDepth(t *testing.T, src []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return deepest
		}
		if err != nil {
			t.Fatalf("valid JSON %q: %v", src, err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// FuzzDeeper checks Deeper against encoding/json's reading of valid JSON at
// several limits, and that it never panics on anything else. Seeds are in
// testdata/fuzz/FuzzDeeper.
func FuzzDeeper(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"[{\"]"}]}`, `"\\"`, `[[]]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if !json.Valid(src) {
			Deeper(src, 3)
			return
		}
		d := jsonDepth(t, src)
		for _, limit := range []int{0, 1, 2, 3, 5, MaxInputDepth} {
			if got := Deeper(src, limit); got != (d > limit) {
				t.Fatalf("Deeper(%q, %d) = %v; depth is %d", src, limit, got, d)
			}
		}
	})
}
