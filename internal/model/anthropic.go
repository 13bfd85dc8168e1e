package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
)

// DefaultAnthropicBaseURL is used when Config.BaseURL is empty for
// provider anthropic.
const DefaultAnthropicBaseURL = "https://api.anthropic.com/"

// Anthropic is the provider of `provider: anthropic`: the Messages API
// through the official SDK, always streamed (`stream: true`) and
// accumulated into one reply. It does not retry: the SDK's own retries are
// disabled so that every HTTP request is one hxd attempt. Only Config
// configures it (base_url, api_key_env): the SDK's environment defaults
// (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, profiles, …) are never read.
// Safe for concurrent use.
//
// Canonical → Messages conversion:
//
//   - Request.System → system (one text block, omitted when empty);
//   - user text and tool_result blocks → user content blocks in order
//     (a JSON-string tool_result content is sent as its text, any other
//     JSON value compacted), with is_error;
//   - assistant text, tool_use (input as JSON, {} when empty), thinking
//     (thinking + signature), redacted_thinking (data) and opaque blocks
//     (their JSON verbatim) → assistant content blocks in order;
//   - tools → custom tools with their input_schema (an empty schema becomes
//     {"type":"object","properties":{}});
//   - max_tokens, temperature when set, and thinking
//     {type: enabled, budget_tokens} when Config.Thinking is set.
//
// Reply conversion:
//
//   - text blocks → Text (joined in order), thinking blocks → Thinking;
//   - tool_use blocks → ToolCalls, the input assembled from the
//     input_json_delta events; input that does not assemble to a usable
//     JSON object (not JSON, not an object, no canonical form, nested too
//     deep: see parseArguments) fails the call with a retryable
//     ToolArgumentsError, as for openai;
//   - when the reply holds a thinking, redacted_thinking or other native
//     block, Content holds every block in order (thinking with its
//     signature, redacted_thinking with its data, an opaque block as its
//     JSON), to be sent back verbatim as the assistant message;
//   - usage: input_tokens, output_tokens, cache_read_input_tokens and
//     cache_creation_input_tokens from message_start and message_delta;
//     UsageReported when either event carried a usage object;
//   - stop_reason → StopReason. hxd's stop reasons are Anthropic's, so
//     end_turn, tool_use, max_tokens, stop_sequence, pause_turn and refusal
//     are kept as they are (the runtime decides on tool calls, not on the
//     reason); a missing reason becomes tool_use when there are tool calls,
//     else end_turn.
//
// Errors are classified into *Failure as documented on Complete.
type Anthropic struct {
	svc         anthropic.MessageService
	model       string
	maxTokens   int
	temperature *float64
	thinking    int
	timeout     time.Duration
	now         func() time.Time
}

