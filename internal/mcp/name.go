package mcp

import (
	"maps"
	"slices"
	"strings"
)

// maxNameChars is where a registered name is cut.
const maxNameChars = 128

// sanitize is the reference's _sanitize_tool_name: every character (code
// point) outside [a-zA-Z0-9_-] becomes "_", runs of "_" collapse to one,
// leading and trailing "_" and "-" are stripped, and the result is cut at
// 128 characters (all ASCII by then).
func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	prevUnderscore := false
	for _, r := range s {
		ok := r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			r = '_'
		}
		if r == '_' && prevUnderscore {
			continue
		}
		prevUnderscore = r == '_'
		b.WriteRune(r)
	}
	out := strings.Trim(b.String(), "_-")
	if len(out) > maxNameChars {
		out = out[:maxNameChars]
	}
	return out
}

// RegisteredName is the name a model calls an MCP tool by, as the
// reference's _registered_name: server and tool are sanitized, and the
// result is "<server>_<tool>" (sanitized again) unless the sanitized tool
// name already starts with the sanitized server name.
func RegisteredName(server, toolName string) string {
	s, t := sanitize(server), sanitize(toolName)
	if strings.HasPrefix(t, s) {
		return t
	}
	return sanitize(s + "_" + t)
}

// sortedKeys returns the keys of m in order (for stable messages).
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
