package hxbundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"hxd/internal/journal"
)

// Redaction works on an ordered representation of JSON (pvalue), never on
// a Go map, built from journal's parse of the payload: member order is
// kept, number literals are kept verbatim (so 300.0 stays a float and big
// integers stay exact), and untouched strings keep their source escapes.
// Canonical output is produced by journal's canonical encoder from the
// re-serialized tree.

// redactMarker replaces the value of a credential-shaped key (REFERENCE §5.5).
const redactMarker = "[REDACTED]"

// payloadMaxDepth bounds nesting in payloads and in JSON held in strings
// (journal.MaxDepth, the parser's). A payload nested deeper cannot be
// exported; an embedded document nested deeper is kept verbatim (the
// reference's RecursionError behaviour).
const payloadMaxDepth = journal.MaxDepth

// isCredentialName reports whether a normalized key name is in the exact
// set of credential key names (a switch: no hashing on this hot path).
func isCredentialName(name []byte) bool {
	switch string(name) {
	case "authorization", "proxyauthorization", "apikey", "password", "secret",
		"accesstoken", "refreshtoken", "clientsecret", "cookie", "setcookie":
		return true
	}
	return false
}

// credentialKeyMaxLen is the length of the longest sensitive key.
const credentialKeyMaxLen = len("proxyauthorization")

// isCredentialKey reports whether an object key names a credential: the key
// is lowercased (Unicode, like Python's str.lower), every character outside
// a–z is deleted, and the rest must be in the exact set.
func isCredentialKey(key string) bool {
	var buf [credentialKeyMaxLen]byte
	n := 0
	for i := 0; i < len(key); {
		c := key[i]
		var r rune
		if c < utf8.RuneSelf {
			r, i = rune(c), i+1
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
		} else {
			var size int
			r, size = utf8.DecodeRuneInString(key[i:])
			i += size
			// Python lowercases a few non-ASCII letters to ASCII ones
			// (KELVIN SIGN → k, İ → i + combining dot).
			r = unicode.ToLower(r)
		}
		if r < 'a' || r > 'z' {
			continue
		}
		if n == len(buf) {
			return false
		}
		buf[n] = byte(r)
		n++
	}
	return isCredentialName(buf[:n])
}

// pkind is the type of a pvalue.
type pkind uint8

const (
	pNull pkind = iota
	pBool
	pNumber
	pString
	pArray
	pObject
)

// pvalue is one JSON value of the ordered representation.
type pvalue struct {
	kind pkind
	// lit is the source literal of a bool or number, and the source text
	// between a string's quotes, escapes not decoded (nil once the string
	// was replaced: then str is authoritative).
	lit []byte
	// str is the decoded text of a string; valid when decoded is true.
	str     string
	decoded bool
	arr     []pvalue
	obj     []pmember
}

// pmember is one object member: its key's source text between the quotes,
// the decoded key and the value.
type pmember struct {
	rawKey []byte
	key    string
	val    pvalue
}

// text returns the decoded text of a string value.
func (v *pvalue) text() string {
	if !v.decoded {
		s, _ := unescapePayloadString(v.lit)
		v.str, v.decoded = s, true
	}
	return v.str
}

// mayEmbedJSON is a cheap test on a string's source literal: false when
// its text certainly does not start with '{' or '[' after whitespace.
func (v *pvalue) mayEmbedJSON() bool {
	if v.lit == nil {
		return true
	}
	raw := v.lit
	j := 0
	for j < len(raw) && raw[j] == ' ' {
		j++
	}
	return j < len(raw) && (raw[j] == '{' || raw[j] == '[' || raw[j] == '\\')
}

// setString replaces v by a string value.
func (v *pvalue) setString(s string) {
	*v = pvalue{kind: pString, str: s, decoded: true}
}

// isRedacted reports whether v is already the string "[REDACTED]".
func (v *pvalue) isRedacted() bool {
	return v.kind == pString && v.text() == redactMarker
}

