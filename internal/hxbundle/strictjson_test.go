package hxbundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
)

// TestStrictJSON checks parse's message against json.loads (what the
// reference reports when it fails to load a text) and strictOnly's, hxd's
// own, for texts json.loads reads but hxd refuses (DESIGN §8).
func TestStrictJSON(t *testing.T) {
	t.Parallel()
	const (
		ok       = ""
		syntax   = "Invalid incident bundle (JSONDecodeError)"
		decode   = "Invalid incident bundle (UnicodeDecodeError)"
		dup      = "Duplicate JSON key"
		nonFin   = "Non-finite JSON number"
		valueErr = "Invalid incident bundle (ValueError)"
		recErr   = "Invalid incident bundle (RecursionError)"
	)
	utf16 := func(s string) string { return string(utf16LE([]byte(s))) }
	tests := []struct {
		in   string
		want string // parse: json.loads fails
		// strict is strictOnly's message when parse succeeds.
		strict string
		// surrogate: the text holds a lone surrogate (the reference's
		// UTF-8 encoding of a record fails).
		surrogate bool
	}{
		{in: `{}`}, {in: ` [ ] `}, {in: "\t\r\n1\n"}, {in: `"a"`}, {in: `-0`}, {in: `1.5e-3`}, {in: `1E+5`},
		{in: `1e-999`}, {in: `{"a":{"b":[1,{"c":null}]},"d":true,"e":false}`},
		{in: `"\u00e9\ud83d\ude00\/\b\f\n\r\t\"\\"`}, {in: "\"\u2028<>&\x7f\""},
		{in: `"\ud800"`, surrogate: true}, {in: `"\udc00\ud800"`, surrogate: true},
		{in: `{"a":1,"A":2}`}, {in: `{"a":{"a":1}}`}, {in: `[{"a":1},{"a":1}]`},
		{in: "1" + strings.Repeat("0", 4299)}, {in: "-1" + strings.Repeat("0", 4299)},
		{in: "0." + strings.Repeat("0", 4299) + "1"},
		{in: strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)},
		// Syntax errors.
		{in: ``, want: syntax}, {in: ` `, want: syntax}, {in: `{`, want: syntax}, {in: `[1,]`, want: syntax},
		{in: `{"a":1,}`, want: syntax}, {in: `{"a" 1}`, want: syntax}, {in: `{a:1}`, want: syntax}, {in: `01`, want: syntax},
		{in: `1.`, want: syntax}, {in: `.5`, want: syntax}, {in: `1e`, want: syntax}, {in: `+1`, want: syntax}, {in: `-`, want: syntax},
		{in: `--1`, want: syntax}, {in: `nul`, want: syntax}, {in: `True`, want: syntax}, {in: `nan`, want: syntax},
		{in: `-Inf`, want: syntax}, {in: `-NaN`, want: syntax}, {in: `"abc`, want: syntax}, {in: "\"a\nb\"", want: syntax},
		{in: "\"a\x00\"", want: syntax}, {in: `"\x"`, want: syntax}, {in: `"\u12"`, want: syntax}, {in: `"\u12g4"`, want: syntax},
		{in: `"\ud800\uzzzz"`, want: syntax}, {in: `1 2`, want: syntax}, {in: `{} {}`, want: syntax}, {in: `[1 2]`, want: syntax},
		// The loader's own errors, in scanning order.
		{in: `{"a":1,"a":2}`, want: dup}, {in: `{"a":1,"\u0061":2}`, want: dup}, {in: `[{"x":{"a":1,"a":1}}]`, want: dup},
		{in: `{"a":NaN,"a":1}`, want: nonFin}, {in: `{"a":1,"a":Infinity}`, want: nonFin}, {in: `[-Infinity]`, want: nonFin},
		{in: `NaNx`, want: nonFin}, {in: `[{"a":1,"a":1}, NaN]`, want: dup}, {in: `{"a":1,"a":2} x`, want: dup},
		{in: `{"a":1,"a":2`, want: syntax}, {in: `[1, NaN`, want: nonFin},
		{in: "1" + strings.Repeat("0", 4300), want: valueErr}, {in: "[1" + strings.Repeat("0", 4300) + ",NaN]", want: valueErr},
		{in: strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1), want: recErr},
		// Decoding comes first.
		{in: "\"\xff\" NaN", want: decode}, {in: "{\"a\":1,\"a\":2,\"b\":\"\xc3\"}", want: decode},
		{in: "\ufeff\"\xff\"", want: decode}, {in: "\xff\xfe{", want: decode}, {in: "\x00\x00\x00{\x00\x00\x00", want: decode},
		{in: "[\x00\x00\x00\x00\x00\x11\x00", want: decode}, // UTF-32-LE beyond U+10FFFF
		{in: `"` + strings.Repeat("a", 40) + "\xff\"", want: decode}, {in: "\"\xff" + strings.Repeat("a", 40) + `"`, want: decode},
		{in: `"` + strings.Repeat("a", 40) + "\xc3\"", want: decode},
		{in: `"` + strings.Repeat("é", 40) + `\n` + strings.Repeat("a", 70) + "\xc3\"", want: decode},
		{in: `["` + strings.Repeat("é→", 40) + `\"` + strings.Repeat("a", 70) + "😀\"]"},
		{in: `{"a":1,"a":2,"` + strings.Repeat("b", 50) + "\xff\"}", want: decode}, {in: "[1,2]\xff", want: decode},
		{in: "[1,\xc3\xa9]", want: syntax},
		// Read by json.loads, refused by hxd only (DESIGN §8).
		{in: `1e999`, strict: nonFin}, {in: `-1.5e400`, strict: nonFin}, {in: "1" + strings.Repeat("0", 400) + ".0", strict: nonFin},
		{in: "1" + strings.Repeat("0", 4299) + ".5", strict: nonFin},
		{in: "\"\xed\xa0\x80\"", strict: decode, surrogate: true},
		{in: `"` + strings.Repeat("a", 40) + "\xed\xa0\x80\"", strict: decode, surrogate: true},
		{in: "\"\xed\xa0\xbd\xed\xb8\x80\"", strict: decode, surrogate: true}, // an encoded pair stays two surrogates
		{in: `[1e999,"` + "\xed\xbf\xbf" + `"]`, strict: nonFin, surrogate: true},
		{in: `["` + "\xed\xbf\xbf" + `",1e999]`, strict: decode, surrogate: true},
		{in: "\ufeff{}", strict: syntax}, {in: "\ufeff1e999", strict: syntax},
		{in: "\xff\xfe{\x00}\x00", strict: syntax}, {in: "{\x00}\x00", strict: syntax},
		{in: utf16(`{"a":[1,"é😀"]}`), strict: syntax}, {in: "\xfe\xff\x00[\x00]", strict: syntax},
		{in: "\x00\x00\x00[\x00\x00\x00]", strict: syntax}, {in: "\xff\xfe\x00\x00[\x00\x00\x00]\x00\x00\x00", strict: syntax},
		{in: "\"\x00\x00\xd8\"\x00", strict: syntax, surrogate: true}, // UTF-16-LE with a lone surrogate
		// ... and decoded, the text is parsed as json.loads parses it.
		{in: "\ufeff\ufeff{}", want: syntax}, {in: "\xff\xfe\xff\xfe{\x00}\x00", want: syntax},
		{in: "\ufeff[1,]", want: syntax}, {in: "\ufeff[NaN]", want: nonFin}, {in: utf16(`{"a":1,"a":2}`), want: dup},
		{in: utf16(`[NaN]`), want: nonFin}, {in: utf16(`[1,]`), want: syntax}, {in: utf16("\"\x01\""), want: syntax},
	}
	for _, tt := range tests {
		var d jsonDoc
		e := d.parse([]byte(tt.in))
		got := ""
		if e != nil {
			got = e.msg
		}
		require.Equal(t, tt.want, got, "input %q", tt.in)
		if e != nil {
			continue
		}
		got = ""
		if e := d.strictOnly(); e != nil {
			got = e.msg
		}
		require.Equal(t, tt.strict, got, "strictOnly, input %q", tt.in)
		require.Equal(t, tt.surrogate, d.surrogate, "input %q", tt.in)
	}
}

