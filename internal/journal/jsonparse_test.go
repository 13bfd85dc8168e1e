package journal

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParsePythonErrors: ParsePython fails where json.loads fails, with
// the error standing for the reference's exception, in CPython's order:
// decoding first, then scanning left to right, duplicate keys when their
// object closes.
func TestParsePythonErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want error // nil: accepted
	}{
		{`{"a":[1,2.5,-0,"\u00e9"]}`, nil}, {`"\ud800"`, nil}, {`1e999`, nil}, {"\"\xed\xa0\x80\"", nil},
		{"\ufeff{}", nil}, {"\xff\xfe{\x00}\x00", nil}, {"1" + strings.Repeat("0", 4299), nil},
		{``, ErrInvalidJSON}, {`[1,]`, ErrInvalidJSON}, {`1.`, ErrInvalidJSON}, {`nan`, ErrInvalidJSON},
		{`[NaN]`, ErrNonFinite}, {`Infinity`, ErrNonFinite}, {`[-Infinity]`, ErrNonFinite},
		{`{"a":1,"a":2}`, ErrDuplicateKey}, {`{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{`[{"a":1,"a":1}, NaN]`, ErrDuplicateKey}, {`{"a":NaN,"a":1}`, ErrNonFinite},
		{"1" + strings.Repeat("0", 4300), ErrIntTooLong},
		{strings.Repeat("[", PythonMaxDepth+1) + strings.Repeat("]", PythonMaxDepth+1), ErrTooDeep},
		{"\"\xff\" NaN", ErrInvalidText}, {"{\"a\":1,\"a\":2,\"b\":\"\xc3\"}", ErrInvalidText}, {"\xff\xfe{", ErrInvalidText},
	}
	for _, tt := range tests {
		var d Doc
		err := d.ParsePython([]byte(tt.in))
		if tt.want == nil {
			require.NoError(t, err, "%q", tt.in)
			continue
		}
		require.ErrorIs(t, err, tt.want, "%q", tt.in)
		var se *SyntaxError
		require.ErrorAs(t, err, &se)
		if errors.Is(tt.want, ErrInvalidJSON) && !errors.Is(tt.want, ErrInvalidText) {
			for _, other := range []error{ErrInvalidText, ErrNonFinite, ErrDuplicateKey, ErrIntTooLong, ErrTooDeep} {
				require.NotErrorIs(t, err, other, "%q", tt.in)
			}
		}
	}
	// What json.loads reads and canonical JSON cannot hold is noted.
	var d Doc
	require.NoError(t, d.ParsePython([]byte("[\"\\ud800\",1e999,\"\xed\xa0\x80\"]")))
	require.True(t, d.HasLoneSurrogate())
	require.True(t, d.HasCodeEscape())
	require.Equal(t, 10, d.OverflowAt())
	require.Equal(t, 17, d.RawSurrogateAt())
	require.Equal(t, "", d.Encoding())
	require.NoError(t, d.ParsePython([]byte("\ufeff[1]")))
	require.Equal(t, "utf-8-sig", d.Encoding())
	require.Equal(t, 3, d.TextOffset())
	require.Equal(t, "[1]", string(d.Text()))
	require.Equal(t, -1, d.OverflowAt())
	require.Panics(t, func() { d.AppendCanonical(nil) })
}

// TestValue reads a parsed text through Value.
func TestValue(t *testing.T) {
	t.Parallel()
	var d Doc
	require.NoError(t, d.ParsePython([]byte(`{"i":1,"f":1.0,"b":true,"n":null,"s":"x\u00e9","arr":[1,"a",[]],"o":{"z":1,"a":2},"k\u0065y":"v"}`)))
	r := d.Root()
	require.Equal(t, JSONObject, r.Kind())
	require.Equal(t, 8, r.Len())
	require.Equal(t, JSONInt, r.Get("i").Kind())
	require.Equal(t, JSONFloat, r.Get("f").Kind())
	require.Equal(t, "1.0", string(r.Get("f").Raw()))
	require.Equal(t, JSONTrue, r.Get("b").Kind())
	require.Equal(t, JSONNull, r.Get("n").Kind())
	require.True(t, r.Get("n").Exists())
	require.False(t, r.Get("missing").Exists())
	require.Equal(t, JSONNull, r.Get("missing").Kind())
	require.True(t, r.Get("s").Escaped())
	require.Equal(t, "xé", string(r.Get("s").AppendText(nil)))
	require.True(t, r.Get("s").TextEquals("xé"))
	require.False(t, r.Get("s").TextEquals("x"))
	require.Equal(t, "v", string(r.Get("key").AppendText(nil)))
	require.Equal(t, `{"z":1,"a":2}`, string(r.Get("o").Raw()))
	var kinds []JSONKind
	for e := range r.Get("arr").Elems() {
		kinds = append(kinds, e.Kind())
	}
	require.Equal(t, []JSONKind{JSONInt, JSONString, JSONArray}, kinds)
	var keys []string
	for k, v := range r.Get("o").Members() {
		keys = append(keys, string(k.Raw())+"="+string(v.Raw()))
	}
	require.Equal(t, []string{"z=1", "a=2"}, keys)
	// Python equality, within one Doc and across two.
	require.True(t, EqualValues(r.Get("i"), r.Get("f")))
	require.True(t, EqualValues(r.Get("i"), r.Get("b")))
	require.False(t, EqualValues(r.Get("i"), r.Get("s")))
	require.False(t, EqualValues(r.Get("n"), r.Get("missing")))
	require.True(t, EqualValues(r.Get("missing"), Value{}))
	var e Doc
	require.NoError(t, e.ParseLenient([]byte(`{"a":2.0,"z":true,"x":"\ud800"}`)))
	require.False(t, EqualValues(r.Get("o"), e.Root()))
	require.NoError(t, e.ParseLenient([]byte(`{"a":2.0,"z":true}`)))
	require.True(t, EqualValues(r.Get("o"), e.Root()))
	require.ErrorIs(t, e.ParseLenient([]byte(`{"a":1,"a":1}`)), ErrDuplicateKey)
	require.False(t, e.Root().Exists())
}

// TestAppendUnescaped decodes string bodies as encoding/json does, and
// refuses invalid escapes without panicking.
func TestAppendUnescaped(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{``, ``}, {`plain`, `plain`}, {`a\"b\\c\/d\b\f\n\r\t`, "a\"b\\c/d\b\f\n\r\t"},
		{`\u00e9\ud83d\ude00`, "é😀"}, {`\ud800`, "\ufffd"}, {`x\udbff`, "x\ufffd"}, {`\ude00\ud83d`, "\ufffd\ufffd"},
		{"raw \xff kept", "raw \xff kept"},
	} {
		got, err := AppendUnescaped([]byte("p:"), []byte(tt.in))
		require.NoError(t, err, "%q", tt.in)
		require.Equal(t, "p:"+tt.want, string(got), "%q", tt.in)
	}
	for _, in := range []string{`\`, `\x`, `\u12`, `\u12g4`, `\ud800\u`, `\ud800\`, `a\ud800\uzzzz`} {
		got, err := AppendUnescaped([]byte("p:"), []byte(in))
		require.ErrorIs(t, err, ErrInvalidJSON, "%q", in)
		require.Equal(t, "p:", string(got), "%q", in)
	}
}
