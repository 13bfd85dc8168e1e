package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/tool"
)

// transientBodyChars is the reference's bound on the bodies its transient
// rule inspects: longer bodies are real content.
const transientBodyChars = 2000

// transientMarkers are the reference's is_transient_text markers
// (harnessx/providers/retry.py).
var transientMarkers = []string{
	"resource_exhausted", "rate limit", "rate_limit", "overloaded", "unavailable",
	"timeout", "timed out", "temporarily", "connection reset", "server error",
	"too many requests", "service unavailable", "bad gateway", "gateway timeout",
}

// mapResult turns a call result into an Outcome and returns the text the
// transient rule inspects. The rules:
//   - text blocks, in order, joined by "\n" (as the reference's
//     call_tool) become text content; a JSON text stays text;
//   - structuredContent, when present and storable (UTF-8, not nested
//     deeper than journal.MaxInputDepth, with a canonical form), is the
//     content instead (JSON); the text blocks are its serialization;
//   - image and audio blocks, and embedded resources (blob or text),
//     become artifacts (media type and bytes), each mentioned in the text
//     as "[artifact N: image image/png, 123 bytes]";
//   - a resource link is mentioned as "[resource link: URI]";
//   - isError makes an error result.
func mapResult(callID string, res *sdk.CallToolResult) (tool.Outcome, string) {
	var out tool.Outcome
	var parts []string
	addArtifact := func(what, mediaType string, data []byte) {
		if mediaType == "" {
			mediaType = "application/octet-stream"
		}
		out.Artifacts = append(out.Artifacts, tool.Artifact{MediaType: mediaType, Data: data})
		parts = append(parts, fmt.Sprintf("[artifact %d: %s %s, %d bytes]", len(out.Artifacts), what, mediaType, len(data)))
	}
	for _, c := range res.Content {
		switch b := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, b.Text)
		case *sdk.ImageContent:
			addArtifact("image", b.MIMEType, b.Data)
		case *sdk.AudioContent:
			addArtifact("audio", b.MIMEType, b.Data)
		case *sdk.EmbeddedResource:
			if b.Resource == nil {
				continue
			}
			data := b.Resource.Blob
			mt := b.Resource.MIMEType
			if data == nil {
				data = []byte(b.Resource.Text)
				if mt == "" {
					mt = "text/plain"
				}
			}
			addArtifact("resource "+clip(b.Resource.URI, 256), mt, data)
		case *sdk.ResourceLink:
			parts = append(parts, "[resource link: "+clip(b.URI, 256)+"]")
		default:
			parts = append(parts, "[unsupported MCP content]")
		}
	}
	text := strings.Join(parts, "\n")
	content := tool.TextContent(text)
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil && storable(b) {
			content = b
		}
	}
	out.Result = model.ToolResult{ToolCallID: callID, Content: content, IsError: res.IsError}
	return out, text
}

// storable reports JSON the journal can hold: UTF-8, not too deep, with a
// canonical form.
func storable(b []byte) bool {
	return utf8.Valid(b) && !journal.Deeper(b, journal.MaxInputDepth) && journal.CheckCanonical(b) == nil
}

// clip cuts s to n bytes (on a rune boundary).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// isTransientResult is the reference's mcp_result_transient: a result,
// error or not, whose text is short (at most 2000 characters) and either
// a JSON object with an "error", "status" or "code" whose status,
// status_code or code (at its top level or inside an "error" object) is
// the integer 429 or ≥ 500, or whose error message reads as throttling;
// or, for an error result only, a text that reads as throttling
// (isTransientText).
func isTransientResult(text string, isError bool) bool {
	if text == "" || utf8.RuneCountInString(text) > transientBodyChars {
		return false
	}
	stripped := strings.TrimSpace(text)
	if strings.HasPrefix(stripped, "{") {
		var body map[string]json.RawMessage
		if json.Unmarshal([]byte(stripped), &body) == nil && body != nil {
			return transientObject(body)
		}
	}
	return isError && isTransientText(stripped)
}

// transientObject applies the reference's rule to a JSON object body.
func transientObject(body map[string]json.RawMessage) bool {
	rawErr, hasErr := body["error"]
	if hasErr && string(rawErr) == "null" {
		hasErr = false
	}
	_, hasStatus := body["status"]
	_, hasCode := body["code"]
	if !hasErr && !hasStatus && !hasCode {
		return false
	}
	var errObj map[string]json.RawMessage
	if hasErr {
		_ = json.Unmarshal(rawErr, &errObj) // not an object: no nested codes
	}
	for _, key := range []string{"status", "status_code", "code"} {
		for _, holder := range []map[string]json.RawMessage{body, errObj} {
			if v, ok := intValue(holder[key]); ok && (v == 429 || v >= 500) {
				return true
			}
		}
	}
	if !hasErr {
		return false
	}
	var msg string
	if json.Unmarshal(rawErr, &msg) != nil {
		msg = string(rawErr)
	}
	return isTransientText(msg)
}

// intValue returns a JSON integer (Python's int: no fraction, no
// exponent; true and false are 1 and 0, as in Python).
func intValue(raw json.RawMessage) (int64, bool) {
	s := string(raw)
	switch s {
	case "":
		return 0, false
	case "true":
		return 1, true
	case "false":
		return 0, true
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		// Python's ints are unbounded: only the sign matters here.
		if strings.HasPrefix(s, "-") {
			return math.MinInt64, true
		}
		return math.MaxInt64, true
	}
	return v, err == nil
}

// isTransientText is the reference's is_transient_text: the text, lower
// cased, holds a throttling, overload or timeout marker.
func isTransientText(s string) bool {
	lower := strings.ToLower(s)
	for _, m := range transientMarkers {
		if strings.Contains(lower, m) {
			return true
		}
	}
	return false
}
