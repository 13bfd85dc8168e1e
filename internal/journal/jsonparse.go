package journal

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// jkind is the kind of a parsed JSON value.
type jkind uint8

const (
	jNull jkind = iota
	jFalse
	jTrue
	jInt
	jFloat
	jString
	jArray
	jObject
)

// jnode is one value of a parsed JSON text. Nodes are stored in pre-order;
// a container's children follow it and end at next.
type jnode struct {
	// start and end delimit the literal in src: for strings the bytes
	// between the quotes (still escaped), for numbers the literal, for
	// containers the offsets of the opening and closing bracket.
	start, end int32
	// next is the index of the first node after this value's subtree.
	next int32
	// aux and aux2 depend on kind. Object: offset and count of its members
	// (key node indices, sorted by key) in parser.members. String with
	// escapes used as a key: its decoded bytes are arena[aux:aux2]. Float:
	// aux is the index of its value in parser.floats.
	aux, aux2 int32
	kind      jkind
	// esc reports that a string contains at least one backslash escape.
	esc bool
	// key marks a string that is an object key.
	key bool
	// recode reports that a string with escapes holds one whose canonical
	// form differs from its source text (\/ or \u); without it the
	// source text between the quotes is already canonical.
	recode bool
}

// frame is an open container during parsing.
type frame struct {
	node int32 // index of the container node
	base int32 // objects: length of parser.pending when it was opened
}

// parser turns one JSON text into a flat node list. Parsers are pooled;
// every slice is reused across calls.
type parser struct {
	src []byte
	// lenient accepts what Python's json.loads accepts but json.dumps (or
	// UTF-8 encoding of its result) rejects: lone surrogate escapes and
	// float literals that overflow to ±Inf. Equal parses leniently,
	// AppendCanonical strictly.
	lenient bool
	// maxDepth bounds the nesting of containers (MaxDepth less the
	// containers the text sits in).
	maxDepth int

	nodes   []jnode
	members []int32
	floats  []float64
	arena   []byte
	stack   []frame
	pending []int32
	scratch []byte
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// maxPooledNodes keeps parsers that decoded a huge document out of the pool.
const maxPooledNodes = 1 << 20

func getParser(src []byte, lenient bool) *parser {
	p := parserPool.Get().(*parser)
	p.src = src
	p.lenient = lenient
	p.reset(MaxDepth)
	return p
}

// reset prepares p for parsing p.src with at most maxDepth nested
// containers.
func (p *parser) reset(maxDepth int) {
	p.maxDepth = maxDepth
	p.nodes = p.nodes[:0]
	p.members = p.members[:0]
	p.floats = p.floats[:0]
	p.arena = p.arena[:0]
	p.stack = p.stack[:0]
	p.pending = p.pending[:0]
	p.scratch = p.scratch[:0]
}

func putParser(p *parser) {
	p.src = nil
	if cap(p.nodes) > maxPooledNodes || cap(p.arena) > maxPooledNodes*8 || cap(p.scratch) > maxPooledNodes*8 {
		return
	}
	parserPool.Put(p)
}

// isWS reports JSON whitespace (the only whitespace Python's json accepts).
func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *parser) skipWS(i int) int {
	for i < len(p.src) && isWS(p.src[i]) {
		i++
	}
	return i
}

func (p *parser) syntaxErr(what string, at int) error {
	if at >= len(p.src) {
		return fmt.Errorf("%w: %s at end of input (offset %d)", ErrInvalidJSON, what, len(p.src))
	}
	return fmt.Errorf("%w: %s at offset %d", ErrInvalidJSON, what, at)
}

func (p *parser) push(n jnode) int32 {
	p.nodes = append(p.nodes, n)
	return int32(len(p.nodes) - 1)
}