// TestStrictJSONDecodedText: a BOM is dropped and UTF-16/32 text decoded
// (lone surrogates as WTF-8) before parsing; offsets in errors count from
// the start of the input after a BOM.
func TestStrictJSONDecodedText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, want string
	}{
		{"\ufeff\"é\"", "é"},
		{string(utf16LE([]byte(`"é😀"`))), "é😀"},
		{"\xfe\xff\x00\"\x00a\xd8\x3d\xde\x00\x00\"", "a😀"},
		{"\x00\x00\x00\"\x00\x00\x00a\x00\x00\x00\"", "a"},
		{"\"\x00\x00\xd8\"\x00", "\xed\xa0\x80"},
		{"\"\xed\xa0\x80\"", "\xed\xa0\x80"},
	} {
		var d jsonDoc
		require.Nil(t, d.parse([]byte(tt.in)), "%q", tt.in)
		s, ok := d.root().str()
		require.True(t, ok)
		require.Equal(t, tt.want, s, "%q", tt.in)
	}
	var d jsonDoc
	e := d.parse([]byte("\ufeff[1,]"))
	require.NotNil(t, e)
	require.Equal(t, 6, e.off) // the "]" after the three bytes of the BOM
	require.Nil(t, d.parse([]byte(`[0,1e999]`)))
	require.Equal(t, 3, d.strictOnly().off)
	require.Nil(t, d.parse([]byte("\ufeff[\"\xed\xa0\x80\"]")))
	require.Equal(t, 0, d.strictOnly().off) // the BOM comes first
}