// clone deep-copies v (literals are shared: they are never mutated).
func (v *pvalue) clone() pvalue {
	c := *v
	if v.arr != nil {
		c.arr = make([]pvalue, len(v.arr))
		for i := range v.arr {
			c.arr[i] = v.arr[i].clone()
		}
	}
	if v.obj != nil {
		c.obj = make([]pmember, len(v.obj))
		for i := range v.obj {
			c.obj[i] = pmember{rawKey: v.obj[i].rawKey, key: v.obj[i].key, val: v.obj[i].val.clone()}
		}
	}
	return c
}

// appendJSON serializes v as (not yet canonical) JSON.
func (v *pvalue) appendJSON(dst []byte) []byte {
	switch v.kind {
	case pNull:
		return append(dst, "null"...)
	case pBool, pNumber:
		return append(dst, v.lit...)
	case pString:
		if v.lit != nil {
			dst = append(dst, '"')
			dst = append(dst, v.lit...)
			return append(dst, '"')
		}
		return appendPayloadString(dst, v.str)
	case pArray:
		dst = append(dst, '[')
		for i := range v.arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = v.arr[i].appendJSON(dst)
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		for i := range v.obj {
			if i > 0 {
				dst = append(dst, ',')
			}
			m := &v.obj[i]
			if m.rawKey != nil {
				dst = append(dst, '"')
				dst = append(dst, m.rawKey...)
				dst = append(dst, '"')
			} else {
				dst = appendPayloadString(dst, m.key)
			}
			dst = append(dst, ':')
			dst = m.val.appendJSON(dst)
		}
		return append(dst, '}')
	}
}

// appendPayloadString appends s as a valid JSON string literal (the canonical
// encoder decides the final escaping).
func appendPayloadString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// parsePayload parses one JSON document with journal's parser as Equal
// reads texts: RFC 8259 grammar in UTF-8 (no NaN/Infinity), no duplicate
// keys at any depth, no raw control characters in strings, only JSON
// whitespace around the value, nesting bounded by payloadMaxDepth; lone
// surrogate escapes and overflowing float literals are read (the
// canonical encoder refuses them later). The tree aliases src.
func parsePayload(src []byte) (pvalue, error) {
	d := payloadDocs.Get().(*journal.Doc)
	defer payloadDocs.Put(d)
	if err := d.ParseLenient(src); err != nil {
		return pvalue{}, err
	}
	return toPValue(d.Root()), nil
}

// payloadDocs are parsers for parsePayload (the tree does not use them
// once built).
var payloadDocs = sync.Pool{New: func() any { return new(journal.Doc) }}

// toPValue builds the tree of a parsed value.
func toPValue(v journal.Value) pvalue {
	switch v.Kind() {
	case journal.JSONNull:
		return pvalue{kind: pNull}
	case journal.JSONTrue, journal.JSONFalse:
		return pvalue{kind: pBool, lit: v.Raw()}
	case journal.JSONInt, journal.JSONFloat:
		return pvalue{kind: pNumber, lit: v.Raw()}
	case journal.JSONString:
		return pvalue{kind: pString, lit: v.Raw()} // decoded on demand
	case journal.JSONArray:
		arr := make([]pvalue, 0, v.Len())
		for e := range v.Elems() {
			arr = append(arr, toPValue(e))
		}
		return pvalue{kind: pArray, arr: arr}
	default: // object
		obj := make([]pmember, 0, v.Len())
		for k, e := range v.Members() {
			key := string(k.Raw())
			if k.Escaped() {
				key, _ = unescapePayloadString(k.Raw()) // validated by the parser
			}
			obj = append(obj, pmember{rawKey: k.Raw(), key: key, val: toPValue(e)})
		}
		return pvalue{kind: pObject, obj: obj}
	}
}

// unquotePayloadString decodes a JSON string literal (with its quotes)
// that the parser or the scanner has delimited. Lone surrogate escapes
// decode as U+FFFD.
func unquotePayloadString(lit []byte) (string, error) {
	if len(lit) < 2 {
		return "", errors.New("invalid string literal")
	}
	return unescapePayloadString(lit[1 : len(lit)-1])
}

