package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// Errors returned by AppendCanonical, Canonical, Equal and Doc's parsers,
// always as a *SyntaxError (which says where); test for them with
// errors.Is.
var (
	// ErrInvalidJSON reports input that is not one JSON text (RFC 8259)
	// in UTF-8: a syntax error, trailing data after the value, a raw
	// control character in a string, invalid UTF-8, a byte order mark,
	// or the non-standard NaN/Infinity literals. ErrInvalidText and
	// ErrTooLarge match it too.
	ErrInvalidJSON = errors.New("invalid json")
	// ErrInvalidText reports bytes that do not decode as text: invalid
	// UTF-8 or, for Doc.ParsePython, UTF-16 or UTF-32 input that does
	// not decode (Python's UnicodeDecodeError). It matches ErrInvalidJSON.
	ErrInvalidText = fmt.Errorf("%w: invalid text encoding", ErrInvalidJSON)
	// ErrTooLarge reports input of 2 GiB or more, beyond what the
	// parser's 32-bit offsets address. It matches ErrInvalidJSON.
	ErrTooLarge = fmt.Errorf("%w: input too large", ErrInvalidJSON)
	// ErrDuplicateKey reports an object with the same key twice (after
	// decoding escapes). Python's json.loads would keep the last value;
	// hxd never writes such objects and refuses to guess.
	ErrDuplicateKey = errors.New("duplicate object key")
	// ErrTooDeep reports arrays and objects nested more than MaxDepth
	// levels (PythonMaxDepth for Doc.ParsePython).
	ErrTooDeep = errors.New("json nested too deeply")
	// ErrNonFinite reports a float literal that overflows float64 (such as
	// 1e999): Python reads it as an infinity, which json.dumps with
	// allow_nan=False refuses to write. For Doc.ParsePython, which reads
	// such literals, it reports the NaN, Infinity and -Infinity literals
	// instead.
	ErrNonFinite = errors.New("non-finite float")
	// ErrLoneSurrogate reports a \uD800-\uDFFF escape that is not part of
	// a surrogate pair. Python's json.loads accepts it, but the resulting
	// string cannot be encoded as UTF-8, so canonical JSON cannot hold it.
	ErrLoneSurrogate = errors.New("lone surrogate escape")
	// ErrIntTooLong reports, for Doc.ParsePython only, an integer literal
	// of more than 4300 digits, which CPython refuses (int_max_str_digits).
	ErrIntTooLong = errors.New("integer literal too long")
)

// MaxDepth is the deepest nesting of arrays and objects that
// AppendCanonical and Equal accept; deeper input fails with ErrTooDeep.
// (CPython's json itself gives up near its recursion limit of 1000.)
const MaxDepth = 10000

// AppendCanonical appends to dst the canonical form of the single JSON
// text src (optionally surrounded by JSON whitespace) and returns the
// extended slice. The canonical form is byte for byte what Python writes
// for the value json.loads(src) with
//
//	json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True,
//	           separators=(",", ":")).encode("utf-8")
//
// (REFERENCE §6.5):
//
//   - object keys sorted by code point (UTF-8 byte order) at every level;
//   - no whitespace;
//   - strings escape only '"', '\\', and control characters below 0x20
//     (\n \r \t \b \f by name, the others as \u00xx in lowercase hex);
//     everything else, including non-ASCII, U+2028, U+2029, '<', '>',
//     '&', '/' and DEL, is written raw. Escapes in src are decoded, and a
//     surrogate pair escape becomes one raw code point;
//   - an integer literal (no '.', 'e' or 'E') keeps its exact value at any
//     size, with -0 written as 0;
//   - a float literal is rounded to float64 and written like Python's
//     repr (FormatFloat): 1E2 becomes 100.0, 1e16 becomes 1e+16;
//   - true, false and null unchanged.
//
// Where Python would fail or guess, AppendCanonical returns an error
// instead: ErrInvalidJSON (also for invalid UTF-8 and NaN/Infinity
// literals), ErrDuplicateKey, ErrTooDeep, ErrNonFinite (1e999) and
// ErrLoneSurrogate. One divergence remains: CPython 3.11 refuses integer
// literals longer than 4300 digits, AppendCanonical copies them.
//
// On error dst is returned unchanged in length. Memory use is about 24
// bytes per JSON value in src on top of the output.
func AppendCanonical(dst, src []byte) ([]byte, error) {
	p := getParser()
	defer putParser(p)
	if err := p.parse(src, modeCanonical, MaxDepth); err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, len(src))
	dst, _ = p.emit(dst, 0, nil)
	return dst, nil
}

// Canonical marshals v with encoding/json (HTML escaping off) and returns
// its canonical form (see AppendCanonical). Go float64 values that are
// integral marshal without a fraction ("300") and so become JSON
// integers; use Float where a value must stay a float ("300.0"). Note
// that Float renders NaN and infinities as null rather than failing.
func Canonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return AppendCanonical(make([]byte, 0, len(b)), b)
}

