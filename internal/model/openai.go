package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/shared"

	"hxd/internal/journal"
)

// Defaults of the OpenAI provider (Config field comments name the same values).
const (
	// DefaultOpenAIBaseURL is used when Config.BaseURL is empty.
	DefaultOpenAIBaseURL = "https://api.openai.com/v1"
	// DefaultMaxTokens is used when neither the request nor Config sets max_tokens.
	DefaultMaxTokens = 4096
	// DefaultTimeoutSeconds bounds one call when Config.TimeoutSeconds is 0.
	DefaultTimeoutSeconds = 120
)

// OpenAI is the provider of `provider: openai`: the Chat Completions API with
// function tools, against any OpenAI-compatible base_url (OpenAI, vLLM,
// Ollama, LiteLLM, …). It does not retry: the SDK's own retries are disabled
// so that every HTTP request is one hxd attempt with its own attempt number.
// Safe for concurrent use.
//
// Canonical → Chat Completions conversion:
//
//   - Request.System → a leading system message (omitted when empty);
//   - user text blocks → one user message (blocks joined by "\n");
//   - user tool_result blocks → one `tool` message each, with tool_call_id
//     and content (a JSON string is sent as its text, any other JSON value
//     serialized compactly, null/absent as ""); they are emitted before the
//     user text of the same turn, since Chat Completions wants them right
//     after the assistant turn. is_error has no Chat Completions equivalent
//     and is not sent (error results already say so in their text);
//   - assistant text blocks → content, tool_use blocks → tool_calls
//     (type function, arguments = the input as a JSON string, {} when empty);
//   - tools → function tools with input_schema as parameters
//     ({"type":"object","properties":{}} when the schema is empty);
//   - max_tokens → max_tokens (understood by every compatible server;
//     max_completion_tokens is OpenAI-only); temperature when set;
//     Request.Cache is ignored (OpenAI caches prompts automatically).
//
// Reply conversion (first choice only, from the accumulated stream):
//
//   - content → Text (the refusal text when content is empty);
//   - non-standard reasoning_content strings of the deltas (DeepSeek, vLLM),
//     concatenated → Thinking;
//   - tool_calls → ToolCalls; arguments that are a JSON object are kept
//     (compacted), empty or null arguments become {}, and anything else
//     (invalid JSON, a non-object value, no canonical form: see
//     parseArguments) fails the attempt with a retryable
//     ToolArgumentsError (a new sample may be valid); a missing call id
//     becomes "call_<index>";
//   - finish_reason → StopReason: stop → end_turn, tool_calls and
//     function_call → tool_use, length → max_tokens, content_filter →
//     refusal, others verbatim; an empty reason, or "stop" with tool calls
//     (some compatible servers), is end_turn / tool_use depending on
//     whether there are tool calls (the contract's stop_reason table);
//   - usage: completion_tokens → OutputTokens,
//     prompt_tokens_details.cached_tokens → CacheReadInputTokens, and the
//     rest of prompt_tokens → InputTokens (Anthropic's split, so the run's
//     usage means the same for both providers); UsageReported when a chunk
//     (or the plain chat.completion) carried a non-null usage object.
//
// Errors are classified into *Failure as documented on Complete.
type OpenAI struct {
	svc         openai.ChatCompletionService
	model       string
	maxTokens   int
	temperature *float64
	timeout     time.Duration
	now         func() time.Time
}

// NewOpenAI builds the OpenAI provider from a validated openai section. The
// API key is read once, here, through opts.LookupEnvFunc(cfg.APIKeyEnv);
// when api_key_env is set but the variable is unset or empty, NewOpenAI
// returns an error wrapping ErrInvalidConfig that names the variable (never
// a value). Without api_key_env no Authorization header is sent (local
// servers). The SDK never reads OPENAI_* variables itself.
func NewOpenAI(cfg Config, opts Options) (*OpenAI, error) {
	if cfg.Provider != ProviderOpenAI {
		return nil, fmt.Errorf("%w: provider %q is not %q", ErrInvalidConfig, cfg.Provider, ProviderOpenAI)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	baseURL := cfg.BaseURL
	if baseURL == "" {
		baseURL = DefaultOpenAIBaseURL
	}
	key, err := providerKey(cfg, opts)
	if err != nil {
		return nil, err
	}
	reqOpts := []option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithHTTPClient(providerHTTPClient(opts)),
		option.WithMaxRetries(0),
	}
	if key != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(key))
	}
	maxTokens, timeout := callLimits(cfg)
	p := &OpenAI{
		// NewChatCompletionService, unlike openai.NewClient, applies no
		// environment defaults (STYLE G18).
		svc:       openai.NewChatCompletionService(reqOpts...),
		model:     cfg.Model,
		maxTokens: maxTokens,
		timeout:   timeout,
		now:       time.Now,
	}
	if cfg.Temperature != nil {
		t := *cfg.Temperature
		p.temperature = &t
	}
	return p, nil
}