// unescapePayloadString decodes the text between a JSON string literal's
// quotes (see unquotePayloadString).
func unescapePayloadString(s []byte) (string, error) {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s), nil
	}
	out, err := journal.AppendUnescaped(make([]byte, 0, len(s)), s)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// embedsJSON reports whether a string's text, left-trimmed, starts with
// '{' or '['. Only JSON whitespace is trimmed: a string led by other
// whitespace fails the reference's json.loads anyway and is kept verbatim.
func embedsJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[':
			return true
		default:
			return false
		}
	}
	return false
}

// autoRedact applies REFERENCE §5.5 to v in place and reports whether it
// changed anything (a value that already is "[REDACTED]" is not a change).
func autoRedact(v *pvalue) bool {
	switch v.kind {
	case pObject:
		changed := false
		for i := range v.obj {
			m := &v.obj[i]
			if isCredentialKey(m.key) {
				if !m.val.isRedacted() {
					m.val.setString(redactMarker)
					changed = true
				}
			} else if autoRedact(&m.val) {
				changed = true
			}
		}
		return changed
	case pArray:
		changed := false
		for i := range v.arr {
			if autoRedact(&v.arr[i]) {
				changed = true
			}
		}
		return changed
	case pString:
		if !v.mayEmbedJSON() {
			return false
		}
		s := v.text()
		if !embedsJSON(s) {
			return false
		}
		inner, err := parsePayload([]byte(s))
		if err != nil || !autoRedact(&inner) {
			return false // unparsable or unchanged: kept verbatim
		}
		canon, err := journal.AppendCanonical(nil, inner.appendJSON(nil))
		if err != nil {
			// The redacted document cannot be written canonically (e.g. a
			// number out of float range): fail closed.
			v.setString(redactMarker)
			return true
		}
		v.setString(string(canon))
		return true
	default:
		return false
	}
}

// mightRedact is a fast, conservative pre-check on JSON text: false means
// auto-redaction certainly leaves it unchanged (no credential-shaped key
// at any depth, including inside JSON held in strings). On text that is
// not valid JSON the answer may be true needlessly, never wrongly false
// for the parts that the strict parser would accept.
func mightRedact(b []byte, depth int) bool {
	if depth > payloadMaxDepth {
		return true
	}
	for i := 0; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return false
		}
		start := i + q
		end := payloadStringEnd(b, start+1)
		if end < 0 {
			return true
		}
		i = end + 1
		raw := b[start+1 : end]
		k := end + 1
		for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' || b[k] == '\r') {
			k++
		}
		if k < len(b) && b[k] == ':' { // a key
			if bytes.IndexByte(raw, '\\') < 0 {
				if isCredentialKeyBytes(raw) {
					return true
				}
			} else if key, err := unquotePayloadString(b[start : end+1]); err != nil || isCredentialKey(key) {
				return true
			}
			continue
		}
		// A value: only strings whose raw text, after spaces, starts with
		// '{', '[' or an escape may hold JSON; only those are looked into.
		j := 0
		for j < len(raw) && (raw[j] == ' ' || raw[j] == '\t' || raw[j] == '\n' || raw[j] == '\r') {
			j++
		}
		if j == len(raw) || (raw[j] != '{' && raw[j] != '[' && raw[j] != '\\') {
			continue
		}
		if bytes.IndexByte(raw, '\\') < 0 {
			if mightRedact(raw, depth+1) {
				return true
			}
			continue
		}
		text, err := unquotePayloadString(b[start : end+1])
		if err != nil {
			return true
		}
		if embedsJSON(text) && mightRedact([]byte(text), depth+1) {
			return true
		}
	}
	return false
}

// docMightRedact is mightRedact for a payload already parsed for
// canonical output: false means auto-redaction certainly leaves it
// unchanged.
func docMightRedact(d *journal.Doc) bool {
	return !d.Strings(func(s []byte, key, esc bool) bool {
		return !stringMightRedact(s, key, esc)
	})
}

