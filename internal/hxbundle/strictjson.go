package hxbundle

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The strict loader of REFERENCE §7.3 item 8: Python's json.loads with a
// pairs hook that rejects duplicate keys and a constant hook that rejects
// NaN/Infinity/-Infinity. Errors surface in the order CPython's scanner
// meets them: the whole text is decoded first (UnicodeDecodeError), then
// parsed left to right; a duplicate key is noticed when its object closes,
// a non-finite constant or an over-long integer when it is scanned.
//
// parse fails only where json.loads fails, with the reference's message.
// What json.loads accepts but hxd refuses (DESIGN §8: input a conforming
// writer never produces) is parsed as Python reads it and noted, for the
// verifier to refuse once the reference's own checks have passed, so
// that a bundle the reference rejects gets the reference's message:
//   - a UTF-8 byte order mark and UTF-16/UTF-32 text, which Python detects
//     and decodes (an undecodable text fails at once with the
//     reference's (UnicodeDecodeError)); strictOnly reports
//     (JSONDecodeError);
//   - a float literal that overflows float64, such as 1e999, which Python
//     reads as an infinity: strictOnly reports "Non-finite JSON number";
//     in a record the reference fails later, with (ValueError), when it
//     re-serializes the records to collect artifact references;
//   - a UTF-8-encoded surrogate, which Python decodes (it decodes with
//     "surrogatepass") into a lone surrogate: strictOnly reports
//     (UnicodeDecodeError); in a record the reference fails later, with
//     (UnicodeEncodeError), like for a lone surrogate escape.
//
// Nesting deeper than maxJSONDepth fails with (RecursionError); CPython
// fails near its recursion limit of 1000, at a depth that depends on its
// call stack.
//
// The parser keeps number literals, so integer checks are exact (`1`
// passes where `1.0` and `true` fail, REFERENCE §12.16), and builds a flat
// node list that is reused from line to line.

// maxJSONDepth bounds the nesting of arrays and objects.
const maxJSONDepth = 1000

// maxIntDigits is CPython's default int_max_str_digits: json.loads raises
// ValueError on an integer literal with more digits.
const maxIntDigits = 4300

// The strict loader's own messages.
const (
	msgDuplicateKey = "Duplicate JSON key"
	msgNonFinite    = "Non-finite JSON number"
)

// jsonKind is the type of a parsed JSON value.
type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonFalse
	jsonTrue
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// Node flags.
const (
	// flagEscaped: the string contains a backslash escape.
	flagEscaped uint8 = 1 << iota
	// flagSurrogate: the string contains a lone surrogate escape.
	flagSurrogate
	// flagInt: the number literal has no fraction and no exponent.
	flagInt
)

// jsonNode is one value. Nodes are stored in document order; a
// container's members follow it (objects alternate key and value nodes)
// and its subtree ends at next.
//
// A node is 16 bytes, 32-bit offsets and indexes (parse refuses a source
// of maxSource bytes or more): a document of single-digit values (two
// source bytes each) holds 8 bytes of nodes per source byte.
type jsonNode struct {
	// start and end delimit the value in the source: the bytes between the
	// quotes of a string, the literal of a number, the brackets (end is the
	// index of the closing one) of a container.
	start, end int32
	// next is the index of the first node after this value's subtree.
	next  int32
	kind  jsonKind
	flags uint8
}

// maxSource bounds what parse reads: offsets and node indexes fit int32.
const maxSource = math.MaxInt32

// maxNodes is the most nodes a source of n bytes can hold: every node but
// one takes at least two bytes (a value and its separator or bracket).
func maxNodes(n int) int { return n/2 + 1 }

// reserveNodes makes room for the nodes a source of n bytes is likely to
// need (one per 16 bytes; records and manifests need far fewer).
func (d *jsonDoc) reserveNodes(n int) {
	if want := min(max(n/16, 64), maxNodes(n)); cap(d.nodes) < want {
		d.nodes = make([]jsonNode, 0, want)
	}
}

// push appends n to d.nodes, doubling the slice when it is full but never
// beyond maxNodes of the source. (append grows a large slice by a quarter
// at a time, allocating about five times the final size along the way.)
// From reserveNodes' start, a source of single-digit values allocates
// at most 16 bytes of nodes per source byte in all, 8 of them kept.
func (d *jsonDoc) push(n jsonNode) {
	if len(d.nodes) == cap(d.nodes) {
		limit := maxNodes(len(d.src))
		c := 2 * cap(d.nodes)
		if 2*c > limit { // the next doubling would pass the limit: go there now
			c = limit
		}
		grown := make([]jsonNode, len(d.nodes), max(c, len(d.nodes)+1))
		copy(grown, d.nodes)
		d.nodes = grown
	}
	d.nodes = append(d.nodes, n)
}