func TestStrictJSONValues(t *testing.T) {
	t.Parallel()
	var d jsonDoc
	require.Nil(t, d.parse([]byte(`{"i":1,"f":1.0,"b":true,"n":null,"s":"x\u00e9","big":123456789012345678901234567890,"neg":-0,"arr":[1,"a"],"o":{}}`)))
	r := d.root()
	require.True(t, r.get("i").isInt())
	require.True(t, r.get("i").intEquals(1))
	require.False(t, r.get("f").isInt())
	require.False(t, r.get("f").intEquals(1))
	require.False(t, r.get("b").isInt())
	require.True(t, r.get("neg").intEquals(0))
	require.False(t, r.get("big").intEquals(0))
	require.True(t, r.get("n").isNone())
	require.True(t, r.get("missing").isNone())
	require.False(t, r.get("missing").exists())
	s, ok := r.get("s").str()
	require.True(t, ok)
	require.Equal(t, "xé", s)
	require.True(t, r.get("s").isStr("xé"))
	require.Equal(t, 2, r.get("arr").length())
	require.Equal(t, 0, r.get("o").length())
	// Python equality.
	require.True(t, pyEqual(r.get("i"), r.get("f")))
	require.True(t, pyEqual(r.get("i"), r.get("b")))
	require.False(t, pyEqual(r.get("i"), r.get("s")))
	require.False(t, pyEqual(r.get("n"), r.get("o")))
	require.True(t, pyEqual(r.get("neg"), r.get("n")) == false)
	var e jsonDoc
	require.Nil(t, e.parse([]byte(`[{"b":[1.0,true],"a":"x\u00e9"},9007199254740993,9007199254740992.0]`)))
	var f jsonDoc
	require.Nil(t, f.parse([]byte(`[{"a":"xé","b":[1,1]},9007199254740992,9007199254740992]`)))
	var xs, ys []jv
	e.root().elems(func(v jv) bool { xs = append(xs, v); return true })
	f.root().elems(func(v jv) bool { ys = append(ys, v); return true })
	require.True(t, pyEqual(xs[0], ys[0]))
	require.False(t, pyEqual(xs[1], ys[1])) // 2**53+1 != 2**53
	require.True(t, pyEqual(xs[2], ys[2]))
	require.False(t, pyEqual(e.root(), f.root()))
}

