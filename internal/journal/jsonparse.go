package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// hxd's one JSON parser. It turns a text into a flat list of nodes and
// serves canonical output (AppendCanonical, Doc), Python equality (Equal)
// and the bundle verifier (Doc.ParsePython, which reproduces json.loads).
// The three differ only in what they accept and how they report it:
//
//   - modeCanonical (AppendCanonical, CheckCanonical, Doc.Parse): JSON in
//     UTF-8 that has a canonical form: no lone surrogate escape
//     (ErrLoneSurrogate), no float literal that overflows float64
//     (ErrNonFinite), nesting up to MaxDepth;
//   - modeEqual (Equal): also what Python's json.loads reads and
//     json.dumps cannot write: lone surrogate escapes and overflowing
//     float literals (read as infinities);
//   - modePython (Doc.ParsePython): exactly what CPython 3.11's json.loads
//     reads from bytes, failing where it fails and with its error class,
//     in the order its scanner meets them (see ParsePython).
//
// Every mode refuses duplicate object keys (ErrDuplicateKey): hxd never
// writes them, and the reference's strict loader refuses them too.

// parseMode selects what the parser accepts.
type parseMode uint8

const (
	modeCanonical parseMode = iota
	modeEqual
	modePython
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

// Node flags.
const (
	// fEsc: a string holds a backslash escape.
	fEsc uint8 = 1 << iota
	// fRecode: a string holds a \/ or \u escape, so that its canonical
	// form differs from its source text (the other escapes are canonical
	// as they stand).
	fRecode
	// fSurrogate: a string holds a lone surrogate (an escape, or in
	// modePython a UTF-8-encoded one).
	fSurrogate
	// fKey: a string is an object key.
	fKey
	// fUnsorted: an object whose keys are not, without escapes, in
	// strictly increasing byte order; its members in key order are in
	// parser.members (see parser.sorted).
	fUnsorted
)

// jnode is one value of a parsed text. Nodes are stored in document
// order; a container's members follow it (objects alternate key and value
// nodes) and its subtree ends at next.
//
// A node is 16 bytes, with 32-bit offsets and indexes (parse refuses a
// text of maxSource bytes or more): a text of single-digit values (two
// bytes each) holds 8 bytes of nodes per byte.
type jnode struct {
	// start and end delimit the value in the text: the bytes between the
	// quotes of a string, the literal of a number, true, false or null,
	// the brackets (end is the index of the closing one) of a container.
	start, end int32
	// next is the index of the first node after this value's subtree.
	next  int32
	kind  jkind
	flags uint8
}

// frame is an open container.
type frame struct {
	node int32 // its node
	base int32 // objects: len(parser.pending) when it opened
}

// sortedObject locates the members, in key order, of an fUnsorted object.
type sortedObject struct {
	node, off, n int32
}

// parser turns one JSON text into a node list. Parsers are reused (Doc,
// and a pool for the functions): every slice keeps its memory.
type parser struct {
	// src is the text parsed: the input, or in modePython the input
	// without its BOM, or UTF-16/32 input decoded into own.
	src      []byte
	mode     parseMode
	maxDepth int

	nodes []jnode
	stack []frame
	// pending are the key nodes of the open objects, each object's from
	// its frame's base.
	pending []int32
	// sorted lists the fUnsorted objects by node; members holds their
	// key nodes in key order.
	sorted  []sortedObject
	members []int32
	escKeys []escKey
	arena   []byte
	// scratchA and scratchB hold decoded strings while they are compared
	// or handed out.
	scratchA, scratchB []byte

	// In modePython: the input's decoding (see Doc.ParsePython).
	own      []byte
	base     int
	encoding string
	// overflow and rawSurrogate are 1 + the offset in src of the first
	// float literal that overflows float64 and of the first
	// UTF-8-encoded surrogate, or 0.
	overflow, rawSurrogate int
	// surrogate: a lone surrogate anywhere; codeEscape: a \u or \/ escape
	// anywhere.
	surrogate, codeEscape bool
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// maxPooledNodes keeps parsers that parsed a huge text out of the pool.
const maxPooledNodes = 1 << 20

func getParser() *parser { return parserPool.Get().(*parser) }

func putParser(p *parser) {
	p.src, p.own = nil, nil
	if cap(p.nodes) > maxPooledNodes || cap(p.arena) > maxPooledNodes*8 ||
		cap(p.scratchA) > maxPooledNodes*8 || cap(p.scratchB) > maxPooledNodes*8 {
		return
	}
	parserPool.Put(p)
}

// maxSource bounds what parse reads: offsets and node indexes fit int32.
const maxSource = math.MaxInt32

// maxNodes is the most nodes a text of n bytes can hold: every node but
// one takes at least two bytes (a value and its separator or bracket).
func maxNodes(n int) int { return n/2 + 1 }

// reserveNodes makes room for the nodes a text of n bytes is likely to
// need (one per 16 bytes; records and payloads need far fewer).
func (p *parser) reserveNodes(n int) {
	if want := min(max(n/16, 64), maxNodes(n)); cap(p.nodes) < want {
		p.nodes = make([]jnode, 0, want)
	}
}

// push appends n to p.nodes, doubling the slice when it is full but never
// beyond maxNodes of the text. (append grows a large slice by a quarter
// at a time, allocating about five times the final size along the way.)
// From reserveNodes' start, a text of single-digit values allocates at
// most 16 bytes of nodes per byte in all, 8 of them kept.
func (p *parser) push(n jnode) {
	if len(p.nodes) == cap(p.nodes) {
		p.grow()
	}
	p.nodes = append(p.nodes, n)
}

func (p *parser) grow() {
	limit := maxNodes(len(p.src))
	c := 2 * cap(p.nodes)
	if 2*c > limit { // the next doubling would pass the limit: go there now
		c = limit
	}
	grown := make([]jnode, len(p.nodes), max(c, len(p.nodes)+1))
	copy(grown, p.nodes)
	p.nodes = grown
}

// parse parses input in mode with at most maxDepth nested containers.
// The nodes alias input (or p.own) until the next parse.
func (p *parser) parse(input []byte, mode parseMode, maxDepth int) error {
	p.mode, p.maxDepth = mode, maxDepth
	p.nodes, p.stack, p.pending = p.nodes[:0], p.stack[:0], p.pending[:0]
	p.sorted, p.members = p.sorted[:0], p.members[:0]
	p.base, p.encoding = 0, ""
	p.overflow, p.rawSurrogate = 0, 0
	p.surrogate, p.codeEscape = false, false
	p.src = nil
	if len(input) >= maxSource {
		return &SyntaxError{Err: ErrTooLarge, Why: "input of 2 GiB or more"}
	}
	text := input
	if mode == modePython {
		var err error
		if text, err = p.decode(input); err != nil {
			return err
		}
		if len(text) >= maxSource {
			return &SyntaxError{Err: ErrTooLarge, Why: "decoded text of 2 GiB or more"}
		}
	}
	p.src = text
	p.reserveNodes(len(text))
	err := p.values()
	if err == nil {
		if len(p.sorted) > 1 {
			// Objects close inner first; lookups go by node.
			slices.SortFunc(p.sorted, func(a, b sortedObject) int { return int(a.node - b.node) })
		}
		return nil
	}
	if mode == modePython {
		// Python decodes the whole text before it parses: any error is
		// first an undecodable byte anywhere.
		if k := invalidWTF8At(text); k < len(text) {
			return &SyntaxError{Err: ErrInvalidText, Offset: p.base + k, Why: "invalid UTF-8"}
		}
		if se := (*SyntaxError)(nil); errors.As(err, &se) {
			se.Offset += p.base
			if p.encoding != "" && p.encoding != "utf-8-sig" {
				se.Why += " (in the text decoded from " + p.encoding + ")"
			}
		}
	}
	return err
}

// SyntaxError is a text the parser refuses: why (Err, one of the package's
// errors: ErrInvalidJSON, ErrInvalidText, ErrTooLarge, ErrDuplicateKey,
// ErrTooDeep, ErrNonFinite, ErrLoneSurrogate or ErrIntTooLong) and where
// (Offset, in bytes of the input). Why describes the failure without
// quoting the input; Error adds a duplicate key or an overflowing literal.
type SyntaxError struct {
	Err    error
	Offset int
	Why    string
	// detail replaces Why in Error: it names the duplicate key or the
	// overflowing literal (shortened).
	detail string
}

// Error returns the failure with its offset, e.g. "invalid json:
// unexpected ',' at offset 3".
func (e *SyntaxError) Error() string {
	what := e.Why
	if e.detail != "" {
		what = e.detail
	}
	return e.Err.Error() + ": " + what + " at offset " + strconv.Itoa(e.Offset)
}

// Unwrap returns Err.
func (e *SyntaxError) Unwrap() error { return e.Err }

func (p *parser) syntaxErr(why string, at int) *SyntaxError {
	if at >= len(p.src) {
		return &SyntaxError{Err: ErrInvalidJSON, Why: why + " at end of input", Offset: len(p.src)}
	}
	return &SyntaxError{Err: ErrInvalidJSON, Why: why, Offset: at}
}

// isWS reports JSON whitespace (the only whitespace Python's json accepts).
func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// describe names the byte at i for an error message.
func describe(src []byte, i int) string {
	if i >= len(src) {
		return "end of input"
	}
	c := src[i]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	const hex = "0123456789abcdef"
	return "byte 0x" + string([]byte{hex[c>>4], hex[c&0xf]})
}

// values is the scanner: it reads one value at a time and keeps the open
// containers on a stack. It is iterative; nesting is bounded by maxDepth.
func (p *parser) values() error {
	src := p.src
	i := skipWS(src, 0)
	var err error
	for {
		// A value starts at i.
		if i >= len(src) {
			return p.syntaxErr("expected a value", i)
		}
		closed := true
		switch c := src[i]; c {
		case '{', '[':
			if len(p.stack) >= p.maxDepth {
				return &SyntaxError{Err: ErrTooDeep, Offset: i,
					Why: "more than " + strconv.Itoa(p.maxDepth) + " nested containers"}
			}
			kind := jArray
			if c == '{' {
				kind = jObject
			}
			p.stack = append(p.stack, frame{node: int32(len(p.nodes)), base: int32(len(p.pending))})
			p.push(jnode{start: int32(i), kind: kind})
			i = skipWS(src, i+1)
			if kind == jObject {
				if i < len(src) && src[i] == '}' {
					if err = p.closeContainer(i); err != nil {
						return err
					}
					i++
					break
				}
				if i, err = p.key(i); err != nil {
					return err
				}
				closed = false
				break
			}
			if i < len(src) && src[i] == ']' {
				if err = p.closeContainer(i); err != nil {
					return err
				}
				i++
				break
			}
			closed = false
		case '"':
			if i, err = p.str(i); err != nil {
				return err
			}
		case 'n':
			if i, err = p.literal(i, "null", jNull); err != nil {
				return err
			}
		case 't':
			if i, err = p.literal(i, "true", jTrue); err != nil {
				return err
			}
		case 'f':
			if i, err = p.literal(i, "false", jFalse); err != nil {
				return err
			}
		default:
			if p.mode == modePython && (c == 'N' || c == 'I' || c == '-' && i+1 < len(src) && src[i+1] == 'I') {
				for _, lit := range []string{"NaN", "Infinity", "-Infinity"} {
					if bytes.HasPrefix(src[i:], []byte(lit)) {
						return &SyntaxError{Err: ErrNonFinite, Offset: i, Why: lit + " literal"}
					}
				}
			}
			if c != '-' && !isDigit(c) {
				return p.syntaxErr("unexpected "+describe(src, i)+", expected a value", i)
			}
			if i, err = p.number(i); err != nil {
				return err
			}
		}
		if !closed {
			continue // a container was opened: its first value is next
		}
		// A value ended at i: continue the enclosing container.
		for {
			i = skipWS(src, i)
			if len(p.stack) == 0 {
				if i != len(src) {
					return p.syntaxErr("unexpected "+describe(src, i)+" after the top-level value", i)
				}
				return nil
			}
			if i >= len(src) {
				return p.syntaxErr("unterminated container", i)
			}
			c := src[i]
			if p.nodes[p.stack[len(p.stack)-1].node].kind == jObject {
				if c == '}' {
					if err = p.closeContainer(i); err != nil {
						return err
					}
					i++
					continue
				}
				if c != ',' {
					return p.syntaxErr("unexpected "+describe(src, i)+", expected ',' or '}'", i)
				}
				if i, err = p.key(skipWS(src, i+1)); err != nil {
					return err
				}
				break
			}
			if c == ']' {
				if err = p.closeContainer(i); err != nil {
					return err
				}
				i++
				continue
			}
			if c != ',' {
				return p.syntaxErr("unexpected "+describe(src, i)+", expected ',' or ']'", i)
			}
			i = skipWS(src, i+1)
			break
		}
	}
}

// key parses an object key and the colon after it, returning the offset
// of the member's value.
func (p *parser) key(i int) (int, error) {
	src := p.src
	if i >= len(src) || src[i] != '"' {
		return i, p.syntaxErr("unexpected "+describe(src, i)+", expected a string key", i)
	}
	i, err := p.str(i)
	if err != nil {
		return i, err
	}
	k := len(p.nodes) - 1
	p.nodes[k].flags |= fKey
	p.pending = append(p.pending, int32(k))
	i = skipWS(src, i)
	if i >= len(src) || src[i] != ':' {
		return i, p.syntaxErr("unexpected "+describe(src, i)+", expected ':'", i)
	}
	return skipWS(src, i+1), nil
}

func (p *parser) literal(i int, lit string, kind jkind) (int, error) {
	if !bytes.HasPrefix(p.src[i:], []byte(lit)) {
		return i, p.syntaxErr("invalid literal", i)
	}
	p.push(jnode{start: int32(i), end: int32(i + len(lit)), next: int32(len(p.nodes) + 1), kind: kind})
	return i + len(lit), nil
}

// maxIntDigits is CPython's default int_max_str_digits: json.loads raises
// ValueError on an integer literal with more digits (modePython only).
const maxIntDigits = 4300

// number scans a number literal like CPython's _match_number_unicode:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, where an incomplete
// fraction or exponent is not part of it (and is then refused as what
// follows the number). A literal with a fraction or exponent is a float.
func (p *parser) number(i int) (int, error) {
	src := p.src
	start := i
	if src[i] == '-' {
		i++
	}
	if i >= len(src) || !isDigit(src[i]) {
		return start, p.syntaxErr("unexpected "+describe(src, i)+" in number", i)
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
	expStart := -1 // the exponent's digits, with their sign
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
			expStart = i + 1
			i = j
		}
	}
	kind := jInt
	if isInt {
		if p.mode == modePython {
			digits := intEnd - start
			if src[start] == '-' {
				digits--
			}
			if digits > maxIntDigits {
				return start, &SyntaxError{Err: ErrIntTooLong, Offset: start, Why: "integer literal longer than 4300 digits"}
			}
		}
	} else {
		kind = jFloat
		if p.mode != modeEqual && floatOverflows(src[start:i], intEnd-start, expStart-start) {
			if p.mode == modeCanonical {
				return start, &SyntaxError{Err: ErrNonFinite, Offset: start, Why: "float literal overflows float64", detail: shorten(src[start:i]) + " overflows float64"}
			}
			if p.overflow == 0 {
				p.overflow = start + 1 // Python reads an infinity
			}
		}
	}
	p.push(jnode{start: int32(start), end: int32(i), next: int32(len(p.nodes) + 1), kind: kind})
	return i, nil
}

func shorten(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "..."
	}
	return string(b)
}