// jsonError is a parse failure: the rejection message and where it was
// found (never the content).
type jsonError struct {
	msg string
	why string
	off int
}

// jsonDoc is a parsed JSON text. The zero value is ready to use; parse
// reuses its memory.
type jsonDoc struct {
	// src is the decoded text: the input, without its BOM, or UTF-16/32
	// input decoded into own (as WTF-8: lone surrogates kept).
	src []byte
	own []byte
	// base is the offset of src in the input (3 after a UTF-8 BOM).
	base int
	// encoding is the encoding detected when it is not plain UTF-8.
	encoding string
	// overflow and rawSurrogate are 1 + the offset in src of the first
	// float literal that overflows float64 and of the first UTF-8-encoded
	// surrogate, or 0.
	overflow, rawSurrogate int

	nodes []jsonNode
	stack []int
	// scratch for key comparison.
	keys       []int
	bufA, bufB []byte
	seen       map[string]struct{}
	// surrogate reports a lone surrogate anywhere in the text: an escape,
	// or a UTF-8-encoded one.
	surrogate bool
	// codeEscape reports a \uXXXX or \/ escape anywhere in the text: the
	// escapes that can spell or hide part of an artifact reference.
	codeEscape bool
}

func genericJSON(class, why string, off int) *jsonError {
	return &jsonError{msg: generic(class), why: why, off: off}
}

func syntaxError(why string, off int) *jsonError {
	return genericJSON(pyJSONDecodeError, why, off)
}

// parse parses src, which must stay unmodified while the document is used.
func (d *jsonDoc) parse(src []byte) *jsonError {
	if len(src) >= maxSource {
		return genericJSON(pyValueError, "document too large", 0)
	}
	d.surrogate = false
	d.codeEscape = false
	d.overflow, d.rawSurrogate = 0, 0
	text, e := d.decode(src)
	if e != nil {
		return e
	}
	if len(text) >= maxSource {
		return genericJSON(pyValueError, "document too large", 0)
	}
	d.src = text
	d.nodes = d.nodes[:0]
	d.reserveNodes(len(text))
	d.stack = d.stack[:0]
	// UTF-8 is validated string by string as they are scanned (a byte
	// above 0x7f anywhere else is a syntax error). Python decodes the
	// whole text before parsing, so on any error the whole text is checked
	// first.
	if e := d.parseValues(); e != nil {
		if k := invalidWTF8At(text); k < len(text) {
			return genericJSON(pyUnicodeDecodeError, "invalid UTF-8", d.base+k)
		}
		e.off += d.base
		e.why += d.decodedNote()
		return e
	}
	return nil
}

// decodedNote says, after an offset, that it counts bytes of the UTF-8
// text decoded from UTF-16/32 input ("" for UTF-8 input).
func (d *jsonDoc) decodedNote() string {
	if d.encoding == "" || d.encoding == "utf-8-sig" {
		return ""
	}
	return " (in the text decoded from " + d.encoding + ")"
}

// strictOnly is hxd's rejection of a text that json.loads accepts (see
// above), or nil: a BOM or UTF-16/32 text first, then the first float
// literal that overflows or UTF-8-encoded surrogate.
func (d *jsonDoc) strictOnly() *jsonError {
	switch d.encoding {
	case "":
	case "utf-8-sig":
		return syntaxError("byte order mark (hxd reads plain UTF-8 only)", 0)
	default:
		return syntaxError(d.encoding+" text (hxd reads plain UTF-8 only)", 0)
	}
	if d.overflow > 0 && (d.rawSurrogate == 0 || d.overflow < d.rawSurrogate) {
		return &jsonError{msg: msgNonFinite, why: "float literal overflows float64", off: d.base + d.overflow - 1}
	}
	if d.rawSurrogate > 0 {
		return genericJSON(pyUnicodeDecodeError, "UTF-8-encoded surrogate (hxd reads strict UTF-8 only)", d.base+d.rawSurrogate-1)
	}
	return nil
}