func TestPyConversions(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"1", " 12 ", "+3", "-0", "007", "1_000", "\u0663", "\u00a012\u2003", "\u00855"} {
		require.True(t, pyIntString(s), "int(%q)", s)
	}
	for _, s := range []string{"", " ", "1.5", "_1", "1_", "1__0", "+_1", "0x10", "1e3", "١_", "\xed\xa0\x80", "1 2", "\x1c5\x1f", strings.Repeat("9", 4301)} {
		require.False(t, pyIntString(s), "int(%q)", s)
	}
	for _, s := range []string{"1", "1.5", ".5", "5.", "-1e-3", "1E+9", " inf ", "-Infinity", "nan", "NaN", "1_0.5", "1e1_0", "\u0661.5", "1e999"} {
		require.True(t, pyFloatString(s), "float(%q)", s)
	}
	for _, s := range []string{"", ".", "e5", "1e", "1e+", "inf1", "infinit", "_1", "1_", "1__0", "1_.5", "0x1p3", "1,5", "--1"} {
		require.False(t, pyFloatString(s), "float(%q)", s)
	}
}

// refsByCanonical is the reference's definition: the regex over the
// canonical JSON of the parsed record (journal.AppendCanonical).
var refRegexp = regexp.MustCompile(`artifact://([a-f0-9]{64})`)

func refsByCanonical(t testing.TB, line []byte) (map[string]struct{}, bool) {
	canonical, err := journal.AppendCanonical(nil, line)
	if err != nil {
		return nil, false
	}
	refs := map[string]struct{}{}
	for _, m := range refRegexp.FindAllSubmatchIndex(canonical, -1) {
		end := m[3]
		if end < len(canonical) && isLowerHex(canonical[end]) {
			continue // (?![a-f0-9]); Go's regexp has no lookahead
		}
		refs[string(canonical[m[2]:m[3]])] = struct{}{}
	}
	return refs, true
}

// refsByStream is what the verifier computes for one record line.
func refsByStream(line []byte) (map[string]struct{}, bool) {
	var d jsonDoc
	if e := d.parse(line); e != nil || d.surrogate || d.overflow > 0 {
		return nil, false
	}
	var scratch []byte
	refs := map[string]struct{}{}
	for _, k := range appendRefs(nil, &d, d.src, &scratch) {
		refs[k] = struct{}{}
	}
	return refs, true
}

func TestRefsMatchCanonicalJSON(t *testing.T) {
	t.Parallel()
	h := sha([]byte("a"))
	for _, line := range []string{
		`{"a":"artifact://` + h + `"}`,
		`{"a":"artifact:\/\/` + h + `"}`,
		`{"a":"\u0061rtifact://` + h + `"}`,
		`{"a":"artifact://` + h[:63] + `\u0061"}`,
		`{"a":"artifact://` + h + `\u0061"}`,
		`{"a":"artifact://` + h + `\n"}`,
		`{"a":"artifact://` + h + `f"}`,
		`{"a":"artifact://` + strings.ToUpper(h) + `"}`,
		`{"artifact://` + h + `":1}`,
		`{"a":["xartifact://` + h + `artifact://` + sha([]byte("b")) + `"]}`,
		`{"a":"artifact://artifact://` + h + `"}`,
		`{"a":"\\u0061rtifact://` + h + `"}`,
		`{"a":"artifact://` + h + `\"", "b": "\\"}`,
	} {
		want, ok := refsByCanonical(t, []byte(line))
		require.True(t, ok, line)
		got, ok := refsByStream([]byte(line))
		require.True(t, ok, line)
		require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), line)
	}
}

func TestLineSplitter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil}, {"\n", []string{""}}, {"a", []string{"a"}}, {"a\n", []string{"a"}}, {"a\n\n", []string{"a", ""}},
		{"a\r\nb", []string{"a", "b"}}, {"a\rb\r", []string{"a", "b"}}, {"a\n\rb", []string{"a", "", "b"}},
		{"\r\n", []string{""}}, {"\r\r\n", []string{"", ""}}, {"a\x0bb\x0cc\x1cd\u2028e", []string{"a\x0bb\x0cc\x1cd\u2028e"}},
	}
	for _, tt := range tests {
		// Every way of cutting the input into two chunks gives the same lines.
		for cut := 0; cut <= len(tt.in); cut++ {
			var got []string
			s := lineSplitter{onLine: func(b []byte) { got = append(got, string(b)) }}
			s.feed([]byte(tt.in[:cut]))
			s.feed([]byte(tt.in[cut:]))
			s.finish()
			require.Equal(t, tt.want, got, "%q cut at %d", tt.in, cut)
		}
		// And byte by byte.
		var got []string
		s := lineSplitter{onLine: func(b []byte) { got = append(got, string(b)) }}
		for i := range len(tt.in) {
			s.feed([]byte{tt.in[i]})
		}
		s.finish()
		require.Equal(t, tt.want, got, "%q byte by byte", tt.in)
		require.Equal(t, tt.want, pySplitlines([]byte(tt.in)), "%q", tt.in)
	}
}