// Outcomes of docRedactions.
const (
	redactNone     = iota // automatic redaction changes nothing
	redactKeysOnly        // it only replaces credential keys' values
	redactMaybe           // anything else: take the general path
)

// docRedactions tells what automatic redaction (autoRedact, both passes)
// does to the parsed payload d, with no rule applying. When no string
// value may hold JSON (its source text, after spaces, does not start with
// '{', '[' or an escape) nothing but the values of credential-shaped keys
// can change: autoRedact then sets exactly those (the outermost ones) to
// "[REDACTED]" and its second pass finds nothing more to do. Otherwise
// the answer is docMightRedact's, redactNone or redactMaybe.
func docRedactions(d *journal.Doc) int {
	keys, embeds := false, false
	d.Strings(func(s []byte, key, _ bool) bool {
		if key {
			if !keys && isCredentialKeyBytes(s) {
				keys = true
			}
			return true
		}
		j := 0
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
			j++
		}
		if j < len(s) && (s[j] == '{' || s[j] == '[' || s[j] == '\\') {
			embeds = true
			return false
		}
		return true
	})
	switch {
	case embeds:
		if docMightRedact(d) {
			return redactMaybe
		}
		return redactNone
	case keys:
		return redactKeysOnly
	default:
		return redactNone
	}
}

// redactMarkerJSON is redactMarker as a canonical JSON string.
var redactMarkerJSON = []byte(`"` + redactMarker + `"`)

// stringMightRedact is mightRedact's test of one string of a payload: a
// decoded object key, or a value's source text (esc: with escapes).
func stringMightRedact(s []byte, key, esc bool) bool {
	if key {
		return isCredentialKeyBytes(s)
	}
	j := 0
	for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
		j++
	}
	if j == len(s) || (s[j] != '{' && s[j] != '[' && s[j] != '\\') {
		return false
	}
	if !esc {
		return mightRedact(s, 1)
	}
	text, err := unescapePayloadString(s)
	if err != nil {
		return true
	}
	return embedsJSON(text) && mightRedact([]byte(text), 1)
}

// payloadStringEnd returns the index of the quote closing the string whose
// contents start at i, or -1 if it is unterminated.
func payloadStringEnd(b []byte, i int) int {
	for from := i; ; {
		j := bytes.IndexByte(b[from:], '"')
		if j < 0 {
			return -1
		}
		q := from + j
		n := 0 // backslashes right before the quote
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q
		}
		from = q + 1
	}
}

// isCredentialKeyBytes is isCredentialKey for an unescaped key literal, without
// allocating for ASCII keys.
func isCredentialKeyBytes(b []byte) bool {
	var buf [credentialKeyMaxLen]byte
	n := 0
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return isCredentialKey(string(b))
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c < 'a' || c > 'z' {
			continue
		}
		if n == len(buf) {
			return false // longer than any sensitive key; runes only add letters
		}
		buf[n] = c
		n++
	}
	return isCredentialName(buf[:n])
}

// Rule actions.
const (
	// ActionOmit drops the whole payload (no pointer) or the member or
	// element at Pointer.
	ActionOmit = "omit"
	// ActionReplace sets the value at Pointer (the whole payload when
	// Pointer is empty) to Value.
	ActionReplace = "replace"
)

