package journal

import (
	"bytes"
	"iter"
	"unicode/utf8"
)

// PythonMaxDepth is the deepest nesting of arrays and objects
// Doc.ParsePython accepts (ErrTooDeep beyond): CPython's json fails near
// its recursion limit of 1000, at a depth that depends on its call stack.
const PythonMaxDepth = 1000

// ParsePython parses src as CPython 3.11's json.loads(src) reads bytes,
// for the bundle verifier (REFERENCE §7.3 items 8 and 16). It fails
// exactly where json.loads fails, with an error whose class tells the
// reference's exception, in the order CPython meets them: the whole input
// is decoded first, then parsed left to right, a duplicate key noticed
// when its object closes (the reference's object_pairs_hook), a
// non-finite literal or an over-long integer when it is scanned:
//
//   - ErrInvalidText: the input does not decode (UnicodeDecodeError);
//   - ErrNonFinite: a NaN, Infinity or -Infinity literal (the reference's
//     "Non-finite JSON number");
//   - ErrDuplicateKey: an object repeats a key ("Duplicate JSON key");
//   - ErrIntTooLong, ErrTooLarge: ValueError;
//   - ErrTooDeep: nesting beyond PythonMaxDepth (RecursionError);
//   - ErrInvalidJSON otherwise (JSONDecodeError).
//
// Like json.loads it detects and decodes a UTF-8 byte order mark and
// UTF-16 and UTF-32 text (Encoding), decodes UTF-8-encoded surrogates
// ("surrogatepass"; RawSurrogateAt) and lone surrogate escapes
// (HasLoneSurrogate) into lone surrogates, and reads a float literal that
// overflows float64 as an infinity (OverflowAt). Strings with lone
// surrogates decode to generalized UTF-8 (WTF-8). Offsets count bytes of
// the input; past a BOM the text starts at TextOffset, and for UTF-16/32
// input an error's offset counts bytes of the decoded text (its Why says
// so).
//
// The Doc aliases src (or its own decoded copy) until the next parse; it
// can be read through Root but not written canonically.
func (d *Doc) ParsePython(src []byte) error {
	d.ok, d.python = false, true
	if err := d.p.parse(src, modePython, PythonMaxDepth); err != nil {
		return err
	}
	d.ok = true
	return nil
}

// Encoding is the encoding ParsePython detected when the input is not
// plain UTF-8: "utf-8-sig" (a UTF-8 byte order mark), "utf-16",
// "utf-16-le", "utf-16-be", "utf-32", "utf-32-le" or "utf-32-be"; ""
// otherwise.
func (d *Doc) Encoding() string { return d.p.encoding }

// Text is the text parsed: the input, without a UTF-8 BOM, or UTF-16/32
// input decoded to UTF-8 (WTF-8).
func (d *Doc) Text() []byte { return d.p.src }

// TextOffset is the offset of Text in the input for UTF-8 input (3 after
// a BOM, else 0).
func (d *Doc) TextOffset() int { return d.p.base }

// OverflowAt is the offset in Text of the first float literal that
// overflows float64, or -1.
func (d *Doc) OverflowAt() int { return d.p.overflow - 1 }

// RawSurrogateAt is the offset in Text of the first UTF-8-encoded
// surrogate (read by ParsePython only), or -1.
func (d *Doc) RawSurrogateAt() int { return d.p.rawSurrogate - 1 }

// HasLoneSurrogate reports whether a string of the text holds a lone
// surrogate: an escape, or a UTF-8-encoded one.
func (d *Doc) HasLoneSurrogate() bool { return d.p.surrogate }

// HasCodeEscape reports whether a string of the text holds a \uXXXX or
// \/ escape: the escapes whose canonical form differs from their source.
func (d *Doc) HasCodeEscape() bool { return d.p.codeEscape }

// Root is the parsed text's value; absent without a successful parse.
func (d *Doc) Root() Value {
	if !d.ok {
		return Value{}
	}
	return Value{p: &d.p}
}

// Values yields every value of the parsed text in document order, object
// keys (strings) included, each before the values it contains.
func (d *Doc) Values() iter.Seq[Value] {
	return func(yield func(Value) bool) {
		if !d.ok {
			return
		}
		for i := range d.p.nodes {
			if !yield(Value{p: &d.p, i: int32(i)}) {
				return
			}
		}
	}
}

// JSONKind is the type of a parsed JSON value. Integer and float literals
// are told apart, as Python's json.loads does.
type JSONKind uint8

// The kinds of parsed values.
const (
	JSONNull   = JSONKind(jNull)
	JSONFalse  = JSONKind(jFalse)
	JSONTrue   = JSONKind(jTrue)
	JSONInt    = JSONKind(jInt)   // a number literal without fraction or exponent
	JSONFloat  = JSONKind(jFloat) // a number literal with a fraction or an exponent
	JSONString = JSONKind(jString)
	JSONArray  = JSONKind(jArray)
	JSONObject = JSONKind(jObject)
)

// Value is one value of a parsed Doc, valid until the Doc's next parse.
// The zero Value is absent (what a missing object member gives): it
// exists not, its Kind is JSONNull and it holds nothing.
type Value struct {
	p *parser
	i int32
}

func (v Value) node() *jnode { return &v.p.nodes[v.i] }

// Exists reports whether v is a value (not absent).
func (v Value) Exists() bool { return v.p != nil }

