package journal

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

func TestAppendCanonical(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		in   string
		want string
	}{
		// Structure and key order.
		{name: "scalar null", in: `null`, want: `null`},
		{name: "scalars true false", in: `[true,false]`, want: `[true,false]`},
		{name: "whitespace removed", in: " \t\r\n{ \"b\" : [ 1 , 2 ] ,\n\"a\" : { } } \n", want: `{"a":{},"b":[1,2]}`},
		{name: "empty containers", in: `[[],{},[{}]]`, want: `[[],{},[{}]]`},
		{name: "nested key sorting", in: `{"z":{"y":1,"x":{"b":2,"a":1}},"a":[{"d":0,"c":0}]}`, want: `{"a":[{"c":0,"d":0}],"z":{"x":{"a":1,"b":2},"y":1}}`},
		{name: "shared prefix sorts shorter first", in: `{"ab":1,"a\u0000":2,"a":3,"aa":4}`, want: `{"a":3,"a\u0000":2,"aa":4,"ab":1}`},
		{name: "uppercase before lowercase", in: `{"b":1,"B":2,"a":3,"A":4}`, want: `{"A":4,"B":2,"a":3,"b":1}`},
		{name: "non-ASCII keys by code point", in: `{"é":1,"z":2,"😀":3,"\uffff":4,"\ue000":5,"日":6,"\u00ff":7}`, want: `{"z":2,"é":1,"ÿ":7,"日":6,"` + "\ue000" + `":5,"` + "\uffff" + `":4,"😀":3}`},
		{name: "astral key after BMP private use", in: `{"😀":1,"\uffff":2}`, want: `{"` + "\uffff" + `":2,"😀":1}`},
		{name: "escaped key sorts by decoded value", in: `{"b":1,"\u0061":2}`, want: `{"a":2,"b":1}`},
		{name: "digit keys sort as strings", in: `{"10":1,"9":2,"0":3}`, want: `{"0":3,"10":1,"9":2}`},
		{name: "already sorted keys unchanged", in: `{"a":1,"b":2,"c":3}`, want: `{"a":1,"b":2,"c":3}`},

		// Strings.
		{name: "line separators raw", in: `"\u2028\u2029"`, want: "\"\u2028\u2029\""},
		{name: "raw line separators stay raw", in: "\"\u2028\"", want: "\"\u2028\""},
		{name: "html characters raw", in: `"<>&"`, want: `"<>&"`},
		{name: "html escapes decoded", in: `"\u003c\u003e\u0026"`, want: `"<>&"`},
		{name: "DEL raw", in: "\"\x7f\"", want: "\"\x7f\""},
		{name: "DEL escape decoded", in: `"\u007f"`, want: "\"\x7f\""},
		{name: "solidus unescaped", in: `"a\/b/c"`, want: `"a/b/c"`},
		{name: "control escapes lowercase", in: `"\u0001\u001F\u001f\u000B"`, want: `"\u0001\u001f\u001f\u000b"`},
		{name: "nul", in: `"\u0000"`, want: `"\u0000"`},
		{name: "named control escapes", in: `"\b\f\n\r\t"`, want: `"\b\f\n\r\t"`},
		{name: "control as u escapes become named", in: `"\u0008\u000c\u000a\u000d\u0009"`, want: `"\b\f\n\r\t"`},
		{name: "quote and backslash", in: `"\"\\\u0022\u005c"`, want: `"\"\\\"\\"`},
		{name: "latin escape decoded", in: `"\u00e9"`, want: `"é"`},
		{name: "uppercase hex escape decoded", in: `"\u00E9"`, want: `"é"`},
		{name: "surrogate pair combined", in: `"\ud83d\ude00"`, want: `"😀"`},
		{name: "surrogate pair uppercase", in: `"\uD834\uDD1E"`, want: `"𝄞"`},
		{name: "raw emoji kept", in: `"😀 and é"`, want: `"😀 and é"`},
		{name: "max code point", in: `"\udbff\udfff"`, want: "\"\U0010ffff\""},
		{name: "BOM character inside string raw", in: `"\ufeff"`, want: "\"\ufeff\""},
		{name: "noncharacter raw", in: `"\uffff"`, want: "\"\uffff\""},
		{name: "mixed escaped and raw", in: `"a\tb\u00e9c\\d"`, want: `"a\tbéc\\d"`},

		// Floats (Python repr).
		{name: "float 300.0", in: `300.0`, want: `300.0`},
		{name: "float 1.0", in: `1.0`, want: `1.0`},
		{name: "float 1e-07", in: `1e-07`, want: `1e-07`},
		{name: "float 1e-7 literal", in: `1e-7`, want: `1e-07`},
		{name: "float 1e+16", in: `1e+16`, want: `1e+16`},
		{name: "float 1e16 literal", in: `1e16`, want: `1e+16`},
		{name: "float 1e15", in: `1e15`, want: `1000000000000000.0`},
		{name: "float 0.1", in: `0.1`, want: `0.1`},
		{name: "float 0.0001", in: `0.0001`, want: `0.0001`},
		{name: "float 0.00001", in: `0.00001`, want: `1e-05`},
		{name: "float 123456789.123", in: `123456789.123`, want: `123456789.123`},
		{name: "float smallest subnormal", in: `5e-324`, want: `5e-324`},
		{name: "float subnormal rounds", in: `4.9e-324`, want: `5e-324`},
		{name: "float max", in: `1.7976931348623157e+308`, want: `1.7976931348623157e+308`},
		{name: "float max literal", in: `1.7976931348623157e308`, want: `1.7976931348623157e+308`},
		{name: "float negative zero", in: `-0.0`, want: `-0.0`},
		{name: "float zero", in: `0.0`, want: `0.0`},
		{name: "float zero exponent", in: `0e0`, want: `0.0`},
		{name: "float 100.0", in: `100.0`, want: `100.0`},
		{name: "float 1E2", in: `1E2`, want: `100.0`},
		{name: "float 1E+2", in: `1E+2`, want: `100.0`},
		{name: "float underflow to zero", in: `1e-400`, want: `0.0`},
		{name: "float negative underflow", in: `-1e-400`, want: `-0.0`},
		{name: "float rounding", in: `0.30000000000000004`, want: `0.30000000000000004`},
		{name: "float long literal rounds", in: `465.739741613819136`, want: `465.73974161381915`},
		{name: "float 1e22", in: `1e22`, want: `1e+22`},
		{name: "float 2^53 as float", in: `9007199254740993.0`, want: `9007199254740992.0`},
		{name: "float negative exponent form", in: `-1.5e-10`, want: `-1.5e-10`},

		// Integers (exact).
		{name: "int zero", in: `0`, want: `0`},
		{name: "int negative zero", in: `-0`, want: `0`},
		{name: "int negative", in: `-42`, want: `-42`},
		{name: "int big verbatim", in: `12345678901234567890123`, want: `12345678901234567890123`},
		{name: "int big negative verbatim", in: `-12345678901234567890123`, want: `-12345678901234567890123`},
		{name: "int above 2^53 exact", in: `9007199254740993`, want: `9007199254740993`},
		{name: "negative zero in containers", in: `{"a":[-0,-0.0]}`, want: `{"a":[0,-0.0]}`},

		// A realistic record.
		{
			name: "record",
			in:   `{"version":1,"id":"x","kind":"tool.started","recorded_at":"2024-01-02T03:04:05+00:00","session_id":"s","run_id":"r","step_id":"1","attempt_id":"1","execution_key":null,"payload":{"timeout":300.0,"args":{"q":"<b>é</b>"}},"seq":3}`,
			want: `{"attempt_id":"1","execution_key":null,"id":"x","kind":"tool.started","payload":{"args":{"q":"<b>é</b>"},"timeout":300.0},"recorded_at":"2024-01-02T03:04:05+00:00","run_id":"r","seq":3,"session_id":"s","step_id":"1","version":1}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := AppendCanonical(nil, []byte(tt.in))
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))

			// Appends to dst and is idempotent.
			got2, err := AppendCanonical([]byte("prefix:"), got)
			require.NoError(t, err)
			require.Equal(t, "prefix:"+tt.want, string(got2))
		})
	}
}

func TestAppendCanonicalErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		in      string
		wantErr error
		// wantMsg is a substring of the error message.
		wantMsg string
	}{
		{name: "empty input", in: ``, wantErr: ErrInvalidJSON, wantMsg: "expected a value"},
		{name: "only whitespace", in: " \n ", wantErr: ErrInvalidJSON},
		{name: "float overflow", in: `1e999`, wantErr: ErrNonFinite, wantMsg: "1e999"},
		{name: "negative float overflow nested", in: `{"a":[-1e999]}`, wantErr: ErrNonFinite, wantMsg: "offset 6"},
		{name: "NaN literal", in: `NaN`, wantErr: ErrInvalidJSON},
		{name: "Infinity literal", in: `[Infinity]`, wantErr: ErrInvalidJSON},
		{name: "negative Infinity literal", in: `-Infinity`, wantErr: ErrInvalidJSON},
		{name: "duplicate key", in: `{"a":1,"b":2,"a":3}`, wantErr: ErrDuplicateKey, wantMsg: `"a" at offset 13`},
		{name: "duplicate key after unescaping", in: `{"a":1,"\u0061":2}`, wantErr: ErrDuplicateKey},
		{name: "duplicate key nested", in: `[{"x":{"k":1,"k":1}}]`, wantErr: ErrDuplicateKey},
		{name: "depth 20000", in: strings.Repeat("[", 20000) + strings.Repeat("]", 20000), wantErr: ErrTooDeep},
		{name: "depth 10001 objects", in: strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), wantErr: ErrTooDeep},
		{name: "deep unterminated", in: strings.Repeat("[", 20000), wantErr: ErrTooDeep},
		{name: "invalid UTF-8 in string", in: "\"\xff\"", wantErr: ErrInvalidJSON, wantMsg: "invalid UTF-8 at offset 1"},
		{name: "truncated UTF-8 in string", in: "\"\xc3\"", wantErr: ErrInvalidJSON, wantMsg: "invalid UTF-8"},
		{name: "UTF-8 encoded surrogate", in: "\"\xed\xa0\x80\"", wantErr: ErrInvalidJSON, wantMsg: "invalid UTF-8"},
		{name: "overlong UTF-8", in: "\"\xc0\xaf\"", wantErr: ErrInvalidJSON, wantMsg: "invalid UTF-8"},
		{name: "invalid UTF-8 in key", in: "{\"\xff\":1}", wantErr: ErrInvalidJSON},
		{name: "invalid UTF-8 outside string", in: "[1,\xff]", wantErr: ErrInvalidJSON},
		{name: "byte order mark", in: "\ufeff{}", wantErr: ErrInvalidJSON},
		{name: "trailing garbage", in: `{"a":1}x`, wantErr: ErrInvalidJSON, wantMsg: "after the top-level value at offset 7"},
		{name: "two values", in: `{} {}`, wantErr: ErrInvalidJSON, wantMsg: "after the top-level value"},
		{name: "two numbers", in: `1 2`, wantErr: ErrInvalidJSON},
		{name: "leading zero", in: `01`, wantErr: ErrInvalidJSON},
		{name: "plus sign", in: `+1`, wantErr: ErrInvalidJSON},
		{name: "bare minus", in: `-`, wantErr: ErrInvalidJSON},
		{name: "missing fraction digits", in: `1.`, wantErr: ErrInvalidJSON},
		{name: "leading dot", in: `.5`, wantErr: ErrInvalidJSON},
		{name: "missing exponent digits", in: `1e+`, wantErr: ErrInvalidJSON},
		{name: "hex number", in: `0x10`, wantErr: ErrInvalidJSON},
		{name: "trailing comma in array", in: `[1,]`, wantErr: ErrInvalidJSON},
		{name: "trailing comma in object", in: `{"a":1,}`, wantErr: ErrInvalidJSON},
		{name: "missing colon", in: `{"a" 1}`, wantErr: ErrInvalidJSON, wantMsg: "expected ':'"},
		{name: "non-string key", in: `{1:2}`, wantErr: ErrInvalidJSON, wantMsg: "string key"},
		{name: "single quotes", in: `'a'`, wantErr: ErrInvalidJSON},
		{name: "unterminated string", in: `"abc`, wantErr: ErrInvalidJSON, wantMsg: "unterminated string"},
		{name: "unterminated array", in: `[1`, wantErr: ErrInvalidJSON, wantMsg: "unterminated"},
		{name: "mismatched brackets", in: `[1}`, wantErr: ErrInvalidJSON},
		{name: "raw newline in string", in: "\"a\nb\"", wantErr: ErrInvalidJSON, wantMsg: "control character 0x0a"},
		{name: "raw tab in string", in: "\"a\tb\"", wantErr: ErrInvalidJSON},
		{name: "bad escape", in: `"\x41"`, wantErr: ErrInvalidJSON, wantMsg: "invalid escape"},
		{name: "short u escape", in: `"\u12"`, wantErr: ErrInvalidJSON},
		{name: "bad hex in u escape", in: `"\u12g4"`, wantErr: ErrInvalidJSON},
		{name: "truncated literal", in: `tru`, wantErr: ErrInvalidJSON},
		{name: "capitalized literal", in: `True`, wantErr: ErrInvalidJSON},
		{name: "lone high surrogate", in: `"\ud800"`, wantErr: ErrLoneSurrogate},
		{name: "lone low surrogate", in: `"\udc00"`, wantErr: ErrLoneSurrogate},
		{name: "reversed surrogate pair", in: `"\ude00\ud83d"`, wantErr: ErrLoneSurrogate},
		{name: "high surrogate then BMP", in: `"\ud83d\u0041"`, wantErr: ErrLoneSurrogate},
		{name: "lone surrogate in key", in: `{"\ud800":1}`, wantErr: ErrLoneSurrogate},
		{name: "comment", in: `[1 /* x */]`, wantErr: ErrInvalidJSON},
		{name: "form feed is not whitespace", in: "\f1", wantErr: ErrInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dst := []byte("keep")
			got, err := AppendCanonical(dst, []byte(tt.in))
			require.ErrorIs(t, err, tt.wantErr)
			if tt.wantMsg != "" {
				require.ErrorContains(t, err, tt.wantMsg)
			}
			require.Equal(t, "keep", string(got))
		})
	}
}