// NewAnthropic builds the Anthropic provider from a validated anthropic
// section. The API key is read once, here, through
// opts.LookupEnvFunc(cfg.APIKeyEnv); when api_key_env is set but the
// variable is unset or empty, NewAnthropic returns an error wrapping
// ErrInvalidConfig that names the variable (never a value). Without
// api_key_env no credential is sent (local servers, proxies).
func NewAnthropic(cfg Config, opts Options) (*Anthropic, error) {
	if cfg.Provider != ProviderAnthropic {
		return nil, fmt.Errorf("%w: provider %q is not %q", ErrInvalidConfig, cfg.Provider, ProviderAnthropic)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	baseURL := cfg.BaseURL
	if baseURL == "" {
		baseURL = DefaultAnthropicBaseURL
	}
	key, err := providerKey(cfg, opts)
	if err != nil {
		return nil, err
	}
	reqOpts := []aoption.RequestOption{
		aoption.WithBaseURL(baseURL),
		aoption.WithHTTPClient(providerHTTPClient(opts)),
		aoption.WithMaxRetries(0),
	}
	if key != "" {
		reqOpts = append(reqOpts, aoption.WithAPIKey(key))
	}
	maxTokens, timeout := callLimits(cfg)
	p := &Anthropic{
		// NewMessageService, unlike anthropic.NewClient, applies no
		// environment defaults and no credential chain (STYLE G18).
		svc:       anthropic.NewMessageService(reqOpts...),
		model:     cfg.Model,
		maxTokens: maxTokens,
		timeout:   timeout,
		now:       time.Now,
	}
	if cfg.Temperature != nil {
		t := *cfg.Temperature
		p.temperature = &t
	}
	if cfg.Thinking != nil {
		p.thinking = cfg.Thinking.BudgetTokens
	}
	return p, nil
}

// Complete sends one streamed Messages request (exactly one HTTP request)
// bounded by Config.TimeoutSeconds and accumulates the events into one
// reply. req.Model, req.MaxTokens and req.Temperature override the Config
// values when set.
//
// Errors are *Failure values classified as follows (Failure* constants):
//
//	condition                                          Type                        retryable
//	HTTP 429                                           RateLimitError              yes
//	HTTP 5xx, 529 (overloaded)                         APIStatusError              yes
//	HTTP 401, 403                                      AuthenticationError         no
//	other HTTP 4xx                                     BadRequestError             no
//	in-stream error event (HTTP 200), by its type:
//	  overloaded_error, api_error                      APIStatusError              yes
//	  rate_limit_error                                 RateLimitError              yes
//	  timeout_error                                    TimeoutError                yes
//	  any other type                                   APIStatusError              no
//	  data not JSON                                    APIResponseValidationError  no
//	stream ended without message_stop                  ConnectionError             yes
//	  … holding a line that is no SSE field line       APIResponseValidationError  no
//	per-call timeout (Config.TimeoutSeconds)           TimeoutError                yes
//	transport timeout (net.Error.Timeout)              TimeoutError                yes
//	refused / reset / DNS / EOF / other net error      ConnectionError             yes
//	reply body cut off (read error)                    ConnectionError             yes
//	reply body over MaxReplyBytes (32 MiB)             APIResponseValidationError  no
//	malformed event stream (data not JSON, events
//	out of order)                                      APIResponseValidationError  no
//	tool_use input not a usable JSON object            ToolArgumentsError          yes
//	request not convertible (role, block, schema)      InvalidRequestError         no
//	anything else                                      Error                       no
//
// Status failures carry Status and, when the server sent Retry-After-Ms or
// Retry-After, RetryAfterSeconds. Classification uses the SDK's error type
// (*anthropic.Error: its status and error type) and errors.Is/As, never the
// error text. Messages hold the status and the error type — never the
// provider's free-text message, the request or the API key; the Cause of
// status failures is nil for the same reason.
//
// When ctx itself is done the error is not a Failure: it wraps ctx.Err(),
// so the caller does not retry a cancellation.
func (p *Anthropic) Complete(ctx context.Context, req *Request) (*Response, error) {
	return p.CompleteStream(ctx, req, nil)
}

var _ Streamer = (*Anthropic)(nil)

// CompleteStream is Complete that also passes the answer's pieces to
// onDelta (when not nil) as they arrive, in order: the text of each
// content_block_delta text_delta as a DeltaText, the reasoning of each
// thinking_delta as a DeltaThinking (signature_delta, input_json_delta and
// other deltas are not passed on). A failed call may have delivered some
// deltas before failing. A failure after the provider reported usage
// (message_start, message_delta) carries it in Failure.Usage.
func (p *Anthropic) CompleteStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
	if ctx.Err() != nil {
		return nil, ctxError(ctx)
	}
	if req == nil {
		return nil, &Failure{Type: FailureInvalidRequest, Message: "nil model request"}
	}
	params, err := p.params(req)
	if err != nil {
		return nil, &Failure{Type: FailureInvalidRequest, Message: err.Error()}
	}
	callCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var seen seenReply
	callOpts := []aoption.RequestOption{aoption.WithMiddleware(seen.anthropicMiddleware)}
	if t := p.temperatureOf(req); t != nil {
		// MessageNewParams has no temperature field in this SDK version
		// (the API deprecates it for newer models); the request still
		// carries it for the models that take it.
		callOpts = append(callOpts, aoption.WithJSONSet("temperature", *t))
	}
	stream := p.svc.NewStreaming(callCtx, params, callOpts...)
	defer func() { _ = stream.Close() }()
	var msg anthropic.Message
	stopped, usageSeen := false, false
	// partial is what the provider reported before a failure, nil when
	// it reported nothing.
	partial := func() *Usage {
		if !usageSeen {
			return nil
		}
		return anthropicUsage(&msg.Usage)
	}
	for stream.Next() {
		ev := stream.Current()
		// Checked before Accumulate, which replaces an input that is not
		// JSON with {} when the block stops.
		if f := badToolInput(&msg, ev); f != nil {
			return nil, withUsage(f, partial())
		}
		if err := msg.Accumulate(ev); err != nil {
			return nil, withUsage(&Failure{Type: FailureResponseValidation, Message: "model server sent an invalid event stream: events out of order", Cause: err}, partial())
		}
		switch ev.Type {
		case "message_start":
			usageSeen = usageSeen || ev.Message.JSON.Usage.Valid()
		case "message_delta":
			usageSeen = usageSeen || ev.JSON.Usage.Valid()
		case "message_stop":
			stopped = true
		case "content_block_delta":
			if onDelta != nil {
				anthropicDelta(ev.Delta, onDelta)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, withUsage(p.classify(ctx, callCtx, err, &seen), partial())
	}
	if ctx.Err() != nil {
		return nil, ctxError(ctx)
	}
	if !stopped {
		if callCtx.Err() != nil {
			return nil, withUsage(p.timeoutFailure(), partial())
		}
		if seen.notEventStream() {
			return nil, withUsage(&Failure{Type: FailureResponseValidation, Message: fmt.Sprintf("model server reply (HTTP %d) is not a valid message event stream", seen.status)}, partial())
		}
		return nil, withUsage(&Failure{Type: FailureConnection, Message: "model server stream ended before message_stop", Retryable: true}, partial())
	}
	resp, err := convertAnthropicMessage(&msg)
	if err != nil {
		return nil, withUsage(err, partial())
	}
	resp.UsageReported = usageSeen
	return resp, nil
}

// anthropicDelta passes the text of a text_delta or the reasoning of a
// thinking_delta on to onDelta; other deltas (signature_delta,
// input_json_delta, citations_delta) and empty pieces are not passed on.
func anthropicDelta(d anthropic.MessageStreamEventUnionDelta, onDelta func(Delta)) {
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			onDelta(Delta{Kind: DeltaText, Text: d.Text})
		}
	case "thinking_delta":
		if d.Thinking != "" {
			onDelta(Delta{Kind: DeltaThinking, Text: d.Thinking})
		}
	}
}

