package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzAppendCanonical checks that AppendCanonical never panics and that a
// successful result is valid JSON, canonical (a fixed point), equal to
// the input, and that it accepts whatever encoding/json accepts except
// for the inputs it rejects on purpose. Seeds are in
// testdata/fuzz/FuzzAppendCanonical.
func FuzzAppendCanonical(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[1.0,1E2,-0,"\u00e9\ud83d\ude00\u2028<>&\u0001",{"a\u0000":true,"a":false}]}`,
		`[5e-324,1.7976931348623157e308,12345678901234567890123,-0.0,1e16]`,
		`"\ud800"`, `1e999`, `{"a":1,"a":2}`, "\"\xff\"", `[1,]`, ` null `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, err := AppendCanonical(nil, src)
		if err != nil {
			if out != nil {
				t.Fatalf("error %v with output %q", err, out)
			}
			// encoding/json accepts duplicate keys, lone surrogates,
			// overflowing numbers and (ignoring UTF-8) any bytes in
			// strings; everything else it accepts must be accepted.
			if json.Valid(src) && utf8.Valid(src) && !errors.Is(err, ErrDuplicateKey) &&
				!errors.Is(err, ErrLoneSurrogate) && !errors.Is(err, ErrNonFinite) && !errors.Is(err, ErrTooDeep) {
				t.Fatalf("rejected valid JSON %q: %v", src, err)
			}
			return
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("invalid output %q for %q", out, src)
		}
		if !json.Valid(src) {
			t.Fatalf("accepted invalid JSON %q", src)
		}
		again, err := AppendCanonical(nil, out)
		if err != nil {
			t.Fatalf("output %q not accepted: %v", out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", src, out, again)
		}
		eq, err := Equal(src, out)
		if err != nil || !eq {
			t.Fatalf("Equal(src, out) = %v, %v for %q -> %q", eq, err, src, out)
		}
		for _, c := range out {
			if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
				// Whitespace may only appear inside strings, and there
				// only as a raw space.
				if c != ' ' {
					t.Fatalf("raw whitespace %q in output %q", c, out)
				}
			}
		}
	})
}
