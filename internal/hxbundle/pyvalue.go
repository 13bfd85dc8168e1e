package hxbundle

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"hxd/internal/journal"
)

// Python semantics over parsed JSON values, for the few places where the
// reference compares, tests or converts values it does not validate
// first: ==, truthiness, int(), float() and dict().

// isNumeric: bool, int and float compare as numbers in Python.
func isNumeric(k jsonKind) bool {
	return k == jsonTrue || k == jsonFalse || k == jsonNumber
}

// pyEqual is Python's == between two decoded JSON values (an absent
// value is None): 1 == 1.0 == True, dicts compare as key sets with equal
// values, lists element by element (journal.EqualValues).
func pyEqual(a, b jv) bool {
	if !a.exists() || !b.exists() {
		return a.isNone() && b.isNone()
	}
	return journal.EqualValues(a.v, b.v)
}

// pyNumber is a numeric JSON value: an exact integer or a float.
type pyNumber struct {
	isFloat bool
	f       float64
	i       *big.Int
}

func toNumber(v jv) pyNumber {
	switch v.kind() {
	case jsonTrue:
		return pyNumber{i: big.NewInt(1)}
	case jsonFalse:
		return pyNumber{i: big.NewInt(0)}
	}
	if v.isInt() {
		i, _ := new(big.Int).SetString(string(v.raw()), 10)
		return pyNumber{i: i}
	}
	f, _ := strconv.ParseFloat(string(v.raw()), 64)
	return pyNumber{isFloat: true, f: f}
}

// pyTruthy is Python's bool() of a value (absent counts as None).
func pyTruthy(v jv) bool {
	switch v.kind() {
	case jsonNull, jsonFalse:
		return false
	case jsonTrue:
		return true
	case jsonNumber:
		n := toNumber(v)
		if n.isFloat {
			return n.f != 0
		}
		return n.i.Sign() != 0
	case jsonString:
		return len(v.raw()) > 0
	default:
		return v.length() > 0
	}
}

// pyIntCall is the exception class (or "") of Python's int(x).
func pyIntCall(v jv) string {
	switch v.kind() {
	case jsonNull, jsonArray, jsonObject:
		return pyTypeError
	case jsonString:
		s, _ := v.str()
		if !pyIntString(s) {
			return pyValueError
		}
	case jsonNumber:
		if n := toNumber(v); n.isFloat && math.IsInf(n.f, 0) {
			return pyOverflowError // int(inf): a float literal that overflowed
		}
	}
	return ""
}

// pyFloatCall is the exception class (or "") of Python's float(x).
func pyFloatCall(v jv) string {
	switch v.kind() {
	case jsonNull, jsonArray, jsonObject:
		return pyTypeError
	case jsonString:
		s, _ := v.str()
		if !pyFloatString(s) {
			return pyValueError
		}
	case jsonNumber:
		if v.isInt() && intOverflowsFloat(v) {
			return pyOverflowError
		}
	}
	return ""
}

// intOverflowsFloat reports whether converting an integer literal to float
// raises OverflowError ("int too large to convert to float").
func intOverflowsFloat(v jv) bool {
	lit := v.raw()
	if len(lit) < 300 {
		return false
	}
	i, _ := new(big.Int).SetString(string(lit), 10)
	f, _ := new(big.Float).SetInt(i).Float64()
	return math.IsInf(f, 0)
}

