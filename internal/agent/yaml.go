package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// Agent files are read with YAML 1.2 semantics: go.yaml.in/yaml/v3 parses
// them into a node tree, and yamlToJSON resolves every plain scalar by the
// YAML 1.2 core schema, not by v3's own resolver, which keeps YAML 1.1
// forms (0755 as octal, 1_000, 0b101, timestamps). So yes/no/y/n/on/off
// are strings, only true/false (True, TRUE, …) are booleans, 0755 is 755,
// 1:20 is a string and ~ is null. JSON is YAML 1.2 and reads the same.
//
// The tree is then written as JSON for the strict decoding of load.go.
// Every mapping key must be new in its mapping, merge keys (<<, a YAML
// 1.1 type) are plain keys, and errors name the line but never a value.

// maxExpandedJSON bounds the JSON an agent file may expand to through
// aliases ("billion laughs").
const maxExpandedJSON = 8 * MaxFileBytes

// yamlError is a problem with the YAML of an agent file.
func yamlError(line int, format string, args ...any) *FieldError {
	return &FieldError{Problem: fmt.Sprintf("invalid YAML: line %d: ", line) + fmt.Sprintf(format, args...)}
}

// yamlToJSON converts one YAML 1.2 document to JSON. A file holding no
// document, or only null, is an empty agent file; a second document that
// is not empty is refused.
func yamlToJSON(data []byte) ([]byte, error) {
	if json.Valid(data) {
		data = jsonForYAML(data)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &FieldError{Problem: "empty agent file"}
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.Join(strings.Fields(msg), " ") // one line per problem
		return nil, &FieldError{Problem: "invalid YAML: " + msg, Cause: err}
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) && (err != nil || !emptyDocument(&second)) {
		return nil, &FieldError{Problem: "more than one YAML document (one agent per file)"}
	}
	c := yamlConverter{expanding: map[*yaml.Node]bool{}}
	if err := c.value(&doc); err != nil {
		return nil, err
	}
	if bytes.Equal(c.buf.Bytes(), []byte("null")) {
		return nil, &FieldError{Problem: "empty agent file"}
	}
	return c.buf.Bytes(), nil
}

// emptyDocument reports a document holding nothing or null.
func emptyDocument(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == 0 {
		return true
	}
	s, ok := plainScalar(n)
	return ok && isNull(s)
}

// yamlConverter writes a node tree as JSON.
type yamlConverter struct {
	buf bytes.Buffer
	// expanding holds the anchored nodes whose aliases are being written,
	// to refuse a node that contains an alias of itself.
	expanding map[*yaml.Node]bool
}

func (c *yamlConverter) value(n *yaml.Node) error {
	if c.buf.Len() > maxExpandedJSON {
		return yamlError(n.Line, "the file expands to more than %d bytes through aliases", maxExpandedJSON)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			c.buf.WriteString("null")
			return nil
		}
		return c.value(n.Content[0])
	case yaml.AliasNode:
		if c.expanding[n.Alias] {
			return yamlError(n.Line, "alias *%s refers to a node that contains it", n.Value)
		}
		c.expanding[n.Alias] = true
		defer delete(c.expanding, n.Alias)
		return c.value(n.Alias)
	case yaml.MappingNode:
		if err := explicitTag(n, "!!map"); err != nil {
			return err
		}
		return c.mapping(n)
	case yaml.SequenceNode:
		if err := explicitTag(n, "!!seq"); err != nil {
			return err
		}
		c.buf.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				c.buf.WriteByte(',')
			}
			if err := c.value(item); err != nil {
				return err
			}
		}
		c.buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return yamlError(n.Line, "unexpected node")
}

func (c *yamlConverter) mapping(n *yaml.Node) error {
	seen := make(map[string]bool, len(n.Content)/2)
	c.buf.WriteByte('{')
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := mappingKey(n.Content[i])
		if err != nil {
			return err
		}
		if seen[k] {
			return yamlError(n.Content[i].Line, "key %s already set in map", quoteKey(k))
		}
		seen[k] = true
		if i > 0 {
			c.buf.WriteByte(',')
		}
		writeJSONString(&c.buf, k)
		c.buf.WriteByte(':')
		if err := c.value(n.Content[i+1]); err != nil {
			return err
		}
	}
	c.buf.WriteByte('}')
	return nil
}

// mappingKey is the JSON key of a mapping key node: the text of a scalar
// (an alias of one included), whatever it resolves to. Keys are compared
// by that text, as JSON keys.
func mappingKey(k *yaml.Node) (string, error) {
	line := k.Line
	if k.Kind == yaml.AliasNode {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		return "", yamlError(line, "a mapping key must be a scalar")
	}
	if k.Style&yaml.TaggedStyle != 0 && k.ShortTag() != "!!str" {
		return "", yamlError(line, "a mapping key must be a string")
	}
	return k.Value, nil
}

// quoteKey quotes a key for a message, shortened.
func quoteKey(k string) string {
	if utf8.RuneCountInString(k) > 64 {
		k = string([]rune(k)[:64]) + "…"
	}
	return strconv.Quote(k)
}

// explicitTag accepts a node without an explicit tag or with the one its
// kind allows.
func explicitTag(n *yaml.Node, allowed ...string) error {
	if n.Style&yaml.TaggedStyle == 0 {
		return nil
	}
	tag := n.ShortTag()
	for _, a := range allowed {
		if tag == a {
			return nil
		}
	}
	return yamlError(n.Line, "tag %s is not supported here", quoteKey(tag))
}