// parse parses p.src as exactly one JSON value surrounded by optional
// whitespace. It is iterative; nesting is bounded by MaxDepth.
func (p *parser) parse() error {
	if len(p.src) > math.MaxInt32-8 {
		return fmt.Errorf("%w: input of %d bytes is too large", ErrInvalidJSON, len(p.src))
	}
	src := p.src
	i := p.skipWS(0)
	for {
		// A value starts at i.
		if i >= len(src) {
			return p.syntaxErr("expected a value", i)
		}
		var err error
		switch c := src[i]; {
		case c == '{' || c == '[':
			if len(p.stack) >= p.maxDepth {
				return fmt.Errorf("%w: more than %d nested containers at offset %d", ErrTooDeep, MaxDepth, i)
			}
			k := jArray
			if c == '{' {
				k = jObject
			}
			idx := p.push(jnode{kind: k, start: int32(i)})
			p.stack = append(p.stack, frame{node: idx, base: int32(len(p.pending))})
			i = p.skipWS(i + 1)
			if i < len(src) && (src[i] == '}' && k == jObject || src[i] == ']' && k == jArray) {
				// Empty container: closed below as a completed value.
				break
			}
			if k == jObject {
				if i, err = p.key(i); err != nil {
					return err
				}
			}
			continue // parse the first element or member value
		case c == '"':
			if i, err = p.str(i); err != nil {
				return err
			}
		case c == '-' || c >= '0' && c <= '9':
			if i, err = p.number(i); err != nil {
				return err
			}
		case c == 't':
			if i, err = p.literal(i, "true", jTrue); err != nil {
				return err
			}
		case c == 'f':
			if i, err = p.literal(i, "false", jFalse); err != nil {
				return err
			}
		case c == 'n':
			if i, err = p.literal(i, "null", jNull); err != nil {
				return err
			}
		default:
			return p.syntaxErr(fmt.Sprintf("unexpected %s, expected a value", describe(src, i)), i)
		}

		// A value just ended (or an empty container is about to close):
		// close containers until one wants another element.
		for {
			i = p.skipWS(i)
			if len(p.stack) == 0 {
				if i != len(src) {
					return p.syntaxErr(fmt.Sprintf("unexpected %s after the top-level value", describe(src, i)), i)
				}
				return nil
			}
			top := p.stack[len(p.stack)-1]
			n := &p.nodes[top.node]
			if i >= len(src) {
				return p.syntaxErr("unterminated container", i)
			}
			c := src[i]
			if c == ',' {
				i = p.skipWS(i + 1)
				if n.kind == jObject {
					if i, err = p.key(i); err != nil {
						return err
					}
				}
				break // parse the next value
			}
			if n.kind == jArray && c == ']' || n.kind == jObject && c == '}' {
				n.end = int32(i)
				n.next = int32(len(p.nodes))
				if n.kind == jObject {
					if err := p.closeObject(top); err != nil {
						return err
					}
				}
				p.stack = p.stack[:len(p.stack)-1]
				i++
				continue
			}
			want := "',' or ']'"
			if n.kind == jObject {
				want = "',' or '}'"
			}
			return p.syntaxErr(fmt.Sprintf("unexpected %s, expected %s", describe(src, i), want), i)
		}
	}
}