// root is the top-level value of a parsed document.
func (d *jsonDoc) root() jv { return jv{d: d, i: 0} }

// decode applies json.loads' decoding of bytes: detect_encoding, then
// decode with "surrogatepass". Plain UTF-8 is returned as is (validated
// while parsing), UTF-8 with a BOM without it, UTF-16 and UTF-32 decoded
// into d.own.
func (d *jsonDoc) decode(b []byte) ([]byte, *jsonError) {
	d.base, d.encoding = 0, ""
	enc := detectEncoding(b)
	switch enc {
	case "utf-8":
		return b, nil
	case "utf-8-sig":
		d.base, d.encoding = 3, enc
		return b[3:], nil
	}
	d.encoding = enc
	out, ok := decodeWide(d.own[:0], enc, b)
	if !ok {
		return nil, genericJSON(pyUnicodeDecodeError, "invalid "+enc+" text", 0)
	}
	d.own = out
	return out, nil
}

// detectEncoding is json.detect_encoding.
func detectEncoding(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte{0, 0, 0xfe, 0xff}), bytes.HasPrefix(b, []byte{0xff, 0xfe, 0, 0}):
		return "utf-32"
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}), bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		return "utf-16"
	case bytes.HasPrefix(b, []byte{0xef, 0xbb, 0xbf}):
		return "utf-8-sig"
	}
	if len(b) >= 4 {
		if b[0] == 0 {
			if b[1] != 0 {
				return "utf-16-be"
			}
			return "utf-32-be"
		}
		if b[1] == 0 {
			if b[2] != 0 || b[3] != 0 {
				return "utf-16-le"
			}
			return "utf-32-le"
		}
	} else if len(b) == 2 {
		if b[0] == 0 {
			return "utf-16-be"
		}
		if b[1] == 0 {
			return "utf-16-le"
		}
	}
	return "utf-8"
}

// decodeWide decodes UTF-16 or UTF-32 text as Python's codec with the
// "surrogatepass" error handler does, appending it to dst as WTF-8. The
// "utf-16" and "utf-32" codecs take the byte order from the BOM and drop
// it. A truncated code unit or a UTF-32 value above U+10FFFF does not
// decode; lone surrogates do (a UTF-16 pair is one character, UTF-32
// surrogates stay lone).
func decodeWide(dst []byte, enc string, b []byte) ([]byte, bool) {
	unit := 2
	if strings.HasPrefix(enc, "utf-32") {
		unit = 4
	}
	if len(b)%unit != 0 {
		return dst, false
	}
	var order binary.ByteOrder = binary.LittleEndian
	switch enc {
	case "utf-16-be", "utf-32-be":
		order = binary.BigEndian
	case "utf-16", "utf-32":
		if b[0] == 0 || b[0] == 0xfe {
			order = binary.BigEndian
		}
		b = b[unit:]
	}
	dst = slices.Grow(dst, len(b)/unit*3)
	if unit == 4 {
		for i := 0; i < len(b); i += 4 {
			r := order.Uint32(b[i:])
			if r > utf8.MaxRune {
				return dst, false
			}
			dst = appendWTF8(dst, rune(r))
		}
		return dst, true
	}
	for i := 0; i < len(b); i += 2 {
		r := rune(order.Uint16(b[i:]))
		if 0xd800 <= r && r < 0xdc00 && i+4 <= len(b) {
			if r2 := rune(order.Uint16(b[i+2:])); 0xdc00 <= r2 && r2 < 0xe000 {
				r = 0x10000 + (r-0xd800)<<10 + (r2 - 0xdc00)
				i += 2
			}
		}
		dst = appendWTF8(dst, r)
	}
	return dst, true
}

