package hxbundle

import (
	"errors"
	"slices"
	"strconv"

	"hxd/internal/journal"
)

// The strict loader of REFERENCE §7.3 item 8 is journal's parser in its
// Python mode (journal.Doc.ParsePython): json.loads with a pairs hook that
// rejects duplicate keys and a constant hook that rejects
// NaN/Infinity/-Infinity, failing where json.loads fails, in the order
// CPython's scanner meets the errors. This file maps its errors to the
// reference's messages and reads its values (Python's dict.get,
// isinstance, type(x) is int, ==).
//
// What json.loads accepts but hxd refuses (DESIGN §8: input a conforming
// writer never produces) is parsed as Python reads it and noted, for the
// verifier to refuse once the reference's own checks have passed, so
// that a bundle the reference rejects gets the reference's message
// (strictOnly):
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

// maxJSONDepth bounds the nesting of arrays and objects ((RecursionError)
// beyond).
const maxJSONDepth = journal.PythonMaxDepth

// maxIntDigits is CPython's default int_max_str_digits: int() and
// json.loads raise ValueError on an integer literal with more digits.
const maxIntDigits = 4300

// The strict loader's own messages.
const (
	msgDuplicateKey = "Duplicate JSON key"
	msgNonFinite    = "Non-finite JSON number"
)

// jsonKind is the type of a parsed JSON value, as the checks see it
// (integers and floats are both numbers; jv.isInt tells them apart).
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

// jsonError is a parse failure: the rejection message and where it was
// found (never the content).
type jsonError struct {
	msg string
	why string
	off int
}

func genericJSON(class, why string, off int) *jsonError {
	return &jsonError{msg: generic(class), why: why, off: off}
}

func syntaxError(why string, off int) *jsonError {
	return genericJSON(pyJSONDecodeError, why, off)
}

// jsonFailure is the reference's message for a ParsePython error.
func jsonFailure(err error) *jsonError {
	var se *journal.SyntaxError
	if !errors.As(err, &se) {
		return syntaxError(err.Error(), 0) // unreachable: the parser returns *SyntaxError
	}
	e := &jsonError{why: se.Why, off: se.Offset}
	switch {
	case errors.Is(err, journal.ErrDuplicateKey):
		e.msg = msgDuplicateKey
	case errors.Is(err, journal.ErrNonFinite):
		e.msg = msgNonFinite
	case errors.Is(err, journal.ErrTooDeep):
		e.msg = generic(pyRecursionError)
	case errors.Is(err, journal.ErrInvalidText):
		e.msg = generic(pyUnicodeDecodeError)
	case errors.Is(err, journal.ErrIntTooLong), errors.Is(err, journal.ErrTooLarge):
		e.msg = generic(pyValueError)
	default:
		e.msg = generic(pyJSONDecodeError)
	}
	return e
}

// jsonDoc is a text parsed by the strict loader, with what the parser
// noted about it. The zero value is ready to use; parse reuses its
// memory.
type jsonDoc struct {
	doc journal.Doc
	// src is the decoded text: the input, without its BOM, or UTF-16/32
	// input decoded (as WTF-8: lone surrogates kept).
	src []byte
	// base is the offset of src in the input (3 after a UTF-8 BOM).
	base int
	// encoding is the encoding detected when it is not plain UTF-8.
	encoding string
	// overflow and rawSurrogate are 1 + the offset in src of the first
	// float literal that overflows float64 and of the first UTF-8-encoded
	// surrogate, or 0.
	overflow, rawSurrogate int
	// surrogate reports a lone surrogate anywhere in the text: an escape,
	// or a UTF-8-encoded one.
	surrogate bool
	// codeEscape reports a \uXXXX or \/ escape anywhere in the text: the
	// escapes that can spell or hide part of an artifact reference.
	codeEscape bool
}

