package tool

import (
	"bytes"
	"encoding/json"

	"hxd/internal/model"
)

// TextContent returns s as tool result content: a JSON string (without
// HTML escaping).
func TextContent(s string) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// ErrorResult returns an error result (is_error true) answering callID
// with msg as text content.
func ErrorResult(callID, msg string) model.ToolResult {
	return model.ToolResult{ToolCallID: callID, Content: TextContent(msg), IsError: true}
}

// textResult returns a successful result answering callID with text content.
func textResult(callID, s string) model.ToolResult {
	return model.ToolResult{ToolCallID: callID, Content: TextContent(s)}
}