// anthropicUsage maps the Messages usage to hxd's.
func anthropicUsage(u *anthropic.Usage) *Usage {
	return &Usage{
		InputTokens:              u.InputTokens,
		OutputTokens:             u.OutputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
	}
}

// temperatureOf returns the request's temperature, else Config's, else nil.
func (p *Anthropic) temperatureOf(req *Request) *float64 {
	if req.Temperature != nil {
		return req.Temperature
	}
	return p.temperature
}

// badToolInput returns the failure of a tool_use block that ev closes
// (content_block_stop, or message_stop for every block) whose accumulated
// input is not a JSON object, else nil.
func badToolInput(msg *anthropic.Message, ev anthropic.MessageStreamEventUnion) *Failure {
	first, last := 0, len(msg.Content)-1
	switch ev.Type {
	case "content_block_stop":
		if ev.Index < 0 || ev.Index > int64(last) {
			return nil // Accumulate reports the bad index
		}
		first, last = int(ev.Index), int(ev.Index)
	case "message_stop":
	default:
		return nil
	}
	for i := first; i <= last; i++ {
		b := &msg.Content[i]
		if b.Type != string(BlockToolUse) {
			continue
		}
		if _, ok := parseArguments(string(b.Input)); !ok {
			return toolArgumentsFailure(b.Name, b.ID)
		}
	}
	return nil
}