// parse parses src, which must stay unmodified while the document is used.
func (d *jsonDoc) parse(src []byte) *jsonError {
	err := d.doc.ParsePython(src)
	d.src, d.base, d.encoding = d.doc.Text(), d.doc.TextOffset(), d.doc.Encoding()
	d.overflow, d.rawSurrogate = d.doc.OverflowAt()+1, d.doc.RawSurrogateAt()+1
	d.surrogate, d.codeEscape = d.doc.HasLoneSurrogate(), d.doc.HasCodeEscape()
	if err != nil {
		return jsonFailure(err)
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
func (d *jsonDoc) root() jv { return jv{d.doc.Root()} }

// jv is a value of a parsed document; the zero jv is an absent value
// (what Python's dict.get returns as None for a missing key, kept
// distinct here).
type jv struct{ v journal.Value }

var absent = jv{}

func (v jv) exists() bool { return v.v.Exists() }

// kind is the value's type; an absent value reports jsonNull.
func (v jv) kind() jsonKind {
	switch v.v.Kind() {
	case journal.JSONFalse:
		return jsonFalse
	case journal.JSONTrue:
		return jsonTrue
	case journal.JSONInt, journal.JSONFloat:
		return jsonNumber
	case journal.JSONString:
		return jsonString
	case journal.JSONArray:
		return jsonArray
	case journal.JSONObject:
		return jsonObject
	}
	return jsonNull
}

func (v jv) isObject() bool { return v.v.Kind() == journal.JSONObject }
func (v jv) isArray() bool  { return v.v.Kind() == journal.JSONArray }
func (v jv) isString() bool { return v.v.Kind() == journal.JSONString }

// isNone is Python's "is None": null or absent.
func (v jv) isNone() bool { return v.v.Kind() == journal.JSONNull }

// raw is the source text of the value (strings without their quotes).
func (v jv) raw() []byte { return v.v.Raw() }

// escaped reports a string holding a backslash escape.
func (v jv) escaped() bool { return v.v.Escaped() }

// appendText appends a string's decoded content (WTF-8).
func (v jv) appendText(dst []byte) []byte { return v.v.AppendText(dst) }

// get is dict.get on an object; anything else, or a missing key, gives
// absent.
func (v jv) get(key string) jv { return jv{v.v.Get(key)} }

// has reports whether an object has the key.
func (v jv) has(key string) bool { return v.get(key).exists() }

// isStr reports whether the value is the string s.
func (v jv) isStr(s string) bool { return v.v.TextEquals(s) }

// str returns a string value decoded (WTF-8).
func (v jv) str() (string, bool) {
	if !v.isString() {
		return "", false
	}
	if !v.escaped() {
		return string(v.raw()), true
	}
	return string(v.appendText(nil)), true
}

// strIn reports whether the value is one of the strings.
func (v jv) strIn(set ...string) bool {
	return v.isString() && slices.ContainsFunc(set, v.v.TextEquals)
}

// isInt is Python's type(x) is int: an integer literal (not a float, not
// a boolean).
func (v jv) isInt() bool { return v.v.Kind() == journal.JSONInt }

// intEquals reports whether the value is an integer literal equal to n.
func (v jv) intEquals(n int64) bool {
	got, ok := v.int64()
	return ok && got == n
}

// int64 is the value of an integer literal that fits an int64 ("-0" is 0).
func (v jv) int64() (int64, bool) {
	if !v.isInt() {
		return 0, false
	}
	got, err := strconv.ParseInt(string(v.raw()), 10, 64)
	return got, err == nil
}

// elems calls fn for each element of an array.
func (v jv) elems(fn func(jv) bool) {
	for e := range v.v.Elems() {
		if !fn(jv{e}) {
			return
		}
	}
}

// members calls fn for each key and value of an object, in document
// order.
func (v jv) members(fn func(key jv, val jv) bool) {
	for k, e := range v.v.Members() {
		if !fn(jv{k}, jv{e}) {
			return
		}
	}
}

// length is len() of an array or object (its elements or keys).
func (v jv) length() int { return v.v.Len() }
