package journal

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEqual(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		a, b string
		want bool
	}{
		// Numbers across int, float and bool (Python semantics).
		{name: "int equals float", a: `1`, b: `1.0`, want: true},
		{name: "int equals exponent float", a: `100`, b: `1E2`, want: true},
		{name: "true equals 1", a: `true`, b: `1`, want: true},
		{name: "true equals 1.0", a: `true`, b: `1.0`, want: true},
		{name: "false equals 0", a: `false`, b: `0`, want: true},
		{name: "false equals -0.0", a: `false`, b: `-0.0`, want: true},
		{name: "true not 2", a: `true`, b: `2`, want: false},
		{name: "true not false", a: `true`, b: `false`, want: false},
		{name: "true not string", a: `true`, b: `"true"`, want: false},
		{name: "false not null", a: `false`, b: `null`, want: false},
		{name: "zero not null", a: `0`, b: `null`, want: false},
		{name: "zero not empty string", a: `0`, b: `""`, want: false},
		{name: "negative zero int", a: `-0`, b: `0`, want: true},
		{name: "negative zero float", a: `-0.0`, b: `0`, want: true},
		{name: "floats by value", a: `0.1`, b: `1e-1`, want: true},
		{name: "float rounding to same float64", a: `0.1`, b: `0.1000000000000000001`, want: true},
		{name: "different floats", a: `0.1`, b: `0.2`, want: false},
		{name: "int vs fractional float", a: `1`, b: `1.5`, want: false},
		{name: "big int exact vs float", a: `9007199254740993`, b: `9007199254740992.0`, want: false},
		{name: "big int equal float", a: `9007199254740992`, b: `9007199254740992.0`, want: true},
		{name: "huge int equal float", a: `100000000000000000000`, b: `1e20`, want: true},
		{name: "huge int not float neighbour", a: `100000000000000000001`, b: `1e20`, want: false},
		{name: "1e23 float is not 10^23", a: `100000000000000000000000`, b: `1e23`, want: false},
		{name: "1e23 float equals its exact value", a: `99999999999999991611392`, b: `1e23`, want: true},
		{name: "ints exact", a: `12345678901234567890123`, b: `12345678901234567890123`, want: true},
		{name: "ints differ far digits", a: `12345678901234567890123`, b: `12345678901234567890124`, want: false},
		{name: "overflow floats are infinities", a: `1e999`, b: `2e400`, want: true},
		{name: "infinities of different sign", a: `1e999`, b: `-1e999`, want: false},
		{name: "infinity vs huge int", a: `1e999`, b: `1` + strings.Repeat("0", 999), want: false},
		{name: "max float vs its int", a: `1.7976931348623157e308`, b: `179769313486231570814527423731704356798070567525844996598917476803157260780028538760589558632766878171540458953514382464234321326889464182768467546703537516986049910576551282076245490090389328944075868508455133942304583236903222948165808559332123348274797826204144723168738177180919299881250404026184124858368`, want: true},
		{name: "underflow equals zero", a: `1e-400`, b: `0`, want: true},

		// Strings.
		{name: "escape equals raw", a: `"\u00e9"`, b: `"é"`, want: true},
		{name: "surrogate pair equals raw", a: `"\ud83d\ude00"`, b: `"😀"`, want: true},
		{name: "escaped solidus", a: `"a\/b"`, b: `"a/b"`, want: true},
		{name: "named vs u escape", a: `"\n"`, b: `"\u000a"`, want: true},
		{name: "different strings", a: `"a"`, b: `"b"`, want: false},
		{name: "prefix string", a: `"a"`, b: `"ab"`, want: false},
		{name: "case differs", a: `"a"`, b: `"A"`, want: false},
		{name: "combining sequence not normalized", a: `"é"`, b: `"e\u0301"`, want: false},
		{name: "lone surrogates compare as code points", a: `"\ud800"`, b: `"\uD800"`, want: true},
		{name: "lone surrogate not replacement char", a: `"\ud800"`, b: `"\ufffd"`, want: false},
		{name: "lone surrogates differ", a: `"\ud800"`, b: `"\ud801"`, want: false},

		// Containers.
		{name: "object order insensitive", a: `{"a":1,"b":[1,2]}`, b: `{"b":[1,2],"a":1}`, want: true},
		{name: "object keys escaped", a: `{"\u0061":1}`, b: `{"a":1}`, want: true},
		{name: "object missing key", a: `{"a":1,"b":2}`, b: `{"a":1}`, want: false},
		{name: "object different key", a: `{"a":1}`, b: `{"b":1}`, want: false},
		{name: "object different value", a: `{"a":1}`, b: `{"a":2}`, want: false},
		{name: "object nested bool int", a: `{"a":{"x":true,"y":[false]}}`, b: `{"a":{"y":[0.0],"x":1}}`, want: true},
		{name: "array order sensitive", a: `[1,2]`, b: `[2,1]`, want: false},
		{name: "array length", a: `[1,2]`, b: `[1,2,3]`, want: false},
		{name: "array shorter", a: `[1,2,3]`, b: `[1,2]`, want: false},
		{name: "array bool int", a: `[true,false]`, b: `[1,0]`, want: true},
		{name: "empty array vs object", a: `[]`, b: `{}`, want: false},
		{name: "empty array vs null", a: `[]`, b: `null`, want: false},
		{name: "nested arrays", a: `[[1],[2,[3]]]`, b: `[[1.0],[2,[3e0]]]`, want: true},
		{name: "nested arrays differ deep", a: `[[1],[2,[3]]]`, b: `[[1],[2,[4]]]`, want: false},
		{name: "array vs nested", a: `[1,[2]]`, b: `[[1],2]`, want: false},
		{name: "whitespace irrelevant", a: " { \"a\" : [ 1 ] } ", b: `{"a":[1]}`, want: true},
		{name: "null equals null", a: `null`, b: `null`, want: true},
		{name: "redacted value", a: `{"password":"hunter2"}`, b: `{"password":"[REDACTED]"}`, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Equal([]byte(tt.a), []byte(tt.b))
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			got, err = Equal([]byte(tt.b), []byte(tt.a))
			require.NoError(t, err)
			require.Equal(t, tt.want, got, "not symmetric")
		})
	}
}

func TestEqualErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		a, b    string
		wantErr error
	}{
		{name: "invalid first", a: `{`, b: `{}`, wantErr: ErrInvalidJSON},
		{name: "invalid second", a: `{}`, b: `[1,]`, wantErr: ErrInvalidJSON},
		{name: "NaN literal", a: `NaN`, b: `NaN`, wantErr: ErrInvalidJSON},
		{name: "duplicate key", a: `{"a":1,"a":1}`, b: `{"a":1}`, wantErr: ErrDuplicateKey},
		{name: "too deep", a: strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), b: `[]`, wantErr: ErrTooDeep},
		{name: "invalid UTF-8", a: "\"\xff\"", b: `""`, wantErr: ErrInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Equal([]byte(tt.a), []byte(tt.b))
			require.ErrorIs(t, err, tt.wantErr)
			require.False(t, got)
		})
	}
}

// TestEqualPythonGolden compares with CPython 3.11's
// json.loads(a) == json.loads(b) (testdata/gen_python_golden.py).
func TestEqualPythonGolden(t *testing.T) {
	t.Parallel()

	type golden struct {
		A     string `json:"a"`
		B     string `json:"b"`
		Equal bool   `json:"equal"`
	}
	n, equal := 0, 0
	readJSONLines(t, "testdata/equal.golden.jsonl", func(line []byte) {
		var g golden
		require.NoError(t, json.Unmarshal(line, &g))
		got, err := Equal([]byte(g.A), []byte(g.B))
		require.NoError(t, err, "line %d", n+1)
		require.Equal(t, g.Equal, got, "line %d: %s vs %s", n+1, g.A, g.B)
		n++
		if got {
			equal++
		}
	})
	require.Greater(t, n, 100)
	require.Greater(t, equal, n/10)
	require.Less(t, equal, n-n/10)
}