// Rule is one declarative redaction rule (DESIGN §4), applied to a
// payload after the first automatic redaction pass and before the second,
// in policy order. Rules only apply to records whose kind is in Kinds
// (every kind when Kinds is empty). Three shapes exist:
//
//   - {action:"omit"}: the payload becomes null (capture "omitted").
//   - {pointer:"/a/0/b", action:"omit"|"replace", value?}: Pointer is an
//     RFC 6901 JSON pointer (~0 = "~", ~1 = "/"; "" is the whole payload).
//     omit removes the member or array element it designates; replace sets
//     it to Value (any JSON, null included). A pointer that designates
//     nothing (missing member, index out of range, "-", a step into a
//     scalar) is a no-op: nothing is ever created.
//   - {pattern:"regex", replace:"text"}: Pattern is an RE2 regular
//     expression (Go regexp syntax); every match in every string value of
//     the payload, at any depth, is replaced by Replace, which may refer to
//     groups as $1 or ${name} ($$ for a literal $). Object member names
//     are not scrubbed. A string holding JSON is scrubbed as plain text
//     (it is not parsed), so a pattern sees the embedded document's text;
//     the second automatic pass then re-examines the result.
//
// Values left in a payload are still subject to the second automatic pass,
// so a rule cannot introduce a credential-shaped key with a clear value.
type Rule struct {
	// Kinds restricts the rule to these record kinds. Optional; default:
	// every kind.
	Kinds []string `json:"kinds,omitempty"`
	// Action is "omit" or "replace"; it must be empty for pattern rules.
	Action string `json:"action,omitempty"`
	// Pointer designates the value to omit or replace. Optional; default:
	// the whole payload.
	Pointer string `json:"pointer,omitempty"`
	// Value is the replacement JSON value; required for "replace" and
	// forbidden otherwise.
	Value json.RawMessage `json:"value,omitempty"`
	// Pattern is an RE2 regular expression scrubbing string values.
	Pattern string `json:"pattern,omitempty"`
	// Replace is the replacement template for Pattern matches. Optional;
	// default: "" (matches are deleted).
	Replace string `json:"replace,omitempty"`
}

// compiledRule is a validated Rule.
type compiledRule struct {
	kinds   map[journal.Kind]struct{}
	action  string // omit | replace | scrubStrings
	pointer []string
	value   pvalue
	re      *regexp.Regexp
	repl    string
}

const ruleActionScrub = "scrubStrings"

// compile validates r.
func (r Rule) compile() (compiledRule, error) {
	c := compiledRule{}
	if len(r.Kinds) > 0 {
		c.kinds = make(map[journal.Kind]struct{}, len(r.Kinds))
		for _, k := range r.Kinds {
			if !journal.Kind(k).Valid() {
				return c, fmt.Errorf("unknown record kind %q", k)
			}
			c.kinds[journal.Kind(k)] = struct{}{}
		}
	}
	if r.Pattern != "" {
		if r.Action != "" || r.Pointer != "" || len(r.Value) > 0 {
			return c, errors.New("a pattern rule takes no action, pointer or value")
		}
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return c, fmt.Errorf("pattern does not compile: %w", err)
		}
		c.action, c.re, c.repl = ruleActionScrub, re, r.Replace
		return c, nil
	}
	if r.Replace != "" {
		return c, errors.New("replace needs a pattern")
	}
	ptr, err := parseRulePointer(r.Pointer)
	if err != nil {
		return c, err
	}
	c.pointer = ptr
	switch r.Action {
	case ActionOmit:
		if len(r.Value) > 0 {
			return c, errors.New("an omit rule takes no value")
		}
	case ActionReplace:
		if len(r.Value) == 0 {
			return c, errors.New("a replace rule needs a value")
		}
		v, err := parsePayload(bytes.Clone(r.Value))
		if err != nil {
			return c, fmt.Errorf("value: %w", err)
		}
		// The value lands in records written as canonical JSON: one that
		// has no canonical form (1e999, a lone surrogate) is refused here,
		// not when the export writes it.
		if _, err := journal.AppendCanonical(nil, r.Value); err != nil {
			return c, fmt.Errorf("value: %w", err)
		}
		c.value = v
	case "":
		return c, errors.New("missing action (omit or replace) or pattern")
	default:
		return c, fmt.Errorf("unknown action %q (want omit or replace)", r.Action)
	}
	c.action = r.Action
	return c, nil
}