// floatOverflows reports whether the float literal lit rounds to an
// infinity; its integer part ends at intEnd and its exponent (sign
// included) starts at expStart (-1 without one). Literals whose decimal
// exponent is clearly in range skip the parse.
func floatOverflows(lit []byte, intEnd, expStart int) bool {
	// Digits of the integer part: JSON allows no leading zeros, and "0"
	// counts as none.
	digits := intEnd
	if lit[0] == '-' {
		digits--
	}
	if lit[intEnd-1] == '0' && digits == 1 {
		digits = 0
	}
	exp := 0
	if expStart >= 0 {
		e := lit[expStart:]
		neg := e[0] == '-'
		if e[0] == '+' || e[0] == '-' {
			e = e[1:]
		}
		if len(e) > 6 {
			return math.IsInf(parseFloat(lit), 0)
		}
		for _, c := range e {
			exp = exp*10 + int(c-'0')
		}
		if neg {
			exp = -exp
		}
	}
	if digits+exp < 300 {
		return false
	}
	return math.IsInf(parseFloat(lit), 0)
}

// parseFloat is the float64 value of a float literal the parser accepted:
// rounded to nearest, ±Inf when it overflows (as Python reads it).
func parseFloat(lit []byte) float64 {
	f, _ := strconv.ParseFloat(string(lit), 64) // the syntax is valid: the only error is ErrRange
	return f
}