// invalidWTF8At is the offset of the first byte of b that Python's UTF-8
// decoder with "surrogatepass" refuses (UTF-8, surrogates allowed), or
// len(b).
func invalidWTF8At(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		n := validUTF8At(b, i)
		if n == 0 {
			return i
		}
		i += n
	}
	return len(b)
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseValues is the scanner: it reads one value at a time and keeps the
// open containers on a stack.
func (d *jsonDoc) parseValues() *jsonError {
	src := d.src
	i := skipWS(src, 0)
	var e *jsonError
	for {
		// A value starts at i.
		if i >= len(src) {
			return syntaxError("expecting value", i)
		}
		closed := true
		switch c := src[i]; c {
		case '{', '[':
			if len(d.stack) >= maxJSONDepth {
				return genericJSON(pyRecursionError, "nested too deeply", i)
			}
			kind := jsonArray
			if c == '{' {
				kind = jsonObject
			}
			d.stack = append(d.stack, len(d.nodes))
			d.push(jsonNode{start: int32(i), kind: kind})
			i = skipWS(src, i+1)
			if kind == jsonObject {
				if i < len(src) && src[i] == '}' {
					if e = d.closeContainer(i); e != nil {
						return e
					}
					i++
					break
				}
				if i, e = d.key(i); e != nil {
					return e
				}
				closed = false
				break
			}
			if i < len(src) && src[i] == ']' {
				if e = d.closeContainer(i); e != nil {
					return e
				}
				i++
				break
			}
			closed = false
		case '"':
			if i, e = d.str(i); e != nil {
				return e
			}
		case 'n':
			if i, e = d.literal(i, "null", jsonNull); e != nil {
				return e
			}
		case 't':
			if i, e = d.literal(i, "true", jsonTrue); e != nil {
				return e
			}
		case 'f':
			if i, e = d.literal(i, "false", jsonFalse); e != nil {
				return e
			}
		case 'N':
			if bytes.HasPrefix(src[i:], []byte("NaN")) {
				return &jsonError{msg: msgNonFinite, why: "NaN literal", off: i}
			}
			return syntaxError("expecting value", i)
		case 'I':
			if bytes.HasPrefix(src[i:], []byte("Infinity")) {
				return &jsonError{msg: msgNonFinite, why: "Infinity literal", off: i}
			}
			return syntaxError("expecting value", i)
		default:
			if c == '-' && bytes.HasPrefix(src[i+1:], []byte("Infinity")) {
				return &jsonError{msg: msgNonFinite, why: "-Infinity literal", off: i}
			}
			if i, e = d.number(i); e != nil {
				return e
			}
		}
		if !closed {
			continue // a container was opened: its first value is next
		}
		// A value ended at i: continue the enclosing container.
		for {
			if len(d.stack) == 0 {
				i = skipWS(src, i)
				if i != len(src) {
					return syntaxError("extra data", i)
				}
				return nil
			}
			top := d.stack[len(d.stack)-1]
			i = skipWS(src, i)
			if i >= len(src) {
				return syntaxError("unterminated container", i)
			}
			c := src[i]
			if d.nodes[top].kind == jsonObject {
				if c == '}' {
					if e = d.closeContainer(i); e != nil {
						return e
					}
					i++
					continue
				}
				if c != ',' {
					return syntaxError("expecting ',' delimiter", i)
				}
				if i, e = d.key(skipWS(src, i+1)); e != nil {
					return e
				}
				break
			}
			if c == ']' {
				if e = d.closeContainer(i); e != nil {
					return e
				}
				i++
				continue
			}
			if c != ',' {
				return syntaxError("expecting ',' delimiter", i)
			}
			i = skipWS(src, i+1)
			break
		}
	}
}

// key parses an object key and the colon after it, returning the index of
// the value.
func (d *jsonDoc) key(i int) (int, *jsonError) {
	src := d.src
	if i >= len(src) || src[i] != '"' {
		return i, syntaxError("expecting property name enclosed in double quotes", i)
	}
	i, e := d.str(i)
	if e != nil {
		return i, e
	}
	i = skipWS(src, i)
	if i >= len(src) || src[i] != ':' {
		return i, syntaxError("expecting ':' delimiter", i)
	}
	return skipWS(src, i+1), nil
}

func (d *jsonDoc) literal(i int, lit string, kind jsonKind) (int, *jsonError) {
	if !bytes.HasPrefix(d.src[i:], []byte(lit)) {
		return i, syntaxError("expecting value", i)
	}
	d.push(jsonNode{start: int32(i), end: int32(i + len(lit)), next: int32(len(d.nodes) + 1), kind: kind})
	return i + len(lit), nil
}