// emit appends the canonical form of node i and returns the index of the
// node after its subtree; with a replacer, the values of the object
// members it matches are replaced (Doc.AppendCanonicalReplacing).
// Recursion depth is bounded by MaxDepth.
func (p *parser) emit(dst []byte, i int32, r *replacer) ([]byte, int32) {
	n := &p.nodes[i]
	switch n.kind {
	case jNull:
		return append(dst, "null"...), i + 1
	case jTrue:
		return append(dst, "true"...), i + 1
	case jFalse:
		return append(dst, "false"...), i + 1
	case jInt:
		lit := p.src[n.start:n.end]
		if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
			lit = lit[1:]
		}
		return append(dst, lit...), i + 1
	case jFloat:
		return appendFloat(dst, parseFloat(p.src[n.start:n.end])), i + 1
	case jString:
		return p.appendString(dst, n), i + 1
	case jArray:
		dst = append(dst, '[')
		end := n.next
		for j := i + 1; j < end; {
			if j > i+1 {
				dst = append(dst, ',')
			}
			dst, j = p.emit(dst, j, r)
		}
		return append(dst, ']'), end
	default: // jObject
		dst = append(dst, '{')
		if n.flags&fUnsorted == 0 {
			// Keys in order: members in document order.
			for key := i + 1; key < n.next; {
				if key > i+1 {
					dst = append(dst, ',')
				}
				dst, key = p.emitMember(dst, key, r)
			}
			return append(dst, '}'), n.next
		}
		it := p.memberIter(i)
		for k := 0; ; k++ {
			key, ok := it.next()
			if !ok {
				break
			}
			if k > 0 {
				dst = append(dst, ',')
			}
			dst, _ = p.emitMember(dst, key, r)
		}
		return append(dst, '}'), n.next
	}
}

// emitMember appends the object member whose key is node key, "key":value,
// and returns the index of the node after it.
func (p *parser) emitMember(dst []byte, key int32, r *replacer) ([]byte, int32) {
	dst = p.appendString(dst, &p.nodes[key])
	dst = append(dst, ':')
	if r != nil && r.replace(p.keyBytes(key, &p.scratchA)) {
		start := len(dst)
		dst, next := p.emit(dst, key+1, nil)
		if !bytes.Equal(dst[start:], r.lit) {
			r.changed = true
		}
		return append(dst[:start], r.lit...), next
	}
	return p.emit(dst, key+1, r)
}

// appendString appends string node n in canonical form.
func (p *parser) appendString(dst []byte, n *jnode) []byte {
	raw := p.src[n.start:n.end]
	dst = append(dst, '"')
	if n.flags&fRecode == 0 {
		// Validated: valid UTF-8, no raw '"', '\\' or control characters,
		// and the only escapes are \" \\ \b \f \n \r \t, which are
		// canonical as they stand.
		dst = append(dst, raw...)
		return append(dst, '"')
	}
	for len(raw) > 0 {
		j := bytes.IndexByte(raw, '\\')
		if j < 0 {
			dst = append(dst, raw...)
			break
		}
		dst = append(dst, raw[:j]...)
		r, size := decodeEscape(raw[j:])
		raw = raw[j+size:]
		dst = appendCanonicalRune(dst, r)
	}
	return append(dst, '"')
}

// appendCanonicalRune appends r as Python's json encoder writes it inside
// a string with ensure_ascii=False. r is never a surrogate here.
func appendCanonicalRune(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	}
	if r < 0x20 {
		const hex = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
	}
	if r < 0x80 {
		return append(dst, byte(r))
	}
	return utf8.AppendRune(dst, r)
}

// Doc is one parsed JSON text: Parse it once for canonical output, then
// look at its strings and write it without parsing it again; or
// ParsePython it to read it as the bundle verifier does (see Value). The
// zero Doc is ready for use and may be reused for text after text; a Doc
// is not safe for concurrent use.
type Doc struct {
	p  parser
	ok bool
	// python: the last parse was ParsePython (no canonical output).
	python bool
}

// Parse parses src exactly as AppendCanonical does (and fails with the
// same errors) for a value that sits inside depth enclosing arrays or
// objects of a larger document (0 for a whole document): src may nest at
// most MaxDepth-depth containers deep. The Doc aliases src until the next
// Parse.
func (d *Doc) Parse(src []byte, depth int) error {
	d.ok, d.python = false, false
	if err := d.p.parse(src, modeCanonical, MaxDepth-max(depth, 0)); err != nil {
		d.p.src = nil
		return err
	}
	d.ok = true
	return nil
}

// AppendCanonical appends the canonical form of the parsed text to dst
// (see the function AppendCanonical). It panics without a successful
// Parse.
func (d *Doc) AppendCanonical(dst []byte) []byte {
	if !d.ok || d.python {
		panic("journal: Doc.AppendCanonical without a successful Parse")
	}
	dst = slices.Grow(dst, len(d.p.src))
	dst, _ = d.p.emit(dst, 0, nil)
	return dst
}

