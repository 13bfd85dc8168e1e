package model

import "encoding/json"

// Role of a message in the canonical conversation.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// BlockType names a content block kind (Anthropic-shaped).
type BlockType string

// Block types.
const (
	BlockText       BlockType = "text"
	BlockToolUse    BlockType = "tool_use"
	BlockToolResult BlockType = "tool_result"
	// BlockThinking is a signed extended-thinking block (Anthropic):
	// {type, thinking, signature}.
	BlockThinking BlockType = "thinking"
	// BlockRedactedThinking is an encrypted thinking block (Anthropic):
	// {type, data}.
	BlockRedactedThinking BlockType = "redacted_thinking"
)

// ContentBlock is one block of a message: text, a tool_use (a call the model
// made), a tool_result (the answer to such a call), or a native provider
// block: a signed thinking block, a redacted_thinking block, or any other
// block type a provider returned (an opaque block), which is kept as the
// provider's JSON object in Raw and marshalled back verbatim. Blocks of the
// types above have Raw nil and marshal as the plain struct.
type ContentBlock struct {
	Type BlockType `json:"type"`
	// Text is set for text blocks.
	Text string `json:"text,omitempty"`
	// ID, Name and Input are set for tool_use blocks.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError are set for tool_result blocks.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// Thinking and Signature are set for thinking blocks.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Data is set for redacted_thinking blocks.
	Data string `json:"data,omitempty"`
	// Raw is the whole JSON object of an opaque block (a type not listed
	// above); it is what the block marshals to.
	Raw json.RawMessage `json:"-"`
}

// knownBlock reports whether t is a block type ContentBlock has fields for.
func knownBlock(t BlockType) bool {
	switch t {
	case BlockText, BlockToolUse, BlockToolResult, BlockThinking, BlockRedactedThinking:
		return true
	}
	return false
}

// MarshalJSON implements json.Marshaler: Raw verbatim for an opaque block,
// else the fields.
func (b ContentBlock) MarshalJSON() ([]byte, error) {
	if len(b.Raw) > 0 {
		return b.Raw, nil
	}
	type plain ContentBlock
	return json.Marshal(plain(b))
}

// UnmarshalJSON implements json.Unmarshaler: a block of an unknown type
// keeps its whole object in Raw (and its type in Type).
func (b *ContentBlock) UnmarshalJSON(data []byte) error {
	type plain ContentBlock
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*b = ContentBlock(p)
	if !knownBlock(b.Type) {
		b.Raw = append(json.RawMessage(nil), data...)
	}
	return nil
}

// Message is one turn of the canonical conversation.
type Message struct {
	Role    Role           `json:"role"`
	Content []ContentBlock `json:"content"`
}

// TextMessage returns a message holding one text block.
func TextMessage(role Role, text string) Message {
	return Message{Role: role, Content: []ContentBlock{{Type: BlockText, Text: text}}}
}

// ToolCall is a call the model asked for: {id, name, input}.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ToolResult is the answer to one ToolCall: {tool_call_id, content, is_error}.
// Content is any JSON value (usually a string).
type ToolResult struct {
	ToolCallID string          `json:"tool_call_id"`
	Content    json.RawMessage `json:"content"`
	IsError    bool            `json:"is_error"`
}

// Usage counts tokens: {input_tokens, output_tokens, …}.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + o.InputTokens,
		OutputTokens:             u.OutputTokens + o.OutputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + o.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + o.CacheCreationInputTokens,
	}
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is the persisted model request (the payload of model.started):
// {model, messages, system, tools, max_tokens, temperature, cache}.
type Request struct {
	Model       string     `json:"model"`
	Messages    []Message  `json:"messages"`
	System      string     `json:"system"`
	Tools       []ToolSpec `json:"tools"`
	MaxTokens   int        `json:"max_tokens"`
	Temperature *float64   `json:"temperature"`
	Cache       bool       `json:"cache"`
	// Step is the 1-based model step of the run (state.iterations); scripted
	// providers use it to pick their script entry. Not sent to providers.
	Step int `json:"-"`
	// Attempt is the 1-based attempt number of this call. Not sent.
	Attempt int `json:"-"`
}

// Response is the provider-neutral model response:
// {text, thinking, tool_calls, stop_reason, usage}, plus content (the
// ordered native blocks, REFERENCE §2.4) when the provider returned native
// blocks such as signed thinking.
type Response struct {
	Text       string     `json:"text"`
	Thinking   string     `json:"thinking"`
	ToolCalls  []ToolCall `json:"tool_calls"`
	StopReason string     `json:"stop_reason"`
	Usage      Usage      `json:"usage"`
	// UsageReported is true when the provider's answer carried usage
	// (Usage then holds what it reported, zeros included); false when it
	// sent none. Not serialized: records keep their shape.
	UsageReported bool `json:"-"`
	// Model is the model that answered, as the provider named it in its
	// reply (a dated snapshot of the requested alias, say); "" when it
	// named none. Not serialized: records keep their shape.
	Model string `json:"-"`
	// Content is the reply's blocks in order (text, thinking,
	// redacted_thinking, tool_use, opaque) when it holds a native block
	// that must be sent back verbatim on the next call; nil otherwise.
	Content []ContentBlock `json:"content,omitempty"`
}