// number scans a number literal like CPython's _match_number_unicode: an
// incomplete fraction or exponent is left for the caller to reject.
func (d *jsonDoc) number(i int) (int, *jsonError) {
	src := d.src
	start := i
	if src[i] == '-' {
		i++
	}
	if i >= len(src) || !isDigit(src[i]) {
		return start, syntaxError("expecting value", start)
	}
	if src[i] == '0' {
		i++
	} else {
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	intEnd := i
	isInt := true
	if i+1 < len(src) && src[i] == '.' && isDigit(src[i+1]) {
		isInt = false
		i += 2
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i+1 < len(src) && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if src[j] == '+' || src[j] == '-' {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			isInt = false
			i = j
		}
	}
	var flags uint8
	if isInt {
		flags = flagInt
		digits := intEnd - start
		if src[start] == '-' {
			digits--
		}
		if digits > maxIntDigits {
			return start, genericJSON(pyValueError, "integer literal longer than 4300 digits", start)
		}
	} else if d.overflow == 0 && floatOverflows(src[start:i]) {
		d.overflow = start + 1 // Python reads an infinity
	}
	d.push(jsonNode{start: int32(start), end: int32(i), next: int32(len(d.nodes) + 1), kind: jsonNumber, flags: flags})
	return i, nil
}

// floatOverflows reports whether a float literal rounds to an infinity.
// Literals whose decimal exponent is clearly in range skip the parse.
func floatOverflows(lit []byte) bool {
	mant, exp := lit, 0
	if k := bytes.IndexAny(lit, "eE"); k >= 0 {
		mant = lit[:k]
		e := lit[k+1:]
		if len(e) > 0 && (e[0] == '+' || e[0] == '-') {
			e = e[1:]
		}
		if len(e) > 6 {
			return parseFloatOverflows(lit)
		}
		n, _ := strconv.Atoi(string(e))
		if lit[k+1] == '-' {
			n = -n
		}
		exp = n
	}
	// Integer digits of the mantissa, without leading zeros.
	intPart := mant
	if intPart[0] == '-' {
		intPart = intPart[1:]
	}
	if k := bytes.IndexByte(intPart, '.'); k >= 0 {
		intPart = intPart[:k]
	}
	intPart = bytes.TrimLeft(intPart, "0")
	if len(intPart)+exp < 300 {
		return false
	}
	return parseFloatOverflows(lit)
}

func parseFloatOverflows(lit []byte) bool {
	_, err := strconv.ParseFloat(string(lit), 64)
	return err != nil // syntax is already valid: the error is ErrRange (overflow)
}

// str scans a string starting at the quote at i and appends its node.
// It stops at every byte that needs a look: a quote, a backslash, a
// control character (< 0x20) or a byte above 0x7f, found eight bytes at a
// time with an exact mask (stopMask), so that the stops within one word
// are visited without reloading it. UTF-8 is validated where it occurs,
// one sequence at a time, so that a string is read once.
func (d *jsonDoc) str(i int) (int, *jsonError) {
	src := d.src
	start := i + 1
	j := start // the next byte to look at
	w := j     // m holds the stops of the eight bytes from w at or after j
	m := stopMask(load8(src, w))
	var flags uint8
	for {
		for m == 0 {
			w += 8
			if w >= len(src) {
				return i, syntaxError("unterminated string", i)
			}
			m = stopMask(load8(src, w))
		}
		j = w + bits.TrailingZeros64(m)>>3
		c := src[j]
		var c1 byte
		if j+1 < len(src) {
			c1 = src[j+1]
		}
		switch {
		case c == '\\' && escapeKind[c1] == escapeByte: // the common escapes first
			flags |= flagEscaped
			j += 2
		case c >= 0xc2 && c < 0xe0 && c1&0xc0 == 0x80: // a two-byte sequence
			j += 2
		case c == '"':
			d.push(jsonNode{start: int32(start), end: int32(j), next: int32(len(d.nodes) + 1), kind: jsonString, flags: flags})
			return j + 1, nil
		case c < 0x20:
			return i, syntaxError("invalid control character in string", j)
		case c >= 0x80:
			// A multi-byte sequence: its continuation bytes are never a
			// quote, so it lies inside the string.
			n := validUTF8At(src, j)
			if n == 0 {
				// parse reports the first invalid byte of the text.
				return i, genericJSON(pyUnicodeDecodeError, "invalid UTF-8", j)
			}
			if c == 0xed && src[j+1] >= 0xa0 { // a surrogate, which Python decodes
				flags |= flagSurrogate
				d.surrogate = true
				if d.rawSurrogate == 0 {
					d.rawSurrogate = j + 1
				}
			}
			j += n
		default: // another backslash escape
			flags |= flagEscaped
			if j+1 >= len(src) {
				return i, syntaxError("unterminated string", i)
			}
			switch escapeKind[c1] {
			case escapeSlash:
				d.codeEscape = true
				j += 2
			case escapeCode:
				var e *jsonError
				if j, e = d.codeEscapeAt(j); e != nil {
					return i, e
				}
				if j < 0 {
					j = -j
					flags |= flagSurrogate
				}
			default:
				return i, syntaxError("invalid \\escape", j)
			}
		}
		if j < w+8 {
			m &= ^uint64(0) << (uint(j-w) * 8)
		} else {
			w = j
			m = stopMask(load8(src, w))
		}
	}
}

// codeEscapeAt checks the \uXXXX escape (and the low surrogate escape
// that may follow it) at k and returns the index after it, negated if it
// is a lone surrogate.
func (d *jsonDoc) codeEscapeAt(k int) (int, *jsonError) {
	src := d.src
	d.codeEscape = true
	// CPython requires one more character after the four digits.
	if k+6 >= len(src) {
		return 0, syntaxError("invalid \\uXXXX escape", k)
	}
	r, ok := hex4(src[k+2 : k+6])
	if !ok {
		return 0, syntaxError("invalid \\uXXXX escape", k)
	}
	j := k + 6
	if 0xd800 <= r && r < 0xdc00 && j+6 < len(src) && src[j] == '\\' && src[j+1] == 'u' {
		r2, ok := hex4(src[j+2 : j+6])
		if !ok {
			return 0, syntaxError("invalid \\uXXXX escape", j)
		}
		if 0xdc00 <= r2 && r2 < 0xe000 {
			return j + 6, nil
		}
	}
	if 0xd800 <= r && r < 0xe000 {
		d.surrogate = true
		return -j, nil
	}
	return j, nil
}

// validUTF8At returns the length of the valid UTF-8 sequence starting
// with the non-ASCII byte at b[j], or 0 if there is none (what
// utf8.DecodeRune reports as an error of size 1), except that a surrogate
// (ED A0..BF xx) counts as valid, as Python's "surrogatepass" decodes it.
func validUTF8At(b []byte, j int) int {
	c := b[j]
	switch {
	case c < 0xc2:
		return 0
	case c < 0xe0:
		if j+1 < len(b) && b[j+1]&0xc0 == 0x80 {
			return 2
		}
		return 0
	case c < 0xf0:
		if j+2 >= len(b) {
			return 0
		}
		lo := byte(0x80)
		if c == 0xe0 {
			lo = 0xa0
		}
		if c1 := b[j+1]; lo <= c1 && c1 <= 0xbf && b[j+2]&0xc0 == 0x80 {
			return 3
		}
		return 0
	}
	if r, size := utf8.DecodeRune(b[j:]); r != utf8.RuneError || size > 1 {
		return size
	}
	return 0
}

// load8 reads the eight bytes of b from i, little-endian; past the end of
// b it reads spaces (never a stop).
func load8(b []byte, i int) uint64 {
	if i+8 <= len(b) {
		return binary.LittleEndian.Uint64(b[i:])
	}
	var w [8]byte
	copy(w[:], b[i:])
	for k := max(len(b)-i, 0); k < 8; k++ {
		w[k] = ' '
	}
	return binary.LittleEndian.Uint64(w[:])
}

// stopMask flags the bytes of x (little-endian) where str must stop: a
// quote, a backslash, a control character or a byte above 0x7f. The mask
// is exact: the additions on the low seven bits of each byte never carry
// into the next byte.
func stopMask(x uint64) uint64 {
	lo := x &^ swarHighs
	notCtrl := lo + swarOnes*(0x80-0x20)       // high bit: lo >= 0x20
	notQuote := (lo ^ swarOnes*'"') + swarLows // high bit: lo != '"'
	notBack := (lo ^ swarOnes*'\\') + swarLows // high bit: lo != '\\'
	return (x | ^(notCtrl & notQuote & notBack)) & swarHighs
}

// The escapes after a backslash.
const (
	escapeInvalid = iota
	escapeByte    // \" \\ \b \f \n \r \t
	escapeSlash   // \/
	escapeCode    // \uXXXX
)

var escapeKind = func() (t [256]uint8) {
	for _, c := range []byte(`"\\bfnrt`) {
		t[c] = escapeByte
	}
	t['/'] = escapeSlash
	t['u'] = escapeCode
	return t
}()

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// SWAR constants for stopMask.
const (
	swarOnes  = 0x0101010101010101
	swarLows  = 0x7f7f7f7f7f7f7f7f
	swarHighs = 0x8080808080808080
)

// closeContainer closes the innermost container at the bracket at end.
// Closing an object runs the duplicate-key check, as Python's
// object_pairs_hook does.
func (d *jsonDoc) closeContainer(end int) *jsonError {
	top := d.stack[len(d.stack)-1]
	d.stack = d.stack[:len(d.stack)-1]
	n := &d.nodes[top]
	n.end = int32(end)
	n.next = int32(len(d.nodes))
	if n.kind == jsonObject && d.hasDuplicateKey(top) {
		return &jsonError{msg: msgDuplicateKey, why: "object has a repeated key", off: int(n.start)}
	}
	return nil
}

func (d *jsonDoc) hasDuplicateKey(obj int) bool {
	d.keys = d.keys[:0]
	for j := obj + 1; j < int(d.nodes[obj].next); j = int(d.nodes[j+1].next) {
		d.keys = append(d.keys, j)
	}
	if len(d.keys) < 2 {
		return false
	}
	// Keys without escapes in strictly increasing byte order (canonical
	// JSON sorts them) are distinct.
	sorted := true
	for a := 1; a < len(d.keys) && sorted; a++ {
		na, nb := &d.nodes[d.keys[a-1]], &d.nodes[d.keys[a]]
		sorted = (na.flags|nb.flags)&flagEscaped == 0 &&
			bytes.Compare(d.src[na.start:na.end], d.src[nb.start:nb.end]) < 0
	}
	if sorted {
		return false
	}
	if len(d.keys) <= 16 {
		for a := 1; a < len(d.keys); a++ {
			for b := 0; b < a; b++ {
				if d.keyEqual(d.keys[a], d.keys[b]) {
					return true
				}
			}
		}
		return false
	}
	if d.seen == nil {
		d.seen = make(map[string]struct{}, len(d.keys))
	}
	clear(d.seen)
	for _, k := range d.keys {
		d.bufA = d.appendString(d.bufA[:0], k)
		if _, dup := d.seen[string(d.bufA)]; dup {
			return true
		}
		d.seen[string(d.bufA)] = struct{}{}
	}
	return false
}

func (d *jsonDoc) keyEqual(a, b int) bool {
	na, nb := &d.nodes[a], &d.nodes[b]
	if (na.flags|nb.flags)&flagEscaped == 0 {
		return bytes.Equal(d.src[na.start:na.end], d.src[nb.start:nb.end])
	}
	d.bufA = d.appendString(d.bufA[:0], a)
	d.bufB = d.appendString(d.bufB[:0], b)
	return bytes.Equal(d.bufA, d.bufB)
}

// appendString appends the decoded content of string node i. Lone
// surrogates are encoded like UTF-8 would encode them (WTF-8), so that
// decoded strings compare as Python's str values do.
func (d *jsonDoc) appendString(dst []byte, i int) []byte {
	n := &d.nodes[i]
	raw := d.src[n.start:n.end]
	if n.flags&flagEscaped == 0 {
		return append(dst, raw...)
	}
	for len(raw) > 0 {
		k := bytes.IndexByte(raw, '\\')
		if k < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:k]...)
		raw = raw[k:]
		switch c := raw[1]; c {
		case 'u':
			r, _ := hex4(raw[2:6])
			size := 6
			if 0xd800 <= r && r < 0xdc00 && len(raw) >= 12 && raw[6] == '\\' && raw[7] == 'u' {
				if r2, _ := hex4(raw[8:12]); 0xdc00 <= r2 && r2 < 0xe000 {
					r = 0x10000 + (r-0xd800)<<10 + (r2 - 0xdc00)
					size = 12
				}
			}
			dst = appendWTF8(dst, r)
			raw = raw[size:]
		default:
			dst = append(dst, unescapeByte(c))
			raw = raw[2:]
		}
	}
	return dst
}

func unescapeByte(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return c // '"', '\\', '/'
}

// appendWTF8 appends r as UTF-8, surrogates included.
func appendWTF8(dst []byte, r rune) []byte {
	if 0xd800 <= r && r < 0xe000 {
		return append(dst, byte(0xe0|r>>12), byte(0x80|(r>>6)&0x3f), byte(0x80|r&0x3f))
	}
	return utf8.AppendRune(dst, r)
}

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