func TestAppendCanonicalMaxDepth(t *testing.T) {
	t.Parallel()

	arr := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	got, err := AppendCanonical(nil, []byte(arr))
	require.NoError(t, err)
	require.Equal(t, arr, string(got))

	obj := strings.Repeat(`{"b":0,"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	want := strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat(`,"b":0}`, MaxDepth)
	got, err = AppendCanonical(nil, []byte(obj))
	require.NoError(t, err)
	require.Equal(t, want, string(got))

	eq, err := Equal([]byte(obj), []byte(want))
	require.NoError(t, err)
	require.True(t, eq)
}

// TestAppendCanonicalPythonGolden compares with CPython 3.11 output for
// generated inputs (testdata/gen_python_golden.py).
func TestAppendCanonicalPythonGolden(t *testing.T) {
	t.Parallel()

	type golden struct {
		In  string `json:"in"`
		Out string `json:"out"`
	}
	var cases []golden
	readJSONLines(t, "testdata/canonical.golden.jsonl", func(line []byte) {
		var g golden
		require.NoError(t, json.Unmarshal(line, &g))
		cases = append(cases, g)
	})
	require.NotEmpty(t, cases)
	for i, g := range cases {
		got, err := AppendCanonical(nil, []byte(g.In))
		require.NoError(t, err, "line %d: %q", i+1, g.In)
		require.Equal(t, g.Out, string(got), "line %d: %q", i+1, g.In)
	}
}

// TestFormatFloatPythonGolden compares FormatFloat with CPython's
// repr(float) (testdata/gen_python_golden.py).
func TestFormatFloatPythonGolden(t *testing.T) {
	t.Parallel()

	f, err := os.Open("testdata/float_repr.golden")
	require.NoError(t, err)
	defer hxtest.Close(t, f)
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		bitsHex, want, ok := strings.Cut(sc.Text(), " ")
		require.True(t, ok, sc.Text())
		bits, err := strconv.ParseUint(bitsHex, 16, 64)
		require.NoError(t, err)
		require.Equal(t, want, FormatFloat(math.Float64frombits(bits)), "bits %s", bitsHex)
		n++
	}
	require.NoError(t, sc.Err())
	require.Greater(t, n, 1000)
}

func readJSONLines(t *testing.T, path string, fn func(line []byte)) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer hxtest.Close(t, f)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		fn(sc.Bytes())
	}
	require.NoError(t, sc.Err())
}

func TestCanonical(t *testing.T) {
	t.Parallel()

	type args struct {
		Query   string  `json:"query"`
		Limit   int     `json:"limit,omitempty"`
		Timeout Float   `json:"timeout"`
		Ratio   float64 `json:"ratio"`
		Skip    string  `json:"-"`
		Alpha   *bool   `json:"alpha"`
	}
	execKey := "k1"
	tests := []struct {
		name string
		in   any
		want string
	}{
		{name: "Float keeps fraction", in: Float(300), want: `300.0`},
		{name: "Float small", in: Float(1e-7), want: `1e-07`},
		{name: "Float large", in: Float(1e16), want: `1e+16`},
		{name: "Float negative zero", in: Float(math.Copysign(0, -1)), want: `-0.0`},
		{name: "plain float64 integral becomes int", in: 300.0, want: `300`},
		{name: "plain float64 fraction", in: 0.1, want: `0.1`},
		{name: "plain float64 large", in: 1e21, want: `1e+21`},
		{name: "int64", in: int64(math.MaxInt64), want: `9223372036854775807`},
		{name: "uint64", in: uint64(math.MaxUint64), want: `18446744073709551615`},
		{
			name: "struct with json tags sorted",
			in:   args{Query: "<b>&</b>", Timeout: 300, Ratio: 0.5, Skip: "x"},
			want: `{"alpha":null,"query":"<b>&</b>","ratio":0.5,"timeout":300.0}`,
		},
		{
			name: "map key order",
			in:   map[string]any{"b": 1, "a": []any{Float(2), "\u2028"}, "é": true, "A": nil},
			want: `{"A":null,"a":[2.0,"` + "\u2028" + `"],"b":1,"é":true}`,
		},
		{name: "invalid UTF-8 replaced by Go", in: "a\xffb", want: "\"a\ufffdb\""},
		{name: "control characters", in: "\x00\x01\x1f\x7f\n", want: `"\u0000\u0001\u001f` + "\x7f" + `\n"`},
		{name: "raw message reencoded", in: json.RawMessage(`{ "b" : 1E2 , "a" : "\u00e9" }`), want: `{"a":"é","b":100.0}`},
		{
			name: "record",
			in: Record{
				Version: 1, ID: "id-1", Kind: KindToolStarted, RecordedAt: "2024-01-02T03:04:05+00:00",
				SessionID: "s", RunID: "r", StepID: "2", AttemptID: "1", ExecutionKey: &execKey,
				Payload: json.RawMessage(`{"timeout":300.0,"usage":{"output_tokens":5,"input_tokens":7}}`), Seq: 4,
			},
			want: `{"attempt_id":"1","execution_key":"k1","id":"id-1","kind":"tool.started","payload":{"timeout":300.0,"usage":{"input_tokens":7,"output_tokens":5}},"recorded_at":"2024-01-02T03:04:05+00:00","run_id":"r","seq":4,"session_id":"s","step_id":"2","version":1}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Canonical(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))
		})
	}
}

func TestCanonicalErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		in      any
		wantErr error
	}{
		{name: "raw message with duplicate key", in: json.RawMessage(`{"a":1,"a":2}`), wantErr: ErrDuplicateKey},
		{name: "raw message with overflow", in: json.RawMessage(`[1e400]`), wantErr: ErrNonFinite},
		{name: "raw message with lone surrogate", in: json.RawMessage(`"\udead"`), wantErr: ErrLoneSurrogate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Canonical(tt.in)
			require.ErrorIs(t, err, tt.wantErr)
		})
	}

	t.Run("unsupported value", func(t *testing.T) {
		t.Parallel()
		_, err := Canonical(math.NaN())
		var uv *json.UnsupportedValueError
		require.ErrorAs(t, err, &uv)
	})
}

// benchRecords builds about size bytes of realistic JSON records, one per
// line, as hxd stores them (Go field order, unsorted payload keys).
func benchRecords(size int) [][]byte {
	var out [][]byte
	total := 0
	for i := 0; total < size; i++ {
		payload := map[string]any{
			"messages": []any{
				map[string]any{"role": "user", "content": fmt.Sprintf("Please look up invoice INV-%05d and tell me why the total differs — é, 日本, 😀.", i)},
				map[string]any{"role": "assistant", "content": "Let me check the invoice <details> & line items.\nOne moment.", "tool_calls": []any{
					map[string]any{"id": fmt.Sprintf("call_%d", i), "name": "lookup_invoice", "arguments": fmt.Sprintf(`{"invoice_id":"INV-%05d","include_lines":true}`, i)},
				}},
			},
			"usage":   map[string]any{"input_tokens": 1200 + i, "output_tokens": 87, "total_tokens": 1287 + i},
			"timeout": Float(300),
			"cost":    0.00123 * float64(i%7+1),
			"tools":   []any{"lookup_invoice", "send_email", "refund"},
		}
		p, err := json.Marshal(payload)
		if err != nil {
			panic(err)
		}
		key := fmt.Sprintf("run-1:%d:tool:%d", i, i%3)
		rec := Record{
			Version: 1, ID: fmt.Sprintf("0b6f7a52-3c1e-4d5e-9f00-%012d", i), Kind: Kinds[i%len(Kinds)],
			RecordedAt: "2024-06-11T10:20:30.123456+00:00", SessionID: "sess-7c2f", RunID: "run-1",
			StepID: strconv.Itoa(i / 4), AttemptID: "1", ExecutionKey: &key, Payload: p, Seq: int64(i + 1),
		}
		b, err := json.Marshal(rec)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
		total += len(b)
	}
	return out
}