// pySplitlines is bytes.splitlines (for the fuzz and unit tests).
func pySplitlines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i]))
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
	}
	return out
}

// TestStrictJSONStringsRandomized compares the string scanner (short
// windows, long vectorized runs, lazy UTF-8 checks) with encoding/json
// and utf8.Valid on random strings.
func TestStrictJSONStringsRandomized(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	pieces := []string{"a", "abcdefgh", strings.Repeat("x", 31), strings.Repeat("y", 33), strings.Repeat("z", 100),
		`\n`, `\"`, `\\`, `\/`, `\u00e9`, `\ud83d\ude00`, `\ud800`, "é", "→", "😀", "\x7f",
		"\xff", "\xc3", "\xed\xa0\x80", "\x01", "\t", `\x`, `\u12`, `"`,
		"\xc2\x80", "\xdf\xbf", "\xc0\x80", "\xc1\xbf", "\xe2\x82", "\xf4\x90\x80\x80", "\xf0\x8f\xbf\xbf", "\xef\xbf\xbd", "\x80", "\x1f"}
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		b.WriteString(`["`)
		for k := rng.IntN(12); k > 0; k-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		b.WriteString(`",1]`)
		in := []byte(b.String())
		var d jsonDoc
		e := d.parse(in)
		// Python's decoder with "surrogatepass" reads UTF-8-encoded
		// surrogates; strictOnly refuses them.
		wtf8 := validWTF8(in)
		want := json.Valid(in) && wtf8
		require.Equal(t, want, e == nil, "%q: %v", in, e)
		if e != nil && !wtf8 {
			require.Equal(t, generic(pyUnicodeDecodeError), e.msg, "%q", in)
		}
		if e == nil && !utf8.Valid(in) {
			require.Equal(t, generic(pyUnicodeDecodeError), d.strictOnly().msg, "%q", in)
		}
		if e == nil {
			// The decoded string is what encoding/json decodes (no lone
			// surrogates: Go replaces them).
			var want []any
			require.NoError(t, json.Unmarshal(in, &want))
			var first jv
			d.root().elems(func(v jv) bool { first = v; return false })
			s, _ := first.str()
			if !d.surrogate {
				require.Equal(t, want[0], s, "%q", in)
			}
		}
	}
}

// smallObject is the object size around which pyEqual once changed its
// strategy (scanning below, indexing above); both sides stay covered.
const smallObject = 16

