package journal

// MaxInputDepth is the deepest nesting of arrays and objects hxd accepts in
// JSON that comes from outside: request bodies, model tool arguments and
// webhook replies. What hxd stores from them then stays readable by its own
// bundle verifier and the Python reference (about 1,000 levels) and by
// common JSON tools (jq reads 512), with room for the records, events and
// bundles that wrap it.
const MaxInputDepth = 128

// Deeper reports whether the JSON text src nests arrays and objects more
// than limit levels deep (a scalar is 0 levels, [] and {} are 1). It only
// scans, stopping at the first bracket past limit: brackets inside strings
// do not count, and malformed text is left to whatever parses src.
func Deeper(src []byte, limit int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range src {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > limit {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}