func BenchmarkAppendCanonical(b *testing.B) {
	recs := benchRecords(1 << 20)
	n := 0
	for _, r := range recs {
		n += len(r)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	var dst []byte
	for b.Loop() {
		dst = dst[:0]
		for _, r := range recs {
			var err error
			dst, err = AppendCanonical(dst, r)
			if err != nil {
				b.Fatal(err)
			}
			dst = append(dst, '\n')
		}
	}
}

func BenchmarkEqual(b *testing.B) {
	recs := benchRecords(1 << 20)
	canon := make([][]byte, len(recs))
	n := 0
	for i, r := range recs {
		c, err := AppendCanonical(nil, r)
		if err != nil {
			b.Fatal(err)
		}
		canon[i] = c
		n += len(r)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for i, r := range recs {
			eq, err := Equal(r, canon[i])
			if err != nil || !eq {
				b.Fatal(eq, err)
			}
		}
	}
}

// TestCheckCanonical: CheckCanonical refuses what AppendCanonical refuses,
// with the same error.
func TestCheckCanonical(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{"a":1}`, `[1.0,-0,"\u00e9"]`, `{"a":1,"a":2}`, `1e999`, `"\ud800"`, `{`, "\"\xff\"", `NaN`,
	} {
		_, want := AppendCanonical(nil, []byte(src))
		got := CheckCanonical([]byte(src))
		if (want == nil) != (got == nil) || (want != nil && want.Error() != got.Error()) {
			t.Errorf("%s: CheckCanonical = %v, AppendCanonical = %v", src, got, want)
		}
	}
}