// TestPyEqualObjects: objects compare as Python dicts, key order aside,
// both below and above smallObject keys.
func TestPyEqualObjects(t *testing.T) {
	t.Parallel()
	obj := func(n int, val func(i int) string, keyOf func(i int) string) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:%s", keyOf(i), val(i))
		}
		b.WriteByte('}')
		return b.String()
	}
	key := func(i int) string { return fmt.Sprintf("k%04d", i) }
	for _, n := range []int{0, 3, smallObject, smallObject + 1, 500} {
		reversed := func(i int) string { return key(n - 1 - i) }
		ints := func(i int) string { return strconv.Itoa(i) }
		for _, tc := range []struct {
			name  string
			a, b  string
			equal bool
		}{
			{"same", obj(n, ints, key), obj(n, ints, key), true},
			{"keys in another order", obj(n, ints, key), obj(n, func(i int) string { return strconv.Itoa(n - 1 - i) }, reversed), true},
			{"1 == 1.0 == true inside", obj(n, func(int) string { return "1" }, key), obj(n, func(i int) string { return []string{"1.0", "true", "1"}[i%3] }, reversed), true},
			{"one value differs", obj(n, ints, key), obj(n, func(i int) string {
				if i == n/2 {
					return `"x"`
				}
				return strconv.Itoa(i)
			}, key), n == 0},
			{"one key differs", obj(n, ints, key), obj(n, ints, func(i int) string {
				if i == n-1 {
					return "other"
				}
				return key(i)
			}), n == 0},
			{"one key more", obj(n, ints, key), obj(n+1, ints, key), false},
			{"nested", `{"o":` + obj(n, ints, key) + `}`, `{"o":` + obj(n, func(i int) string { return strconv.Itoa(n - 1 - i) }, reversed) + `}`, true},
		} {
			var da, db jsonDoc
			require.Nil(t, da.parse([]byte(tc.a)), tc.name)
			require.Nil(t, db.parse([]byte(tc.b)), tc.name)
			require.Equal(t, tc.equal, pyEqual(da.root(), db.root()), "%d keys: %s", n, tc.name)
			require.Equal(t, tc.equal, pyEqual(db.root(), da.root()), "%d keys: %s, swapped", n, tc.name)
		}
	}
	// An escaped key equals its plain spelling.
	var da, db jsonDoc
	many := obj(smallObject+1, func(i int) string { return strconv.Itoa(i) }, key)
	require.Nil(t, da.parse([]byte(`{"\u0061":1,`+many[1:])))
	require.Nil(t, db.parse([]byte(`{"a":1,`+many[1:])))
	require.True(t, pyEqual(da.root(), db.root()))
}

// BenchmarkPyEqualObject compares two equal objects of n keys in opposite
// key order; ns/key stays flat as n grows.
func BenchmarkPyEqualObject(b *testing.B) {
	for _, n := range []int{100, 10_000, 80_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			var x, y strings.Builder
			x.WriteByte('{')
			y.WriteByte('{')
			for i := range n {
				if i > 0 {
					x.WriteByte(',')
					y.WriteByte(',')
				}
				fmt.Fprintf(&x, `"k%06d":%d`, i, i)
				fmt.Fprintf(&y, `"k%06d":%d`, n-1-i, n-1-i)
			}
			x.WriteByte('}')
			y.WriteByte('}')
			var da, db jsonDoc
			if da.parse([]byte(x.String())) != nil || db.parse([]byte(y.String())) != nil {
				b.Fatal("parse")
			}
			for b.Loop() {
				if !pyEqual(da.root(), db.root()) {
					b.Fatal("not equal")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
		})
	}
}

// TestParseMemory: verifying a manifest of tiny values (two source bytes
// each) allocates at most 16 bytes of nodes per source byte (16-byte
// nodes, grown by doubling up to the most the source can hold) plus one
// copy of the member. It was 90 times the member's size with 32-byte nodes
// grown by append and a read buffer grown by doubling.
func TestParseMemory(t *testing.T) {
	const elems = 4 << 20
	manifest := []byte("[0" + strings.Repeat(",0", elems-1) + "]")
	b := baseBundle()
	b.editManifest = func([]byte) []byte { return manifest }
	data := b.build(t)
	before := allocated()
	r := verifyBytes(data, DefaultLimits)
	used := allocated() - before
	require.Equal(t, []string{"Invalid manifest"}, r.Issues)
	limit := uint64(17*len(manifest) + 8<<20)
	require.LessOrEqual(t, used, limit, "verifying a %d-byte manifest allocated %d MiB", len(manifest), used>>20)
}

// validWTF8 reports whether b is UTF-8 with surrogates allowed (what
// Python's decoder with "surrogatepass" reads): utf8.Valid, after
// replacing each encoded surrogate ED A0..BF 80..BF by a valid character.
func validWTF8(b []byte) bool {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] == 0xed && i+2 < len(b) && b[i+1] >= 0xa0 && b[i+1] <= 0xbf && b[i+2] >= 0x80 && b[i+2] <= 0xbf {
			out = append(out, 'x')
			i += 2
			continue
		}
		out = append(out, b[i])
	}
	return utf8.Valid(out)
}