// Complete sends one streamed Chat Completions request (exactly one HTTP
// request, `stream: true` with `stream_options: {include_usage: true}`, so
// usage arrives in the last chunk) bounded by Config.TimeoutSeconds, and
// assembles the chunks with the SDK's ChatCompletionAccumulator (tool calls
// from their deltas). A server that ignores `stream: true` and answers one
// chat.completion JSON object (Content-Type application/json) is read whole
// and converted the same way; no deltas are reported then. req.Model, req.MaxTokens and
// req.Temperature override the Config values when set.
//
// Errors are *Failure values classified as follows (Failure* constants):
//
//	condition                                      Type                        retryable
//	HTTP 429                                       RateLimitError              yes
//	HTTP 408                                       TimeoutError                yes
//	HTTP 409, 5xx                                  APIStatusError              yes
//	HTTP 401, 403                                  AuthenticationError         no
//	other HTTP 4xx                                 BadRequestError             no
//	  … whose error text says "rate limit"         RateLimitError              yes
//	  … "overloaded"                               APIStatusError              yes
//	  … "timed out"                                TimeoutError                yes
//	per-call timeout (Config.TimeoutSeconds)       TimeoutError                yes
//	transport timeout (net.Error.Timeout)          TimeoutError                yes
//	refused / reset / DNS / EOF / other net error  ConnectionError             yes
//	reply body cut off (read error)                ConnectionError             yes
//	stream ending without a finish_reason          ConnectionError             yes
//	  … holding a line that is no SSE field line   APIResponseValidationError  no
//	in-stream error object, by code or type:
//	  … a numeric code 400-599                     as that HTTP status, Status 0
//	  … rate_limit_exceeded, rate_limit_error      RateLimitError              yes
//	  … server_error, api_error, overloaded_error,
//	    service_unavailable, internal_error        APIStatusError              yes
//	  … timeout, timeout_error                     TimeoutError                yes
//	  … anything else                              Error                       no
//	  … data not JSON                              APIResponseValidationError  no
//	2xx reply body over MaxReplyBytes (32 MiB)     APIResponseValidationError  no
//	2xx reply that is not an event stream, or
//	  whose data is not a chunk (malformed SSE)    APIResponseValidationError  no
//	chunk that does not continue the answer        APIResponseValidationError  no
//	2xx stream without choices                     APIResponseValidationError  no
//	tool call arguments not a usable JSON object   ToolArgumentsError          yes
//	request not convertible (role, block, schema)  InvalidRequestError         no
//	anything else (the markers above apply)        Error                       no
//
// Status failures carry Status and, when the server sent Retry-After-Ms or
// Retry-After (seconds or an HTTP date), RetryAfterSeconds — also on 5xx.
// An error reply whose body is not the usual JSON error object (an HTML 502
// from a proxy) is classified by its status all the same. Messages hold the
// status, its text and the provider's error code or type when it is a short
// identifier (e.g. "rate_limit_exceeded") — never the provider's free-text
// message (it may echo parts of the request or a masked key), the request
// payload or the API key. The Cause of status failures is nil for the same
// reason (the SDK error holds the request with its Authorization header);
// the Cause of a per-call timeout is context.DeadlineExceeded.
//
// When ctx itself is done (cancelled, or past its own deadline) the error is
// not a Failure: it wraps ctx.Err() and the ctx's cause, so
// errors.Is(err, context.Canceled) holds and the caller does not retry a
// cancellation.
func (p *OpenAI) Complete(ctx context.Context, req *Request) (*Response, error) {
	return p.CompleteStream(ctx, req, nil)
}