// Kind is v's type; JSONNull when absent.
func (v Value) Kind() JSONKind {
	if v.p == nil {
		return JSONNull
	}
	return JSONKind(v.node().kind)
}

// Raw is v's source text: a string's bytes between its quotes (escapes
// not decoded), a number's or literal's text, a container's text from
// bracket to bracket. It is nil when v is absent.
func (v Value) Raw() []byte {
	if v.p == nil {
		return nil
	}
	n := v.node()
	if n.kind == jArray || n.kind == jObject {
		return v.p.src[n.start : n.end+1]
	}
	return v.p.src[n.start:n.end]
}

// Escaped reports whether v is a string holding a backslash escape.
func (v Value) Escaped() bool { return v.p != nil && v.node().flags&fEsc != 0 }

// AppendText appends a string's decoded content (lone surrogates as
// WTF-8) to dst; other values append nothing.
func (v Value) AppendText(dst []byte) []byte {
	if v.Kind() != JSONString {
		return dst
	}
	n := v.node()
	raw := v.p.src[n.start:n.end]
	if n.flags&fEsc == 0 {
		return append(dst, raw...)
	}
	return appendDecoded(dst, raw)
}

// TextEquals reports whether v is a string whose decoded content is s.
func (v Value) TextEquals(s string) bool {
	if v.Kind() != JSONString {
		return false
	}
	n := v.node()
	raw := v.p.src[n.start:n.end]
	if n.flags&fEsc == 0 {
		return string(raw) == s
	}
	if len(raw) < len(s) { // escapes only make the source longer
		return false
	}
	return string(v.p.keyBytes(v.i, &v.p.scratchB)) == s
}

// Get is the value of an object's member named key (decoded); absent for
// a missing key or when v is not an object.
func (v Value) Get(key string) Value {
	if v.Kind() != JSONObject {
		return Value{}
	}
	nodes := v.p.nodes
	for j := v.i + 1; j < nodes[v.i].next; j = nodes[j+1].next {
		if (Value{p: v.p, i: j}).TextEquals(key) {
			return Value{p: v.p, i: j + 1}
		}
	}
	return Value{}
}

// Elems yields the elements of an array (nothing for other values).
func (v Value) Elems() iter.Seq[Value] {
	return func(yield func(Value) bool) {
		if v.Kind() != JSONArray {
			return
		}
		nodes := v.p.nodes
		for j := v.i + 1; j < nodes[v.i].next; j = nodes[j].next {
			if !yield(Value{p: v.p, i: j}) {
				return
			}
		}
	}
}

// Members yields the keys (strings) and values of an object in document
// order (nothing for other values).
func (v Value) Members() iter.Seq2[Value, Value] {
	return func(yield func(Value, Value) bool) {
		if v.Kind() != JSONObject {
			return
		}
		nodes := v.p.nodes
		for j := v.i + 1; j < nodes[v.i].next; j = nodes[j+1].next {
			if !yield(Value{p: v.p, i: j}, Value{p: v.p, i: j + 1}) {
				return
			}
		}
	}
}

// Len is the number of elements of an array or members of an object, 0
// for other values.
func (v Value) Len() int {
	switch v.Kind() {
	case JSONObject:
		return v.p.count(v.i)
	case JSONArray:
		n := 0
		nodes := v.p.nodes
		for j := v.i + 1; j < nodes[v.i].next; j = nodes[j].next {
			n++
		}
		return n
	}
	return 0
}

// ParseLenient parses src as Equal reads its texts: like Parse, but also
// accepting what Python's json.loads reads and json.dumps cannot write,
// lone surrogate escapes and float literals that overflow float64. The
// Doc can be read through Root but not written canonically.
func (d *Doc) ParseLenient(src []byte) error {
	d.ok, d.python = false, true
	if err := d.p.parse(src, modeEqual, MaxDepth); err != nil {
		return err
	}
	d.ok = true
	return nil
}

// AppendUnescaped appends the text of a JSON string body (the bytes
// between its quotes, not necessarily parsed) with its escapes decoded as
// encoding/json decodes them: a surrogate pair escape becomes its code
// point, a lone surrogate escape U+FFFD. Other bytes are copied as they
// are. It fails with ErrInvalidJSON, appending nothing, on an invalid or
// truncated escape.
func AppendUnescaped(dst, body []byte) ([]byte, error) {
	start := len(dst)
	for i := 0; i < len(body); {
		j := bytes.IndexByte(body[i:], '\\')
		if j < 0 {
			return append(dst, body[i:]...), nil
		}
		dst = append(dst, body[i:i+j]...)
		i += j
		if i+1 >= len(body) || escapeKind[body[i+1]] == escapeInvalid {
			return dst[:start], &SyntaxError{Err: ErrInvalidJSON, Offset: i, Why: "invalid escape"}
		}
		if body[i+1] == 'u' {
			if _, ok := hex4(body[i+2:]); !ok {
				return dst[:start], &SyntaxError{Err: ErrInvalidJSON, Offset: i, Why: `invalid \u escape`}
			}
		}
		r, n := decodeEscape(body[i:])
		if 0xd800 <= r && r < 0xe000 {
			r = utf8.RuneError
		}
		dst = utf8.AppendRune(dst, r)
		i += n
	}
	return dst, nil
}