// describe names the byte at i for an error message.
func describe(src []byte, i int) string {
	if i >= len(src) {
		return "end of input"
	}
	c := src[i]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// key parses an object key at i followed by ':' and returns the offset
// of the member's value.
func (p *parser) key(i int) (int, error) {
	if i >= len(p.src) || p.src[i] != '"' {
		return i, p.syntaxErr(fmt.Sprintf("unexpected %s, expected a string key", describe(p.src, i)), i)
	}
	j, err := p.str(i)
	if err != nil {
		return j, err
	}
	k := int32(len(p.nodes) - 1)
	n := &p.nodes[k]
	n.key = true
	if n.esc {
		start := len(p.arena)
		p.arena = appendDecoded(p.arena, p.src[n.start:n.end])
		n.aux, n.aux2 = int32(start), int32(len(p.arena))
	}
	p.pending = append(p.pending, k)
	j = p.skipWS(j)
	if j >= len(p.src) || p.src[j] != ':' {
		return j, p.syntaxErr(fmt.Sprintf("unexpected %s, expected ':'", describe(p.src, j)), j)
	}
	return p.skipWS(j + 1), nil
}

// keyBytes returns the decoded bytes of key node k.
func (p *parser) keyBytes(k int32) []byte {
	n := &p.nodes[k]
	if n.esc {
		return p.arena[n.aux:n.aux2]
	}
	return p.src[n.start:n.end]
}

// closeObject sorts the members of the object in frame f by key and
// rejects duplicates.
func (p *parser) closeObject(f frame) error {
	ms := p.pending[f.base:]
	sorted := true
	for j := 1; j < len(ms); j++ {
		if bytes.Compare(p.keyBytes(ms[j-1]), p.keyBytes(ms[j])) >= 0 {
			sorted = false
			break
		}
	}
	if !sorted {
		slices.SortStableFunc(ms, func(a, b int32) int { return bytes.Compare(p.keyBytes(a), p.keyBytes(b)) })
		for j := 1; j < len(ms); j++ {
			if bytes.Equal(p.keyBytes(ms[j-1]), p.keyBytes(ms[j])) {
				// ms[j] is the later occurrence (stable sort).
				return fmt.Errorf("%w: %s at offset %d", ErrDuplicateKey, quoteKey(p.keyBytes(ms[j])), p.nodes[ms[j]].start-1)
			}
		}
	}
	n := &p.nodes[f.node]
	n.aux = int32(len(p.members))
	n.aux2 = int32(len(ms))
	p.members = append(p.members, ms...)
	p.pending = p.pending[:f.base]
	return nil
}

// quoteKey renders a key for an error message, shortened.
func quoteKey(k []byte) string {
	const max = 64
	if len(k) > max {
		return strconv.Quote(string(k[:max])) + "..."
	}
	return strconv.Quote(string(k))
}

func (p *parser) literal(i int, lit string, k jkind) (int, error) {
	if !bytes.HasPrefix(p.src[i:], []byte(lit)) {
		return i, p.syntaxErr("invalid literal", i)
	}
	p.push(jnode{kind: k, start: int32(i), end: int32(i + len(lit)), next: int32(len(p.nodes) + 1)})
	return i + len(lit), nil
}

// number parses a JSON number at i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
// A literal with a fraction or exponent is a float (as in Python's json).
func (p *parser) number(i int) (int, error) {
	src := p.src
	start := i
	if src[i] == '-' {
		i++
	}
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && src[i] >= '1' && src[i] <= '9':
		i++
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	default:
		return i, p.syntaxErr(fmt.Sprintf("unexpected %s in number", describe(src, i)), i)
	}
	isFloat := false
	if i < len(src) && src[i] == '.' {
		i++
		d := i
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i == d {
			return i, p.syntaxErr("expected a digit after the decimal point", i)
		}
		isFloat = true
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		d := i
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i == d {
			return i, p.syntaxErr("expected a digit in the exponent", i)
		}
		isFloat = true
	}
	n := jnode{kind: jInt, start: int32(start), end: int32(i), next: int32(len(p.nodes) + 1)}
	if isFloat {
		f, err := strconv.ParseFloat(string(src[start:i]), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return i, p.syntaxErr("invalid number", start) // unreachable: the grammar was checked
		}
		if math.IsInf(f, 0) && !p.lenient {
			return i, fmt.Errorf("%w: %s overflows float64 at offset %d", ErrNonFinite, shorten(src[start:i]), start)
		}
		n.kind = jFloat
		n.aux = int32(len(p.floats))
		p.floats = append(p.floats, f)
	}
	p.nodes = append(p.nodes, n)
	return i, nil
}

func shorten(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}