var _ Streamer = (*OpenAI)(nil)

// CompleteStream is Complete that also passes the first choice's pieces to
// onDelta (when not nil) as they arrive, in order: content deltas as
// DeltaText, non-standard reasoning_content deltas as DeltaThinking. The
// concatenation of the text deltas is the Response's Text unless the reply
// is a refusal; that of the thinking deltas is its Thinking. A failed call
// may have delivered some deltas before failing; a failure after a chunk
// carried usage has it in Failure.Usage.
func (p *OpenAI) CompleteStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
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
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	callCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var seen seenReply
	stream := p.svc.NewStreaming(callCtx, params, option.WithMiddleware(seen.middleware))
	defer func() { _ = stream.Close() }()
	var (
		acc       openai.ChatCompletionAccumulator
		thinking  strings.Builder
		chunks    int
		finished  bool
		usageSeen bool
	)
	// partial is what the provider reported before a failure, nil when
	// no chunk carried usage.
	partial := func() *Usage {
		if !usageSeen {
			return nil
		}
		u := openAIUsage(acc.Usage)
		return &u
	}
	for stream.Next() {
		chunk := stream.Current()
		chunks++
		if !acc.AddChunk(chunk) {
			return nil, withUsage(&Failure{Type: FailureResponseValidation, Message: "model stream sent a chunk that does not continue the answer"}, partial())
		}
		usageSeen = usageSeen || chunk.JSON.Usage.Valid()
		for _, choice := range chunk.Choices {
			if choice.Index != 0 {
				continue
			}
			if r := reasoningDelta(choice.Delta); r != "" {
				thinking.WriteString(r)
				if onDelta != nil {
					onDelta(Delta{Kind: DeltaThinking, Text: r})
				}
			}
			if choice.Delta.Content != "" && onDelta != nil {
				onDelta(Delta{Kind: DeltaText, Text: choice.Delta.Content})
			}
			if choice.FinishReason != "" {
				finished = true
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, withUsage(p.classify(ctx, callCtx, err, &seen), partial())
	}
	if ctx.Err() != nil {
		return nil, ctxError(ctx)
	}
	if chunks == 0 && seen.isPlain {
		return p.plainCompletion(ctx, callCtx, &seen)
	}
	if chunks == 0 && !isMediaType(seen.header, "text/event-stream") {
		return nil, &Failure{Type: FailureResponseValidation, Message: fmt.Sprintf("model server reply (HTTP %d) is not a valid chat completion stream", seen.status)}
	}
	if len(acc.Choices) == 0 && chunks > 0 {
		return nil, withUsage(&Failure{Type: FailureResponseValidation, Message: "model reply has no choices"}, partial())
	}
	if !finished && seen.notEventStream() {
		return nil, withUsage(&Failure{Type: FailureResponseValidation, Message: fmt.Sprintf("model server reply (HTTP %d) is not a valid chat completion stream", seen.status)}, partial())
	}
	if !finished {
		return nil, withUsage(&Failure{Type: FailureConnection, Message: "model stream ended before the answer was complete", Retryable: true}, partial())
	}
	resp, err := convertCompletion(&acc.ChatCompletion)
	if err != nil {
		return nil, withUsage(err, partial())
	}
	resp.Thinking = thinking.String()
	resp.UsageReported = usageSeen
	return resp, nil
}

// plainCompletion converts the whole chat.completion JSON object of a server
// that ignored `stream: true` (see seenReply); it was read by the middleware.
func (p *OpenAI) plainCompletion(ctx, callCtx context.Context, seen *seenReply) (*Response, error) {
	if seen.plainErr != nil {
		return nil, p.classify(ctx, callCtx, seen.plainErr, seen)
	}
	var c openai.ChatCompletion
	if err := json.Unmarshal(seen.plain, &c); err != nil {
		return nil, &Failure{Type: FailureResponseValidation, Message: fmt.Sprintf("model server reply (HTTP %d) is not a valid chat completion", seen.status), Cause: err}
	}
	resp, err := convertCompletion(&c)
	if err != nil {
		if c.JSON.Usage.Valid() {
			u := openAIUsage(c.Usage)
			return nil, withUsage(err, &u)
		}
		return nil, err
	}
	resp.Thinking = reasoningContent(c.Choices[0].Message)
	resp.UsageReported = c.JSON.Usage.Valid()
	return resp, nil
}

// params converts the canonical request to Chat Completions parameters.
// Errors name the offending message or tool, never its content.
func (p *OpenAI) params(req *Request) (openai.ChatCompletionNewParams, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = p.maxTokens
	}
	params := openai.ChatCompletionNewParams{
		Model:     shared.ChatModel(model),
		MaxTokens: openai.Int(int64(maxTokens)),
	}
	switch {
	case req.Temperature != nil:
		params.Temperature = openai.Float(*req.Temperature)
	case p.temperature != nil:
		params.Temperature = openai.Float(*p.temperature)
	}
	msgs, err := convertMessages(req.System, req.Messages)
	if err != nil {
		return params, err
	}
	params.Messages = msgs
	for i, t := range req.Tools {
		schema, err := toolParameters(t.InputSchema)
		if err != nil {
			return params, fmt.Errorf("tool %d (%q): input_schema: %w", i, t.Name, err)
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			def.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(def))
	}
	return params, nil
}

