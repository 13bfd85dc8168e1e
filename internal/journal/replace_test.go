package journal

import (
	"bytes"
	"encoding/json"
	"testing"
)

// replaceOracle computes Doc.AppendCanonicalReplacing's result the slow
// way: decode with encoding/json, replace the values of matching keys
// (outermost first), re-encode and canonicalize.
func replaceOracle(t *testing.T, src []byte, match func(key []byte) bool, lit []byte) ([]byte, bool) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", src, err)
	}
	changed := false
	canon := func(v any) []byte {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatalf("encode: %v", err)
		}
		out, err := AppendCanonical(nil, buf.Bytes())
		if err != nil {
			t.Fatalf("canonical %q: %v", buf.Bytes(), err)
		}
		return out
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if match([]byte(k)) {
					if !bytes.Equal(canon(e), lit) {
						changed = true
					}
					x[k] = json.RawMessage(lit)
				} else {
					x[k] = walk(e)
				}
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		}
		return v
	}
	return canon(walk(v)), changed
}

func startsWithA(key []byte) bool { return len(key) > 0 && (key[0] == 'a' || key[0] == 'A') }

func checkReplacing(t *testing.T, src []byte) {
	var d Doc
	if err := d.Parse(src, 0); err != nil {
		return
	}
	want := d.AppendCanonical(nil)
	got, changed := d.AppendCanonicalReplacing([]byte("prefix"), func([]byte) bool { return false }, []byte(`"x"`))
	if string(got) != "prefix"+string(want) || changed {
		t.Fatalf("no replacement: %q, %v; want %q", got, changed, want)
	}
	lit := []byte(`"[R]"`)
	got, changed = d.AppendCanonicalReplacing(nil, startsWithA, lit)
	wantOut, wantChanged := replaceOracle(t, src, startsWithA, lit)
	if string(got) != string(wantOut) || changed != wantChanged {
		t.Fatalf("replacing in %q: got %q, %v; want %q, %v", src, got, changed, wantOut, wantChanged)
	}
}

// TestAppendCanonicalReplacing checks Doc.AppendCanonicalReplacing against
// encoding/json: without matches it is AppendCanonical; with them, the
// outermost matching members' values become the literal.
func TestAppendCanonicalReplacing(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{"b": 1, "a": {"a": 2}, "c": [{"A": "[R]"}, {"ab": "[R\u005d"}], "\u0061x": 1.0}`,
		`{"a":"[R]"}`, `{"a":"[r]"}`, `[{"z":{"y":{"a":null}}}]`, `"a"`, `1e2`, `{}`, `{"é":1,"a":-0}`,
	} {
		checkReplacing(t, []byte(src))
	}
}

// FuzzAppendCanonicalReplacing: see TestAppendCanonicalReplacing.
func FuzzAppendCanonicalReplacing(f *testing.F) {
	for _, s := range []string{
		`{"b": 1, "a": {"a": 2}, "c": [{"A": "[R]"}, {"ab": "[R\u005d"}]}`,
		`{"b":1,"a":[1.0,1E2,-0,"\u00e9\ud83d\ude00\u2028<>&\u0001",{"a\u0000":true,"a":false}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkReplacing(t, src) })
}