// parseRulePointer splits an RFC 6901 JSON pointer into unescaped tokens.
func parseRulePointer(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if s[0] != '/' {
		return nil, fmt.Errorf("pointer %q must be empty or start with /", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		for j := 0; j < len(p); j++ {
			if p[j] == '~' && (j+1 >= len(p) || (p[j+1] != '0' && p[j+1] != '1')) {
				return nil, fmt.Errorf("pointer %q: ~ must be followed by 0 or 1", s)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// applies reports whether the rule applies to records of kind k.
func (c *compiledRule) applies(k journal.Kind) bool {
	if c.kinds == nil {
		return true
	}
	_, ok := c.kinds[k]
	return ok
}

// apply runs the rule on v in place and reports whether it may have
// changed it (the caller compares with the original anyway).
func (c *compiledRule) apply(v *pvalue) bool {
	switch c.action {
	case ruleActionScrub:
		return scrubStrings(v, c.re, c.repl)
	case ActionOmit:
		if len(c.pointer) == 0 {
			if v.kind == pNull {
				return false
			}
			*v = pvalue{kind: pNull}
			return true
		}
		parent := resolveRulePointer(v, c.pointer[:len(c.pointer)-1])
		if parent == nil {
			return false
		}
		last := c.pointer[len(c.pointer)-1]
		switch parent.kind {
		case pObject:
			for i := range parent.obj {
				if parent.obj[i].key == last {
					parent.obj = append(parent.obj[:i], parent.obj[i+1:]...)
					return true
				}
			}
		case pArray:
			if i, ok := rulePointerIndex(last, len(parent.arr)); ok {
				parent.arr = append(parent.arr[:i], parent.arr[i+1:]...)
				return true
			}
		}
		return false
	default: // replace
		target := resolveRulePointer(v, c.pointer)
		if target == nil {
			return false
		}
		*target = c.value.clone()
		return true
	}
}

// resolveRulePointer returns the value designated by tokens, or nil.
func resolveRulePointer(v *pvalue, tokens []string) *pvalue {
	for _, t := range tokens {
		switch v.kind {
		case pObject:
			var next *pvalue
			for i := range v.obj {
				if v.obj[i].key == t {
					next = &v.obj[i].val
					break
				}
			}
			if next == nil {
				return nil
			}
			v = next
		case pArray:
			i, ok := rulePointerIndex(t, len(v.arr))
			if !ok {
				return nil
			}
			v = &v.arr[i]
		default:
			return nil
		}
	}
	return v
}

// rulePointerIndex parses an RFC 6901 array index token ("0" or no leading
// zero) that must be below n.
func rulePointerIndex(t string, n int) (int, bool) {
	if t == "" || (len(t) > 1 && t[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(t)
	if err != nil || i >= n {
		return 0, false
	}
	return i, true
}

// scrubStrings replaces pattern matches in every string value under v.
func scrubStrings(v *pvalue, re *regexp.Regexp, repl string) bool {
	switch v.kind {
	case pString:
		s := v.text()
		out := re.ReplaceAllString(s, repl)
		if out == s {
			return false
		}
		v.setString(out)
		return true
	case pArray:
		changed := false
		for i := range v.arr {
			if scrubStrings(&v.arr[i], re, repl) {
				changed = true
			}
		}
		return changed
	case pObject:
		changed := false
		for i := range v.obj {
			if scrubStrings(&v.obj[i].val, re, repl) {
				changed = true
			}
		}
		return changed
	default:
		return false
	}
}

// AutoRedactJSON applies the automatic redaction of exports (REFERENCE
// §5.5) to one JSON document and returns it: doc itself when nothing
// changed, else the canonical text of the redacted value. A document that
// might hold a credential but does not parse, or whose redacted value
// cannot be written canonically, is refused with an error: the caller
// must not use it (fail closed). The
// runtime applies it to the content its traces capture (issue 24).
func AutoRedactJSON(doc []byte) ([]byte, error) {
	if !mightRedact(doc, 0) {
		return doc, nil
	}
	v, err := parsePayload(doc)
	if err != nil {
		return nil, fmt.Errorf("auto-redact: %w", err)
	}
	if !autoRedact(&v) {
		return doc, nil
	}
	out, err := journal.AppendCanonical(nil, v.appendJSON(nil))
	if err != nil {
		return nil, fmt.Errorf("auto-redact: %w", err)
	}
	return out, nil
}
