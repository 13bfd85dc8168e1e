package journal

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestSkipPlain checks the word-at-a-time scan against the byte table on
// every byte value at every position, and on random mixes.
func TestSkipPlain(t *testing.T) {
	t.Parallel()
	ref := func(b []byte, i int) int {
		for i < len(b) && plainASCII[b[i]] {
			i++
		}
		return i
	}
	check := func(b []byte, i int) {
		t.Helper()
		if got, want := skipPlain(b, i), ref(b, i); got != want {
			t.Fatalf("skipPlain(%q, %d) = %d, want %d", b, i, got, want)
		}
		if got, want := skipPlain(string(b), i), ref(b, i); got != want {
			t.Fatalf("skipPlain(string %q, %d) = %d, want %d", b, i, got, want)
		}
	}
	for n := 0; n <= 40; n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				b := make([]byte, n)
				for k := range b {
					b[k] = 'a'
				}
				b[pos] = byte(c)
				for start := 0; start <= min(n, 3); start++ {
					check(b, start)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 0x1f, 0x20, '"', '\\', 'a', 0x7f, 0x80, 0xff, 0x21, 0x5b, 0x5d, 0x23}
	for range 20000 {
		b := make([]byte, rng.IntN(48))
		for k := range b {
			if rng.IntN(4) == 0 {
				b[k] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[k] = byte(rng.IntN(256))
			}
		}
		check(b, 0)
	}
}

// TestAppendCanonicalString checks that a string written alone is what
// AppendCanonical writes for it, and that invalid UTF-8 fails.
func TestAppendCanonicalString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "a\"b\\c\n\r\t\b\f\x00\x1f\x7f", "é→日本\U0001F600", "</script>&", "ends with \\"} {
		got, err := AppendCanonicalString([]byte("x"), s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		lit := []byte{'"'}
		for _, r := range s {
			lit = appendJSONEscapedForTest(lit, r)
		}
		lit = append(lit, '"')
		want, err := AppendCanonical([]byte("x"), lit)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("AppendCanonicalString(%q) = %s, want %s", s, got, want)
		}
	}
	for _, s := range []string{"\xff", "ok\xc3", "\xed\xa0\x80"} {
		got, err := AppendCanonicalString([]byte("x"), s)
		if err == nil || string(got) != "x" {
			t.Errorf("AppendCanonicalString(%q) = %q, %v; want an error and nothing appended", s, got, err)
		}
	}
}

// appendJSONEscapedForTest writes r as a \u escape (or a surrogate pair).
func appendJSONEscapedForTest(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	u := func(v rune) { dst = append(dst, '\\', 'u', hex[v>>12&0xf], hex[v>>8&0xf], hex[v>>4&0xf], hex[v&0xf]) }
	if r >= 0x10000 {
		r -= 0x10000
		u(0xd800 + r>>10)
		u(0xdc00 + r&0x3ff)
		return dst
	}
	u(r)
	return dst
}

// TestDoc checks that Doc writes what AppendCanonical writes, reports its
// strings, and limits nesting by the enclosing depth.
func TestDoc(t *testing.T) {
	t.Parallel()
	var d Doc
	src := []byte(` {"b": "x\/y", "a\u0041": [1.0, "k\n", {"c": null}], "s": "{\"api_key\":1}"} `)
	if err := d.Parse(src, 0); err != nil {
		t.Fatal(err)
	}
	want, err := AppendCanonical(nil, src)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.AppendCanonical(nil); string(got) != string(want) {
		t.Fatalf("Doc.AppendCanonical = %s, want %s", got, want)
	}
	type str struct {
		s        string
		key, esc bool
	}
	var got []str
	d.Strings(func(s []byte, key, esc bool) bool {
		got = append(got, str{string(s), key, esc})
		return true
	})
	wantStrs := []str{{"b", true, false}, {`x\/y`, false, true}, {"aA", true, true}, {`k\n`, false, true}, {"c", true, false}, {"s", true, false}, {`{\"api_key\":1}`, false, true}}
	if len(got) != len(wantStrs) {
		t.Fatalf("Strings = %v, want %v", got, wantStrs)
	}
	for i := range got {
		if got[i] != wantStrs[i] {
			t.Fatalf("Strings = %v, want %v", got, wantStrs)
		}
	}
	if d.IsNull() {
		t.Fatal("IsNull on an object")
	}
	if err := d.Parse([]byte(" null "), 0); err != nil || !d.IsNull() {
		t.Fatalf("null: %v %v", err, d.IsNull())
	}
	deep := make([]byte, 0, 2*MaxDepth)
	for range MaxDepth {
		deep = append(deep, '[')
	}
	for range MaxDepth {
		deep = append(deep, ']')
	}
	if err := d.Parse(deep, 0); err != nil {
		t.Fatalf("depth %d at top level: %v", MaxDepth, err)
	}
	if err := d.Parse(deep, 1); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("depth %d inside one container: %v, want ErrTooDeep", MaxDepth, err)
	}
	if _, err := AppendCanonical(nil, append(append([]byte("["), deep...), ']')); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("AppendCanonical of depth %d: %v", MaxDepth+1, err)
	}
}

// formatFloatOracle is FormatFloat as first written, with two strconv
// calls: the reference for the allocation-free appendFloat.
func formatFloatOracle(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign = "-"
			exp = -exp
		}
		es := strconv.Itoa(exp)
		if len(es) < 2 {
			es = "0" + es
		}
		return mant + "e" + sign + es
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

func TestFormatFloatOracle(t *testing.T) {
	t.Parallel()
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 0.25, 100, 1e15, 1e16, 9999999999999998, 1e-4, 1e-5, 0.0001234,
		123456.789, -2.5e-300, math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324, 1.7976931348623157e308,
		math.NaN(), math.Inf(1), math.Inf(-1), 0.1, 0.3, 1.0 / 3, 2.0 / 3, 1e21, 1e22, 123e-20}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		switch rng.IntN(3) {
		case 0:
			vals = append(vals, math.Float64frombits(rng.Uint64()))
		case 1:
			vals = append(vals, float64(rng.IntN(1e9))/math.Pow(10, float64(rng.IntN(25))))
		default:
			vals = append(vals, rng.NormFloat64()*math.Pow(10, float64(rng.IntN(40)-20)))
		}
	}
	for _, f := range vals {
		if got, want := FormatFloat(f), formatFloatOracle(f); got != want {
			t.Fatalf("FormatFloat(%v) = %s, want %s", f, got, want)
		}
	}
}
