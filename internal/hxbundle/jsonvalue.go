package hxbundle

import (
	"slices"
	"strconv"
)

// Reading parsed JSON: a jv is one value of a jsonDoc, with the accessors
// the checks use (Python's dict.get, isinstance, type(x) is int, ==).

// jv is a value of a parsed document; i < 0 is an absent value (what
// Python's dict.get returns as None for a missing key, kept distinct here).
type jv struct {
	d *jsonDoc
	i int
}

var absent = jv{i: -1}

func (v jv) exists() bool { return v.i >= 0 }

func (v jv) node() *jsonNode { return &v.d.nodes[v.i] }

// kind is the value's type; an absent value reports jsonNull.
func (v jv) kind() jsonKind {
	if v.i < 0 {
		return jsonNull
	}
	return v.d.nodes[v.i].kind
}

func (v jv) isObject() bool { return v.kind() == jsonObject }
func (v jv) isArray() bool  { return v.kind() == jsonArray }
func (v jv) isString() bool { return v.kind() == jsonString }

// isNone is Python's "is None": null or absent.
func (v jv) isNone() bool { return v.kind() == jsonNull }

// raw is the source text of the value (strings without their quotes).
func (v jv) raw() []byte {
	n := v.node()
	switch n.kind {
	case jsonArray, jsonObject:
		return v.d.src[n.start : n.end+1]
	}
	return v.d.src[n.start:n.end]
}

// get is dict.get on an object; anything else, or a missing key, gives
// absent.
func (v jv) get(key string) jv {
	if v.kind() != jsonObject {
		return absent
	}
	d := v.d
	for j := v.i + 1; j < int(d.nodes[v.i].next); j = int(d.nodes[j+1].next) {
		if d.strEquals(j, key) {
			return jv{d: d, i: j + 1}
		}
	}
	return absent
}

// has reports whether an object has the key.
func (v jv) has(key string) bool { return v.get(key).exists() }

// strEquals reports whether string node i decodes to s.
func (d *jsonDoc) strEquals(i int, s string) bool {
	n := &d.nodes[i]
	raw := d.src[n.start:n.end]
	if n.flags&flagEscaped == 0 {
		return string(raw) == s
	}
	if len(raw) < len(s) { // escapes only make the source longer
		return false
	}
	d.bufB = d.appendString(d.bufB[:0], i)
	return string(d.bufB) == s
}

// isStr reports whether the value is the string s.
func (v jv) isStr(s string) bool {
	return v.kind() == jsonString && v.d.strEquals(v.i, s)
}

// str returns a string value decoded (WTF-8).
func (v jv) str() (string, bool) {
	if v.kind() != jsonString {
		return "", false
	}
	n := v.node()
	if n.flags&flagEscaped == 0 {
		return string(v.d.src[n.start:n.end]), true
	}
	return string(v.d.appendString(nil, v.i)), true
}

// strIn reports whether the value is one of the strings.
func (v jv) strIn(set ...string) bool {
	if v.kind() != jsonString {
		return false
	}
	return slices.ContainsFunc(set, func(s string) bool { return v.d.strEquals(v.i, s) })
}

// isInt is Python's type(x) is int: an integer literal (not a float, not
// a boolean).
func (v jv) isInt() bool {
	return v.kind() == jsonNumber && v.node().flags&flagInt != 0
}

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
	if v.kind() != jsonArray {
		return
	}
	d := v.d
	for j := v.i + 1; j < int(d.nodes[v.i].next); j = int(d.nodes[j].next) {
		if !fn(jv{d: d, i: j}) {
			return
		}
	}
}

// members calls fn for each key (node index) and value of an object, in
// document order.
func (v jv) members(fn func(key jv, val jv) bool) {
	if v.kind() != jsonObject {
		return
	}
	d := v.d
	for j := v.i + 1; j < int(d.nodes[v.i].next); j = int(d.nodes[j+1].next) {
		if !fn(jv{d: d, i: j}, jv{d: d, i: j + 1}) {
			return
		}
	}
}

// length is len() of an array or object (its elements or keys).
func (v jv) length() int {
	n := 0
	switch v.kind() {
	case jsonArray:
		v.elems(func(jv) bool { n++; return true })
	case jsonObject:
		v.members(func(jv, jv) bool { n++; return true })
	}
	return n
}