// pyTransform is _PyUnicode_TransformDecimalAndSpaceToASCII: Unicode white
// space becomes ' ', Unicode decimal digits their ASCII digit, any other
// non-ASCII character (lone surrogates included) '?'.
func pyTransform(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r < utf8.RuneSelf && size == 1 && r != utf8.RuneError:
			b.WriteRune(r)
		case r == utf8.RuneError && size <= 1:
			b.WriteByte('?') // part of a WTF-8 surrogate
		case pySpace(r):
			b.WriteByte(' ')
		case unicode.Is(unicode.Nd, r):
			b.WriteByte('0') // only validity matters here, not the value
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// pySpace is Py_UNICODE_ISSPACE for a non-ASCII character (ASCII
// characters are never transformed; int() and float() then skip only
// ASCII white space, so U+001C..U+001F never count).
func pySpace(r rune) bool { return unicode.IsSpace(r) }

func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// pyIntString reports whether int(s) succeeds for a str s (base 10).
func pyIntString(s string) bool {
	t := strings.TrimFunc(pyTransform(s), func(r rune) bool { return r < 0x80 && asciiSpace(byte(r)) })
	if t != "" && (t[0] == '+' || t[0] == '-') {
		t = t[1:]
	}
	if t == "" || !isDigit(t[0]) || !isDigit(t[len(t)-1]) {
		return false
	}
	digits := 0
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case isDigit(c):
			digits++
		case c == '_' && isDigit(t[i+1]):
		default:
			return false
		}
	}
	return digits <= maxIntDigits
}

// pyFloatString reports whether float(s) succeeds for a str s.
func pyFloatString(s string) bool {
	t := pyTransform(s)
	// Strip ASCII white space, leaving at least one character.
	for len(t) > 0 && asciiSpace(t[0]) {
		t = t[1:]
	}
	for len(t) > 1 && asciiSpace(t[len(t)-1]) {
		t = t[:len(t)-1]
	}
	if strings.Contains(t, "_") {
		var b strings.Builder
		prev := byte(0)
		for i := 0; i < len(t); i++ {
			c := t[i]
			if c == '_' {
				if !isDigit(prev) {
					return false
				}
			} else {
				if prev == '_' && !isDigit(c) {
					return false
				}
				b.WriteByte(c)
			}
			prev = c
		}
		if prev == '_' {
			return false
		}
		t = b.String()
	}
	u := t
	if u != "" && (u[0] == '+' || u[0] == '-') {
		u = u[1:]
	}
	switch strings.ToLower(u) {
	case "inf", "infinity", "nan":
		return true
	}
	i, mant := 0, 0
	for i < len(u) && isDigit(u[i]) {
		i++
		mant++
	}
	if i < len(u) && u[i] == '.' {
		i++
		for i < len(u) && isDigit(u[i]) {
			i++
			mant++
		}
	}
	if mant == 0 {
		return false
	}
	if i < len(u) && (u[i] == 'e' || u[i] == 'E') {
		i++
		if i < len(u) && (u[i] == '+' || u[i] == '-') {
			i++
		}
		exp := 0
		for i < len(u) && isDigit(u[i]) {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(u)
}

// pyDictCall is the exception class (or "") of Python's dict(x) for a
// truthy x.
func pyDictCall(v jv) string {
	switch v.kind() {
	case jsonObject:
		return ""
	case jsonString:
		// Each element is a one-character string: length 1, not 2.
		return pyValueError
	case jsonArray:
		class := ""
		v.elems(func(e jv) bool {
			class = dictElement(e)
			return class == ""
		})
		return class
	}
	return pyTypeError // a number or true is not iterable
}

// dictElement checks one element of the sequence given to dict():
// iterable, of length 2, with a hashable first item.
func dictElement(e jv) string {
	switch e.kind() {
	case jsonString:
		s, _ := e.str()
		if pyLen([]byte(s)) != 2 {
			return pyValueError
		}
		return ""
	case jsonObject:
		if e.length() != 2 {
			return pyValueError
		}
		return "" // the keys, strings, are the items
	case jsonArray:
		if e.length() != 2 {
			return pyValueError
		}
		var first jv
		e.elems(func(x jv) bool { first = x; return false })
		if k := first.kind(); k == jsonArray || k == jsonObject {
			return pyTypeError // unhashable key
		}
		return ""
	}
	return pyTypeError // not iterable
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// pyLen is Python's len() of a decoded (WTF-8) string: its code points.
func pyLen(s []byte) int {
	n := 0
	for _, c := range s {
		if c&0xc0 != 0x80 {
			n++
		}
	}
	return n
}
