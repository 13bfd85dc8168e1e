package agent

import (
	"regexp"
	"sync"
)

// regexCache holds compiled regex_replace patterns by pattern. Only
// patterns that compile are stored; they come from agent definitions, so
// the cache stays small.
var regexCache sync.Map

// compileRegex compiles pattern once per process.
func compileRegex(pattern string) (*regexp.Regexp, error) {
	if re, ok := regexCache.Load(pattern); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	actual, _ := regexCache.LoadOrStore(pattern, re)
	return actual.(*regexp.Regexp), nil
}

// Apply returns s edited by m: append_text appends its text; regex_replace
// replaces every match of the pattern (RE2 syntax; $1 and ${name} in the
// replacement expand groups). Empty text is left unchanged, as the
// reference only edits text that exists. A pattern that does not compile
// (which Validate refuses at load) leaves s unchanged.
func (m Middleware) Apply(s string) string {
	if s == "" {
		return s
	}
	switch {
	case m.AppendText != nil:
		return s + *m.AppendText
	case m.RegexReplace != nil:
		re, err := compileRegex(m.RegexReplace.Pattern)
		if err != nil {
			return s
		}
		return re.ReplaceAllString(s, m.RegexReplace.Replace)
	}
	return s
}

// ApplyAll applies ms to s in order.
func ApplyAll(ms []Middleware, s string) string {
	for _, m := range ms {
		s = m.Apply(s)
	}
	return s
}