// str scans a string starting at the quote at i and appends its node.
// It stops at every byte that needs a look: a quote, a backslash, a
// control character (< 0x20) or a byte above 0x7f, found sixteen bytes at
// a time (skipPlain). UTF-8 is validated where it occurs, one sequence at
// a time, so that a string is read once.
func (p *parser) str(i int) (int, error) {
	src := p.src
	start := i + 1
	j := start
	var flags uint8
	for {
		if j = skipPlain(src, j); j >= len(src) {
			return i, p.syntaxErr("unterminated string", i)
		}
		c := src[j]
		if c == '"' {
			p.push(jnode{start: int32(start), end: int32(j), next: int32(len(p.nodes) + 1), kind: jString, flags: flags})
			return j + 1, nil
		}
		var c1 byte
		if j+1 < len(src) {
			c1 = src[j+1]
		}
		switch {
		case c == '\\' && escapeKind[c1] == escapeByte: // the common escapes first
			flags |= fEsc
			j += 2
		case c >= 0xc2 && c < 0xe0 && c1&0xc0 == 0x80: // a two-byte sequence
			j += 2
		case c < 0x20:
			return i, p.syntaxErr("invalid control character 0x"+string([]byte{"0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf]})+" in string", j)
		case c >= 0x80:
			// A multi-byte sequence: its continuation bytes are never a
			// quote, so it lies inside the string.
			n := validUTF8At(src, j)
			if n == 0 || c == 0xed && src[j+1] >= 0xa0 && p.mode != modePython {
				return i, &SyntaxError{Err: ErrInvalidText, Offset: j, Why: "invalid UTF-8"}
			}
			if c == 0xed && src[j+1] >= 0xa0 { // a surrogate, which Python decodes
				flags |= fSurrogate
				p.surrogate = true
				if p.rawSurrogate == 0 {
					p.rawSurrogate = j + 1
				}
			}
			j += n
		default: // another backslash escape
			flags |= fEsc
			if j+1 >= len(src) {
				return i, p.syntaxErr("unterminated string", i)
			}
			switch escapeKind[c1] {
			case escapeSlash:
				p.codeEscape = true
				flags |= fRecode
				j += 2
			case escapeCode:
				k, lone, err := p.codeEscapeAt(j)
				if err != nil {
					return i, err
				}
				flags |= fRecode
				if lone {
					flags |= fSurrogate
				}
				j = k
			default:
				return i, p.syntaxErr("invalid escape "+describe(src, j+1), j)
			}
		}
	}
}

// codeEscapeAt checks the \uXXXX escape (and the low surrogate escape
// that may follow it) at k and returns the index after it, and whether it
// is a lone surrogate (an error in modeCanonical).
func (p *parser) codeEscapeAt(k int) (int, bool, error) {
	src := p.src
	p.codeEscape = true
	// CPython requires one more character after the four digits.
	if k+6 >= len(src) {
		return 0, false, p.syntaxErr(`invalid \u escape`, k)
	}
	r, ok := hex4(src[k+2 : k+6])
	if !ok {
		return 0, false, p.syntaxErr(`invalid \u escape`, k)
	}
	j := k + 6
	if 0xd800 <= r && r < 0xdc00 && j+6 < len(src) && src[j] == '\\' && src[j+1] == 'u' {
		r2, ok := hex4(src[j+2 : j+6])
		if !ok {
			return 0, false, p.syntaxErr(`invalid \u escape`, j)
		}
		if 0xdc00 <= r2 && r2 < 0xe000 {
			return j + 6, false, nil
		}
	}
	if 0xd800 <= r && r < 0xe000 {
		if p.mode == modeCanonical {
			const hex = "0123456789abcdef"
			return 0, false, &SyntaxError{Err: ErrLoneSurrogate, Offset: k,
				Why: `\u` + string([]byte{hex[r>>12], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf]})}
		}
		p.surrogate = true
		return j, true, nil
	}
	return j, false, nil
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

// The escapes after a backslash.
const (
	escapeInvalid = iota
	escapeByte    // \" \\ \b \f \n \r \t: canonical as they stand
	escapeSlash   // \/
	escapeCode    // \uXXXX
)

var escapeKind = func() (t [256]uint8) {
	for _, c := range []byte(`"\bfnrt`) {
		t[c] = escapeByte
	}
	t['/'] = escapeSlash
	t['u'] = escapeCode
	return t
}()

// hex4 decodes four hex digits (either case) at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
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

// closeContainer closes the innermost container at the bracket at end.
// Closing an object runs the duplicate-key check, as Python's
// object_pairs_hook does.
func (p *parser) closeContainer(end int) error {
	top := p.stack[len(p.stack)-1]
	p.stack = p.stack[:len(p.stack)-1]
	n := &p.nodes[top.node]
	n.end = int32(end)
	n.next = int32(len(p.nodes))
	if n.kind == jObject {
		err := p.closeObject(top.node, p.pending[top.base:])
		p.pending = p.pending[:top.base]
		return err
	}
	return nil
}

// closeObject rejects a repeated key in object obj, whose key nodes are
// keys (reordered). Keys without escapes
// in strictly increasing byte order (canonical JSON sorts them) are
// distinct; other objects are sorted by decoded key, which finds
// duplicates and keeps the key order for canonical output and Equal.
func (p *parser) closeObject(obj int32, keys []int32) error {
	if len(keys) < 2 {
		return nil
	}
	sorted := true
	for a := 1; a < len(keys) && sorted; a++ {
		na, nb := &p.nodes[keys[a-1]], &p.nodes[keys[a]]
		sorted = (na.flags|nb.flags)&fEsc == 0 &&
			bytes.Compare(p.src[na.start:na.end], p.src[nb.start:nb.end]) < 0
	}
	if sorted {
		return nil
	}
	// Escaped keys (rare) are compared decoded, from the arena.
	p.arena, p.escKeys = p.arena[:0], p.escKeys[:0]
	for _, k := range keys {
		if n := &p.nodes[k]; n.flags&fEsc != 0 {
			start := len(p.arena)
			p.arena = appendDecoded(p.arena, p.src[n.start:n.end])
			p.escKeys = append(p.escKeys, escKey{node: k, start: int32(start), end: int32(len(p.arena))})
		}
	}
	slices.SortStableFunc(keys, func(a, b int32) int { return bytes.Compare(p.sortKey(a), p.sortKey(b)) })
	for a := 1; a < len(keys); a++ {
		if kb := p.sortKey(keys[a]); bytes.Equal(p.sortKey(keys[a-1]), kb) {
			// keys[a] is the later occurrence (stable sort).
			return &SyntaxError{Err: ErrDuplicateKey, Offset: int(p.nodes[keys[a]].start) - 1,
				Why: "object has a repeated key", detail: quoteKey(kb)}
		}
	}
	p.nodes[obj].flags |= fUnsorted
	p.sorted = append(p.sorted, sortedObject{node: obj, off: int32(len(p.members)), n: int32(len(keys))})
	p.members = append(p.members, keys...)
	return nil
}

// escKey is where closeObject decoded an escaped key into the arena.
type escKey struct{ node, start, end int32 }

// sortKey is key node k's decoded bytes while closeObject sorts.
func (p *parser) sortKey(k int32) []byte {
	n := &p.nodes[k]
	if n.flags&fEsc == 0 {
		return p.src[n.start:n.end]
	}
	for _, e := range p.escKeys {
		if e.node == k {
			return p.arena[e.start:e.end]
		}
	}
	panic("journal: escaped key not decoded") // unreachable
}

// quoteKey renders a key for an error message, shortened.
func quoteKey(k []byte) string {
	const max = 64
	if len(k) > max {
		return strconv.Quote(string(k[:max])) + "..."
	}
	return strconv.Quote(string(k))
}

// memberIter walks an object's members in key order.
type memberIter struct {
	p      *parser
	sorted []int32 // fUnsorted objects: their key nodes in key order
	j, end int32   // other objects: the next key node and the object's end
}

func (p *parser) memberIter(obj int32) memberIter {
	n := &p.nodes[obj]
	if n.flags&fUnsorted == 0 {
		return memberIter{p: p, j: obj + 1, end: n.next}
	}
	k, _ := slices.BinarySearchFunc(p.sorted, obj, func(s sortedObject, node int32) int { return int(s.node - node) })
	s := p.sorted[k]
	return memberIter{p: p, sorted: p.members[s.off : s.off+s.n]}
}

// next returns the next key node, or false at the end.
func (it *memberIter) next() (int32, bool) {
	if it.sorted != nil {
		if len(it.sorted) == 0 {
			return 0, false
		}
		k := it.sorted[0]
		it.sorted = it.sorted[1:]
		return k, true
	}
	if it.j >= it.end {
		return 0, false
	}
	k := it.j
	it.j = it.p.nodes[k+1].next
	return k, true
}

// count is the number of members of object obj.
func (p *parser) count(obj int32) int {
	n := 0
	for j := obj + 1; j < p.nodes[obj].next; j = p.nodes[j+1].next {
		n++
	}
	return n
}

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
// its escapes decoded. Lone surrogates are written in generalized UTF-8
// (WTF-8), so decoded strings compare equal exactly when their code point
// sequences do (as Python's str values), and byte order is code point
// order.
func appendDecoded(dst, raw []byte) []byte {
	for len(raw) > 0 {
		j := bytes.IndexByte(raw, '\\')
		if j < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:j]...)
		r, n := decodeEscape(raw[j:])
		raw = raw[j+n:]
		dst = appendWTF8(dst, r)
	}
	return dst
}

// appendWTF8 appends r as UTF-8, surrogates included.
func appendWTF8(dst []byte, r rune) []byte {
	if 0xd800 <= r && r < 0xe000 {
		return append(dst, byte(0xe0|r>>12), byte(0x80|(r>>6)&0x3f), byte(0x80|r&0x3f))
	}
	return utf8.AppendRune(dst, r)
}

// keyBytes returns the decoded bytes of string node k: its source text,
// or, with escapes, the text decoded into *buf.
func (p *parser) keyBytes(k int32, buf *[]byte) []byte {
	n := &p.nodes[k]
	if n.flags&fEsc == 0 {
		return p.src[n.start:n.end]
	}
	*buf = appendDecoded((*buf)[:0], p.src[n.start:n.end])
	return *buf
}

// decode applies json.loads' decoding of bytes (modePython):
// detect_encoding, then decode with "surrogatepass". Plain UTF-8 is
// returned as is (validated while parsing), UTF-8 with a BOM without it,
// UTF-16 and UTF-32 decoded into p.own (as WTF-8: lone surrogates kept).
func (p *parser) decode(b []byte) ([]byte, error) {
	enc := detectEncoding(b)
	switch enc {
	case "utf-8":
		return b, nil
	case "utf-8-sig":
		p.base, p.encoding = 3, enc
		return b[3:], nil
	}
	p.encoding = enc
	out, ok := decodeWide(p.own[:0], enc, b)
	if !ok {
		return nil, &SyntaxError{Err: ErrInvalidText, Why: "invalid " + enc + " text"}
	}
	p.own = out
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