// plainScalar returns the text of a plain scalar without an explicit tag:
// the only kind the core schema resolves.
func plainScalar(n *yaml.Node) (string, bool) {
	const quoted = yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle | yaml.TaggedStyle
	if n.Kind != yaml.ScalarNode || n.Style&quoted != 0 {
		return "", false
	}
	return n.Value, true
}

// The YAML 1.2 core schema (YAML 1.2.2 §10.3.2).
var (
	coreInt   = regexp.MustCompile(`^[-+]?[0-9]+$`)
	coreOct   = regexp.MustCompile(`^0o[0-7]+$`)
	coreHex   = regexp.MustCompile(`^0x[0-9a-fA-F]+$`)
	coreFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
)

func isNull(s string) bool {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return true
	}
	return false
}

func isInfNaN(s string) bool {
	switch strings.TrimLeft(s, "+-") {
	case ".inf", ".Inf", ".INF":
		return true
	}
	switch s {
	case ".nan", ".NaN", ".NAN":
		return true
	}
	return false
}

// scalar writes a scalar: a plain one resolved by the core schema, a
// quoted or block one as a string, an explicitly tagged one as its tag
// says.
func (c *yamlConverter) scalar(n *yaml.Node) error {
	if s, ok := plainScalar(n); ok {
		return c.resolved(n, s, "")
	}
	if n.Style&yaml.TaggedStyle == 0 {
		writeJSONString(&c.buf, n.Value)
		return nil
	}
	switch tag := n.ShortTag(); tag {
	case "!!str":
		writeJSONString(&c.buf, n.Value)
		return nil
	case "!!null", "!!bool", "!!int", "!!float":
		return c.resolved(n, n.Value, tag)
	default:
		return explicitTag(n)
	}
}

// resolved writes s as the core schema resolves it; with want set (an
// explicit tag), s must resolve to that type (an integer passes as a
// float).
func (c *yamlConverter) resolved(n *yaml.Node, s, want string) error {
	got, lit := "!!str", ""
	switch {
	case isNull(s):
		got, lit = "!!null", "null"
	case s == "true" || s == "True" || s == "TRUE":
		got, lit = "!!bool", "true"
	case s == "false" || s == "False" || s == "FALSE":
		got, lit = "!!bool", "false"
	case isInfNaN(s):
		return yamlError(n.Line, "infinity and NaN cannot be written in JSON; use a finite number")
	case coreInt.MatchString(s):
		got, lit = "!!int", intLiteral(s, 10)
	case coreOct.MatchString(s):
		got, lit = "!!int", intLiteral(s[2:], 8)
	case coreHex.MatchString(s):
		got, lit = "!!int", intLiteral(s[2:], 16)
	case coreFloat.MatchString(s):
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return yamlError(n.Line, "number out of the range of a 64-bit float")
		}
		got, lit = "!!float", floatLiteral(s)
	}
	if want != "" && want != got && (want != "!!float" || got != "!!int") {
		return yamlError(n.Line, "the value is not of its tag's type %s", want)
	}
	if got == "!!str" {
		writeJSONString(&c.buf, s)
		return nil
	}
	c.buf.WriteString(lit)
	return nil
}

// intLiteral is the decimal JSON literal of a core schema integer.
func intLiteral(s string, base int) string {
	i, _ := new(big.Int).SetString(strings.TrimPrefix(s, "+"), base)
	return i.String()
}

// floatLiteral rewrites a core schema float (".5", "1.", "+1e3", "007.5")
// as a JSON number literal, keeping its digits.
func floatLiteral(s string) string {
	sign := ""
	switch s[0] {
	case '-':
		sign, s = "-", s[1:]
	case '+':
		s = s[1:]
	}
	mant, exp := s, ""
	if k := strings.IndexAny(s, "eE"); k >= 0 {
		mant, exp = s[:k], s[k:]
	}
	whole, frac, dot := strings.Cut(mant, ".")
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	if dot && frac == "" {
		frac = "0"
	}
	if dot {
		return sign + whole + "." + frac + exp
	}
	return sign + whole + exp
}

// writeJSONString writes s as a JSON string (HTML characters as is).
func writeJSONString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.Truncate(buf.Len() - 1)
}

// jsonForYAML rewrites the string escapes of a valid JSON text that YAML
// does not read: "\/" becomes "/", a surrogate pair escape "\ud83d\ude00"
// becomes "\U0001f600" and a lone surrogate escape "\ufffd" (what
// encoding/json decodes it to). Nothing else changes, so line numbers
// stay those of the file.
func jsonForYAML(data []byte) []byte {
	if !bytes.Contains(data, []byte(`\/`)) && !bytes.Contains(data, []byte(`\u`)) {
		return data
	}
	out := make([]byte, 0, len(data))
	inString := false
	for i := 0; i < len(data); i++ {
		ch := data[i]
		if !inString {
			inString = ch == '"'
			out = append(out, ch)
			continue
		}
		switch ch {
		case '"':
			inString = false
			out = append(out, ch)
		case '\\':
			switch data[i+1] {
			case '/':
				out = append(out, '/')
				i++
			case 'u':
				r := hex4(data[i+2 : i+6])
				n := 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
						r2 = hex4(data[i+8 : i+12])
					}
					if c := utf16.DecodeRune(r, r2); c != utf8.RuneError {
						r, n = c, 12
					} else {
						r = utf8.RuneError
					}
				}
				if r > 0xffff {
					out = fmt.Appendf(out, `\U%08x`, r)
				} else {
					out = fmt.Appendf(out, `\u%04x`, r)
				}
				i += n - 1
			default:
				out = append(out, ch, data[i+1])
				i++
			}
		default:
			out = append(out, ch)
		}
	}
	return out
}

// hex4 is the value of four hex digits (valid: the text is valid JSON).
func hex4(b []byte) rune {
	v, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(v)
}