// params converts the canonical request to Messages parameters. Errors name
// the offending message or tool, never its content.
func (p *Anthropic) params(req *Request) (anthropic.MessageNewParams, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = p.maxTokens
	}
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: int64(maxTokens),
	}
	if p.thinking > 0 {
		params.Thinking = anthropic.ThinkingConfigParamOfEnabled(int64(p.thinking))
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for i, m := range req.Messages {
		blocks := make([]anthropic.ContentBlockParamUnion, 0, len(m.Content))
		for j, b := range m.Content {
			block, err := anthropicBlock(m.Role, b)
			if err != nil {
				return params, fmt.Errorf("message %d block %d: %w", i, j, err)
			}
			blocks = append(blocks, block)
		}
		switch m.Role {
		case RoleUser:
			params.Messages = append(params.Messages, anthropic.NewUserMessage(blocks...))
		case RoleAssistant:
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		default:
			return params, fmt.Errorf("message %d: unsupported role %q", i, m.Role)
		}
	}
	for i, t := range req.Tools {
		schema, err := anthropicSchema(t.InputSchema)
		if err != nil {
			return params, fmt.Errorf("tool %d (%q): input_schema: %w", i, t.Name, err)
		}
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	return params, nil
}

// anthropicBlock converts one canonical block of a message of the given role.
func anthropicBlock(role Role, b ContentBlock) (anthropic.ContentBlockParamUnion, error) {
	switch {
	case b.Type == BlockText:
		return anthropic.NewTextBlock(b.Text), nil
	case b.Type == BlockToolResult && role == RoleUser:
		return anthropic.NewToolResultBlock(b.ToolUseID, ToolResultText(b.Content), b.IsError), nil
	case b.Type == BlockToolUse && role == RoleAssistant:
		return anthropic.NewToolUseBlock(b.ID, json.RawMessage(toolArguments(b.Input)), b.Name), nil
	case b.Type == BlockThinking && role == RoleAssistant:
		return anthropic.NewThinkingBlock(b.Signature, b.Thinking), nil
	case b.Type == BlockRedactedThinking && role == RoleAssistant:
		return anthropic.NewRedactedThinkingBlock(b.Data), nil
	case len(b.Raw) > 0 && role == RoleAssistant:
		if !json.Valid(b.Raw) {
			return anthropic.ContentBlockParamUnion{}, fmt.Errorf("opaque block of type %q is not valid JSON", b.Type)
		}
		return param.Override[anthropic.ContentBlockParamUnion](json.RawMessage(b.Raw)), nil
	}
	return anthropic.ContentBlockParamUnion{}, fmt.Errorf("block type %q is not allowed in a%s %s message", b.Type, article(role), role)
}

// article returns "n" before a role starting with a vowel.
func article(r Role) string {
	if r == RoleAssistant {
		return "n"
	}
	return ""
}

// anthropicSchema turns an input_schema into the SDK's schema: properties
// and required into their fields, every other key kept as raw JSON; an
// empty schema becomes an empty object schema.
func anthropicSchema(schema json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	out := anthropic.ToolInputSchemaParam{Properties: map[string]any{}}
	trimmed := bytes.TrimSpace(schema)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return out, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return out, fmt.Errorf("not a JSON object: %w", err)
	}
	for k, v := range fields {
		switch k {
		case "type":
			// Always "object" (constant in the SDK).
		case "properties":
			out.Properties = v
		case "required":
			if err := json.Unmarshal(v, &out.Required); err != nil {
				return out, fmt.Errorf("required: %w", err)
			}
		default:
			if out.ExtraFields == nil {
				out.ExtraFields = map[string]any{}
			}
			out.ExtraFields[k] = v
		}
	}
	return out, nil
}

// convertAnthropicMessage maps an accumulated message to a Response. A
// tool_use input that is not a JSON object fails the call (a retryable
// ToolArgumentsError naming the tool and call id, never the input).
func convertAnthropicMessage(m *anthropic.Message) (*Response, error) {
	resp := &Response{
		Model: string(m.Model),
		Usage: Usage{
			InputTokens:              m.Usage.InputTokens,
			OutputTokens:             m.Usage.OutputTokens,
			CacheReadInputTokens:     m.Usage.CacheReadInputTokens,
			CacheCreationInputTokens: m.Usage.CacheCreationInputTokens,
		},
	}
	native := false
	blocks := make([]ContentBlock, 0, len(m.Content))
	for i := range m.Content {
		b := &m.Content[i]
		switch b.Type {
		case string(BlockText):
			resp.Text += b.Text
			blocks = append(blocks, ContentBlock{Type: BlockText, Text: b.Text})
		case string(BlockThinking):
			native = true
			resp.Thinking += b.Thinking
			blocks = append(blocks, ContentBlock{Type: BlockThinking, Thinking: b.Thinking, Signature: b.Signature})
		case string(BlockRedactedThinking):
			native = true
			blocks = append(blocks, ContentBlock{Type: BlockRedactedThinking, Data: b.Data})
		case string(BlockToolUse):
			input, ok := parseArguments(string(b.Input))
			if !ok {
				return nil, toolArgumentsFailure(b.Name, b.ID)
			}
			call := ToolCall{ID: b.ID, Name: b.Name, Input: input}
			if call.ID == "" {
				call.ID = fmt.Sprintf("call_%d", len(resp.ToolCalls))
			}
			resp.ToolCalls = append(resp.ToolCalls, call)
			blocks = append(blocks, ContentBlock{Type: BlockToolUse, ID: call.ID, Name: call.Name, Input: call.Input})
		default:
			native = true
			raw := b.RawJSON()
			if !json.Valid([]byte(raw)) {
				raw = fmt.Sprintf(`{"type":%q}`, b.Type)
			}
			blocks = append(blocks, ContentBlock{Type: BlockType(b.Type), Raw: json.RawMessage(raw)})
		}
	}
	if native {
		resp.Content = blocks
	}
	resp.StopReason = anthropicStopReason(string(m.StopReason), len(resp.ToolCalls) > 0)
	return resp, nil
}

// anthropicStopReason maps a Messages stop_reason to hxd's stop reason (see
// the Anthropic type comment).
func anthropicStopReason(reason string, hasToolCalls bool) string {
	if reason == "" {
		if hasToolCalls {
			return "tool_use"
		}
		return "end_turn"
	}
	return reason
}