// AppendCanonicalReplacing appends the canonical form of the parsed text
// to dst like AppendCanonical, except that the value of every object
// member whose decoded key satisfies replace (at any depth, but not inside
// a value already replaced) is written as lit instead, which must be a
// canonical JSON text (e.g. from AppendCanonicalString). changed reports
// whether any replaced value's canonical form differed from lit. It panics
// without a successful Parse.
func (d *Doc) AppendCanonicalReplacing(dst []byte, replace func(key []byte) bool, lit []byte) (_ []byte, changed bool) {
	if !d.ok || d.python {
		panic("journal: Doc.AppendCanonicalReplacing without a successful Parse")
	}
	dst = slices.Grow(dst, len(d.p.src))
	r := replacer{replace: replace, lit: lit}
	dst, _ = d.p.emit(dst, 0, &r)
	return dst, r.changed
}

// replacer is the state of Doc.AppendCanonicalReplacing.
type replacer struct {
	replace func(key []byte) bool
	lit     []byte
	changed bool
}

// IsNull reports whether the parsed text is the literal null.
func (d *Doc) IsNull() bool { return d.ok && d.p.nodes[0].kind == jNull }

// Strings calls fn for every string of the parsed text, in source order,
// until fn returns false, and reports whether it got to the end. For an
// object key s is the key's decoded content and key is true; for any
// other string s is its source text between the quotes, escapes not
// decoded, and esc reports whether it contains any. s is valid until fn
// returns; fn must not keep it.
func (d *Doc) Strings(fn func(s []byte, key, esc bool) bool) bool {
	if !d.ok {
		return true
	}
	p := &d.p
	for i := range p.nodes {
		n := &p.nodes[i]
		if n.kind != jString {
			continue
		}
		key := n.flags&fKey != 0
		var s []byte
		if key {
			s = p.keyBytes(int32(i), &p.scratchA)
		} else {
			s = p.src[n.start:n.end]
		}
		if !fn(s, key, n.flags&fEsc != 0) {
			return false
		}
	}
	return true
}

// CheckCanonical returns the error AppendCanonical would return for src
// (nil when src has a canonical form), without writing anything: for JSON
// from outside that the journal will hold and export.
func CheckCanonical(src []byte) error {
	p := getParser()
	defer putParser(p)
	return p.parse(src, modeCanonical, MaxDepth)
}

// AppendCanonicalString appends s as a canonical JSON string literal (see
// AppendCanonical): quoted, with only '"', '\\' and control characters
// escaped. It fails with ErrInvalidJSON, appending nothing, when s is not
// valid UTF-8 (surrogate code points included), which JSON text cannot
// hold.
func AppendCanonicalString(dst []byte, s string) ([]byte, error) {
	start := len(dst)
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		j := skipPlain(s, i)
		dst = append(dst, s[i:j]...)
		if j == len(s) {
			break
		}
		c := s[j]
		if c < utf8.RuneSelf {
			dst = appendCanonicalRune(dst, rune(c))
			i = j + 1
			continue
		}
		r, size := utf8.DecodeRuneInString(s[j:])
		if r == utf8.RuneError && size <= 1 {
			return dst[:start], fmt.Errorf("%w: invalid UTF-8 at offset %d of a string", ErrInvalidJSON, j)
		}
		dst = append(dst, s[j:j+size]...)
		i = j + size
	}
	return append(dst, '"'), nil
}

// skipPlain returns the offset of the first byte at or after i that is
// not plainASCII (or len(src)), sixteen bytes at a time: the parser's
// (and AppendCanonicalString's) way over long plain runs.
func skipPlain[T string | []byte](src T, i int) int {
	for i+16 <= len(src) {
		b := src[i : i+16]
		x := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		y := uint64(b[8]) | uint64(b[9])<<8 | uint64(b[10])<<16 | uint64(b[11])<<24 |
			uint64(b[12])<<32 | uint64(b[13])<<40 | uint64(b[14])<<48 | uint64(b[15])<<56
		mx, my := specialBytes(x), specialBytes(y)
		if mx|my != 0 {
			if mx != 0 {
				return i + bits.TrailingZeros64(mx)>>3
			}
			return i + 8 + bits.TrailingZeros64(my)>>3
		}
		i += 16
	}
	for i+8 <= len(src) {
		b := src[i : i+8]
		x := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		if m := specialBytes(x); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(src) && plainASCII[src[i]] {
		i++
	}
	return i
}

// specialBytes marks, in the high bit of each byte, the bytes of x (eight
// bytes, the first in the low byte) that are not plainASCII: below 0x20,
// '"', '\\', or 0x80 and above. Marks above the lowest may be spurious;
// the lowest is always exact.
func specialBytes(x uint64) uint64 {
	const (
		lo = 0x0101010101010101
		hi = 0x8080808080808080
	)
	q := x ^ ('"' * lo)
	e := x ^ ('\\' * lo)
	// The usual "has a byte below n" test, (v - n*lo) &^ v & hi, for v = x,
	// q and e, which share their high bits; or'ed with x itself, the
	// &^ v drops out.
	return ((x - 0x20*lo) | (q - lo) | (e - lo) | x) & hi
}

// plainASCII marks bytes that stand for themselves inside a JSON string
// and need no escaping on output (nor a look from the parser): printable
// ASCII and DEL, except '"' and '\\'.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