// convertMessages maps the system prompt and the canonical messages to Chat
// Completions messages (see the OpenAI type comment). The native blocks
// another provider put in an assistant turn (Anthropic's signed thinking,
// redacted_thinking and opaque blocks: a fallback chain may switch
// provider mid-conversation) have no Chat Completions form and are
// dropped; the turn's text and tool_use blocks are sent.
func convertMessages(system string, messages []Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(messages)+1)
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for i, m := range messages {
		var texts []string
		switch m.Role {
		case RoleUser:
			for j, b := range m.Content {
				switch b.Type {
				case BlockText:
					texts = append(texts, b.Text)
				case BlockToolResult:
					out = append(out, openai.ToolMessage(ToolResultText(b.Content), b.ToolUseID))
				default:
					return nil, fmt.Errorf("message %d block %d: block type %q is not allowed in a user message", i, j, b.Type)
				}
			}
			if len(texts) > 0 || len(m.Content) == 0 {
				out = append(out, openai.UserMessage(strings.Join(texts, "\n")))
			}
		case RoleAssistant:
			var asst openai.ChatCompletionAssistantMessageParam
			for j, b := range m.Content {
				switch b.Type {
				case BlockText:
					texts = append(texts, b.Text)
				case BlockToolUse:
					asst.ToolCalls = append(asst.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
						OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
							ID: b.ID,
							Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
								Name:      b.Name,
								Arguments: toolArguments(b.Input),
							},
						},
					})
				case BlockThinking, BlockRedactedThinking:
					// Another provider's reasoning: dropped (see above).
				default:
					if len(b.Raw) > 0 {
						continue // another provider's opaque block: dropped
					}
					return nil, fmt.Errorf("message %d block %d: block type %q is not allowed in an assistant message", i, j, b.Type)
				}
			}
			if len(texts) > 0 || len(asst.ToolCalls) == 0 {
				asst.Content.OfString = openai.String(strings.Join(texts, "\n"))
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &asst})
		default:
			return nil, fmt.Errorf("message %d: unsupported role %q", i, m.Role)
		}
	}
	return out, nil
}

// ToolResultText renders a tool_result content as text, as an OpenAI
// `tool` message and a tool_result event carry it: a JSON string as its
// text, null or absent as "", any other JSON value compacted (or verbatim
// when it is not valid JSON).
func ToolResultText(content json.RawMessage) string {
	trimmed := bytes.TrimSpace(content)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return ""
	}
	if trimmed[0] == '"' {
		var s string
		if err := json.Unmarshal(trimmed, &s); err == nil {
			return s
		}
	}
	return compactJSON(trimmed)
}

// toolArguments renders a tool_use input as the arguments string: {} when
// empty, otherwise the compacted JSON.
func toolArguments(input json.RawMessage) string {
	trimmed := bytes.TrimSpace(input)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return "{}"
	}
	return compactJSON(trimmed)
}