// str validates the string starting with the quote at i, appends its
// node and returns the offset after the closing quote. It checks UTF-8,
// rejects raw control characters and bad escapes, and (unless lenient)
// lone surrogate escapes.
func (p *parser) str(i int) (int, error) {
	src := p.src
	start := i + 1
	i = start
	esc, recode := false, false
	for {
		// Fast path over plain ASCII, eight bytes at a time.
		i = skipPlain(src, i)
		if i >= len(src) {
			return i, p.syntaxErr("unterminated string", start-1)
		}
		c := src[i]
		switch {
		case c == '"':
			p.nodes = append(p.nodes, jnode{kind: jString, start: int32(start), end: int32(i), next: int32(len(p.nodes) + 1), esc: esc, recode: recode})
			return i + 1, nil
		case c == '\\':
			esc = true
			if i+1 < len(src) && shortEscape[src[i+1]] {
				i += 2 // \" \\ \b \f \n \r \t: canonical as they stand
				continue
			}
			n, err := p.escape(i)
			if err != nil {
				return i, err
			}
			recode = true // \/ or \u
			i += n
		case c < 0x20:
			return i, p.syntaxErr(fmt.Sprintf("invalid control character 0x%02x in string", c), i)
		default: // c >= 0x80
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, fmt.Errorf("%w: invalid UTF-8 at offset %d", ErrInvalidJSON, i)
			}
			i += size
		}
	}
}

// escape validates the escape sequence at i (src[i] == '\\') and returns
// its length, including a following low-surrogate escape it pairs with.
func (p *parser) escape(i int) (int, error) {
	src := p.src
	if i+1 >= len(src) {
		return 0, p.syntaxErr("unterminated string", i)
	}
	switch src[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
	default:
		return 0, p.syntaxErr(fmt.Sprintf("invalid escape %s", describe(src, i+1)), i)
	}
	r, ok := hex4(src[i+2:])
	if !ok {
		return 0, p.syntaxErr(`invalid \u escape`, i)
	}
	if r < 0xd800 || r > 0xdfff {
		return 6, nil
	}
	if r <= 0xdbff && i+12 <= len(src) && src[i+6] == '\\' && src[i+7] == 'u' {
		if r2, ok := hex4(src[i+8:]); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
			return 12, nil
		}
	}
	if !p.lenient {
		return 0, fmt.Errorf("%w: \\u%04x at offset %d", ErrLoneSurrogate, r, i)
	}
	return 6, nil
}

// hex4 decodes four hex digits (either case) at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// skipPlain returns the offset of the first byte at or after i that is
// not plainASCII (or len(src)).
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

// shortEscape marks the characters that follow a backslash in the escapes
// that canonical JSON writes unchanged.
var shortEscape = [256]bool{'"': true, '\\': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// plainASCII marks bytes that stand for themselves inside a JSON string
// and need no escaping on output: printable ASCII and DEL, except '"' and '\\'.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// decodeEscape decodes the (already validated) escape at raw[0] == '\\'
// and returns the code point and the escape's length. Surrogate pairs are
// combined like Python's json does; a lone surrogate is returned as is.
func decodeEscape(raw []byte) (rune, int) {
	switch raw[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
	default: // '"', '\\', '/'
		return rune(raw[1]), 2
	}
	r, _ := hex4(raw[2:])
	if r >= 0xd800 && r <= 0xdbff && len(raw) >= 12 && raw[6] == '\\' && raw[7] == 'u' {
		if r2, ok := hex4(raw[8:]); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
			return (r-0xd800)<<10 | (r2 - 0xdc00) + 0x10000, 12
		}
	}
	return r, 6
}

// appendDecoded appends the content of the validated string body raw with
// its escapes decoded. Lone surrogates (possible only when parsed
// leniently) are written in generalized UTF-8 (WTF-8), so decoded strings
// compare equal exactly when their code point sequences do, and byte order
// is code point order.
func appendDecoded(dst, raw []byte) []byte {
	for len(raw) > 0 {
		j := bytes.IndexByte(raw, '\\')
		if j < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:j]...)
		r, n := decodeEscape(raw[j:])
		raw = raw[j+n:]
		if r >= 0xd800 && r <= 0xdfff {
			dst = append(dst, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
			continue
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}