// compactJSON compacts valid JSON and returns anything else verbatim.
func compactJSON(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// toolParameters turns an input_schema into function parameters; an empty
// schema becomes an empty object schema. Each top-level value is kept as raw
// JSON, so the schema reaches the server byte-for-byte (modulo top-level key
// order and whitespace).
func toolParameters(schema json.RawMessage) (shared.FunctionParameters, error) {
	trimmed := bytes.TrimSpace(schema)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	params := make(shared.FunctionParameters, len(fields))
	for k, v := range fields {
		params[k] = v
	}
	return params, nil
}

// convertCompletion maps the first choice of a completion to a Response.
func convertCompletion(c *openai.ChatCompletion) (*Response, error) {
	if c == nil || len(c.Choices) == 0 {
		return nil, &Failure{Type: FailureResponseValidation, Message: "model reply has no choices"}
	}
	choice := c.Choices[0]
	msg := choice.Message
	resp := &Response{
		Text:  msg.Content,
		Usage: openAIUsage(c.Usage),
		Model: c.Model,
	}
	if resp.Text == "" {
		resp.Text = msg.Refusal
	}
	for i, tc := range msg.ToolCalls {
		name, args := tc.Function.Name, tc.Function.Arguments
		if tc.Type == "custom" {
			name, args = tc.Custom.Name, tc.Custom.Input
		}
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		input, ok := parseArguments(args)
		if !ok {
			return nil, toolArgumentsFailure(name, id)
		}
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: id, Name: name, Input: input})
	}
	resp.StopReason = stopReason(choice.FinishReason, len(resp.ToolCalls) > 0)
	return resp, nil
}

// reasoningContent returns the non-standard reasoning_content string some
// compatible servers put next to content, or "".
func reasoningContent(msg openai.ChatCompletionMessage) string {
	return extraString(msg.JSON.ExtraFields["reasoning_content"])
}

// reasoningDelta returns the non-standard reasoning_content string some
// compatible servers (DeepSeek, vLLM) put next to a delta's content, or "".
func reasoningDelta(delta openai.ChatCompletionChunkChoiceDelta) string {
	return extraString(delta.JSON.ExtraFields["reasoning_content"])
}

// extraString decodes an extra JSON field holding a string, or returns "".
func extraString(f respjson.Field) string {
	var s string
	if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
		return ""
	}
	return s
}

// parseArguments turns a tool call's arguments string into a tool input: a
// JSON object is kept (compacted), and empty or null becomes {}. Anything
// else (invalid JSON, a value that is not an object, an object nested
// deeper than journal.MaxInputDepth, holding bytes that are not UTF-8, or
// without a canonical form: a repeated key, a number beyond float range, a
// lone surrogate) is refused (ok false): the journal exports what it holds
// as canonical JSON, and the caller fails the attempt with
// toolArgumentsFailure.
func parseArguments(args string) (input json.RawMessage, ok bool) {
	trimmed := bytes.TrimSpace([]byte(args))
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage(`{}`), true
	}
	if trimmed[0] == '{' && utf8.Valid(trimmed) && !journal.Deeper(trimmed, journal.MaxInputDepth) && json.Valid(trimmed) && journal.CheckCanonical(trimmed) == nil {
		return json.RawMessage(compactJSON(trimmed)), true
	}
	return nil, false
}

// openAIUsage maps a Chat Completions usage object to Usage: cached prompt
// tokens are cache reads and are not counted again as input tokens.
func openAIUsage(u openai.CompletionUsage) Usage {
	cached := min(max(u.PromptTokensDetails.CachedTokens, 0), u.PromptTokens)
	return Usage{
		InputTokens:          u.PromptTokens - cached,
		OutputTokens:         u.CompletionTokens,
		CacheReadInputTokens: cached,
	}
}

// stopReason maps a Chat Completions finish_reason to a canonical stop reason.
func stopReason(finish string, hasToolCalls bool) string {
	switch finish {
	case "", "stop":
		if hasToolCalls {
			return "tool_use"
		}
		return "end_turn"
	case "tool_calls", "function_call":
		return "tool_use"
	case "length":
		return "max_tokens"
	case "content_filter":
		return "refusal"
	default:
		return finish
	}
}
