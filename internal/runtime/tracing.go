package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/hxbundle"
	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/runtime/rtstore"
)

// This file holds the OpenTelemetry spans of runs (issue 24), after the
// GenAI semantic conventions: invoke_agent per run attempt (a start or a
// resume), chat per model attempt, execute_tool per tool attempt,
// hxd.commit per boundary commit and hxd.export per export. Tracing off
// (a nil *Tracing) costs a nil check: no span, no attribute, no
// allocation. Attributes are built only for a span that records (a
// sampled one).

// TracerName is the instrumentation scope of the runtime's spans.
const TracerName = "hxd/internal/runtime"

// hxd's own span attributes (issue 24); the GenAI ones are semconv's.
const (
	AttrSessionID    = attribute.Key("hxd.session_id")
	AttrRunID        = attribute.Key("hxd.run_id")
	AttrAttempt      = attribute.Key("hxd.attempt")
	AttrReplayPolicy = attribute.Key("hxd.replay_policy")
	AttrToolOutcome  = attribute.Key("hxd.tool.outcome")
	AttrCommitKinds  = attribute.Key("hxd.commit.kinds")
	// AttrExecutionKey is the tool entry's execution key.
	AttrExecutionKey = attribute.Key("hxd.execution_key")
	// AttrRunStatus is the run's status when its invoke_agent span ends.
	AttrRunStatus = attribute.Key("hxd.run.status")
)

// Span names without their subject.
const (
	SpanInvokeAgent = "invoke_agent"
	SpanChat        = "chat"
	SpanExecuteTool = "execute_tool"
	SpanCommit      = "hxd.commit"
	SpanExport      = "hxd.export"
)

// Tool span outcomes (hxd.tool.outcome).
const (
	ToolOutcomeReturned  = "returned"
	ToolOutcomeFailed    = "failed"
	ToolOutcomeUncertain = "uncertain"
)

// MaxSpanContent bounds the text of one captured content attribute
// (gen_ai.input.messages and the like): longer text is cut at a rune
// boundary at most this many bytes in.
const MaxSpanContent = 16 << 10

// Tracing makes the spans of runs. A nil *Tracing makes none; its methods
// are safe on nil. The local driver and the Temporal activities share it.
type Tracing struct {
	tracer  trace.Tracer
	capture bool
}

// NewTracing returns the tracing of tp, nil (no tracing) when tp is nil.
// captureContent puts prompts, completions and tool payloads into spans
// (gen_ai.input.messages, gen_ai.output.messages,
// gen_ai.tool.call.arguments, gen_ai.tool.call.result), auto-redacted as
// exports are (REFERENCE §5.5) and bounded by MaxSpanContent; off, no
// payload reaches a span.
func NewTracing(tp trace.TracerProvider, captureContent bool) *Tracing {
	if tp == nil {
		return nil
	}
	return &Tracing{tracer: tp.Tracer(TracerName), capture: captureContent}
}

// runAttrs are the attributes every span of a run carries.
func runAttrs(sessionID, runID string) []attribute.KeyValue {
	return []attribute.KeyValue{AttrSessionID.String(SessionIDOf(sessionID)), AttrRunID.String(runID)}
}

// startAgent starts the invoke_agent span of a run attempt: a child of
// the span in ctx or, with newRoot, the root of a new trace; linked to
// the saved context of the run's previous attempt (a W3C traceparent,
// "" for none).
func (t *Tracing) startAgent(ctx context.Context, st *RunState, prev string, newRoot bool) trace.Span {
	if t == nil {
		return nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	if newRoot {
		opts = append(opts, trace.WithNewRoot())
	}
	if sc := parseTraceContext(prev); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	_, span := t.tracer.Start(ctx, SpanInvokeAgent+" "+st.Agent.Name, opts...)
	if span.IsRecording() {
		span.SetAttributes(append(runAttrs(st.SessionID, st.RunID),
			semconv.GenAIOperationNameInvokeAgent,
			semconv.GenAIAgentName(st.Agent.Name),
			semconv.GenAIAgentVersion(st.Agent.Version),
			semconv.GenAIConversationID(SessionIDOf(st.SessionID)),
		)...)
	}
	return span
}

// endAgent ends a run attempt's span with the run's status: an error
// status when the run failed.
func endAgent(span trace.Span, st *RunState) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		span.SetAttributes(AttrRunStatus.String(string(st.Status)))
		if st.Status == StatusFailed {
			typ, msg := "RunFailed", "run failed"
			if st.Error != nil {
				typ, msg = st.Error.Type, st.Error.Message
			}
			span.SetAttributes(semconv.ErrorTypeKey.String(typ))
			span.SetStatus(codes.Error, msg)
		}
	}
	span.End()
}

// traceContextOf is the W3C traceparent of span's context, "" when it
// has none (tracing off).
func traceContextOf(span trace.Span) string {
	if span == nil || !span.SpanContext().IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), span.SpanContext()), carrier)
	return carrier.Get("traceparent")
}

// parseTraceContext reads a saved traceparent; an invalid one (or "")
// gives an invalid span context.
func parseTraceContext(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

// withSpan is ctx carrying span (ctx itself for no span).
func withSpan(ctx context.Context, span trace.Span) context.Context {
	if span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, span)
}

// ChatAttempt names one model attempt for its chat span.
type ChatAttempt struct {
	SessionID, RunID string
	// Provider and Model are the chain model called.
	Provider, Model string
	// Attempt is the run's model attempt of the step (hxd.attempt).
	Attempt int
	// Request is what is sent (content: with capture only).
	Request *model.Request
}

// StartChat starts the chat span of a model attempt as a child of the
// span in ctx and returns ctx carrying it (for the provider's request);
// (ctx, nil) without tracing. opts add start options (links).
func (t *Tracing) StartChat(ctx context.Context, a ChatAttempt, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	name := SpanChat
	if a.Model != "" {
		name += " " + a.Model
	}
	ctx, span := t.tracer.Start(ctx, name, append(opts, trace.WithSpanKind(trace.SpanKindClient))...)
	if span.IsRecording() {
		span.SetAttributes(append(runAttrs(a.SessionID, a.RunID),
			semconv.GenAIOperationNameChat,
			semconv.GenAIProviderNameKey.String(a.Provider),
			semconv.GenAIRequestModel(a.Model),
			AttrAttempt.Int(a.Attempt),
		)...)
		if t.capture && a.Request != nil {
			if a.Request.System != "" {
				t.setContent(span, semconv.GenAISystemInstructionsKey, []otelPart{{Type: "text", Content: a.Request.System}})
			}
			t.setContent(span, semconv.GenAIInputMessagesKey, otelMessages(a.Request.Messages))
		}
	}
	return ctx, span
}

// EndChat ends a chat span: with the response's model, usage and finish
// reason, or an error status (and error.type) when err is set. modelName
// is the requested model; gen_ai.response.model is the one the provider
// named in its reply (resp.Model), else that.
func (t *Tracing) EndChat(span trace.Span, modelName string, resp *model.Response, err error) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		switch {
		case err != nil:
			f := model.AsFailure(err)
			span.SetAttributes(semconv.ErrorTypeKey.String(f.Type))
			span.SetStatus(codes.Error, f.Message)
			if f.Usage != nil {
				span.SetAttributes(semconv.GenAIUsageInputTokens(int(f.Usage.InputTokens)), semconv.GenAIUsageOutputTokens(int(f.Usage.OutputTokens)))
			}
		case resp != nil:
			if resp.Model != "" {
				modelName = resp.Model
			}
			span.SetAttributes(semconv.GenAIResponseModel(modelName))
			if resp.StopReason != "" {
				span.SetAttributes(semconv.GenAIResponseFinishReasons(resp.StopReason))
			}
			if resp.UsageReported {
				span.SetAttributes(semconv.GenAIUsageInputTokens(int(resp.Usage.InputTokens)), semconv.GenAIUsageOutputTokens(int(resp.Usage.OutputTokens)))
			}
			if t.capture {
				t.setContent(span, semconv.GenAIOutputMessagesKey, []otelMessage{responseMessage(resp)})
			}
		}
	}
	span.End()
}

// StartTool starts the execute_tool span of a tool attempt (e.Attempt) as
// a child of the span in ctx and returns ctx carrying it (for the tool's
// calls); (ctx, nil) without tracing. opts add start options (links).
func (t *Tracing) StartTool(ctx context.Context, sessionID, runID string, e *ToolEntry, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, SpanExecuteTool+" "+e.Call.Name, append(opts, trace.WithSpanKind(trace.SpanKindInternal))...)
	if span.IsRecording() {
		span.SetAttributes(append(runAttrs(sessionID, runID),
			semconv.GenAIOperationNameExecuteTool,
			semconv.GenAIToolName(e.Call.Name),
			semconv.GenAIToolCallID(e.Call.ID),
			AttrReplayPolicy.String(e.Policy),
			AttrAttempt.Int(e.Attempt),
			AttrExecutionKey.String(e.ExecutionKey),
		)...)
		if t.capture {
			t.setContentJSON(span, semconv.GenAIToolCallArgumentsKey, e.Call.Input)
		}
	}
	return ctx, span
}

// EndTool ends an execute_tool span with its outcome (ToolOutcome*): the
// result of a returned call, an error status (and error.type) for a
// failed or uncertain one with runErr.
func (t *Tracing) EndTool(span trace.Span, outcome string, res *model.ToolResult, runErr *RunError) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		span.SetAttributes(AttrToolOutcome.String(outcome))
		if runErr != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(runErr.Type))
			span.SetStatus(codes.Error, runErr.Message)
		} else if outcome == ToolOutcomeFailed {
			span.SetStatus(codes.Error, "tool call failed")
		}
		if t.capture && res != nil {
			t.setContentJSON(span, semconv.GenAIToolCallResultKey, res.Content)
		}
	}
	span.End()
}

// startCommit starts the hxd.commit span of a boundary holding kinds.
func (t *Tracing) startCommit(ctx context.Context, st *RunState, kinds []journal.Kind) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, SpanCommit, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		seen := make(map[journal.Kind]bool, len(kinds))
		names := make([]string, 0, len(kinds))
		for _, k := range kinds {
			if !seen[k] {
				seen[k] = true
				names = append(names, string(k))
			}
		}
		span.SetAttributes(append(runAttrs(st.SessionID, st.RunID), AttrCommitKinds.StringSlice(names))...)
	}
	return ctx, span
}

// startExport starts the hxd.export span of an export of runID.
func (t *Tracing) startExport(ctx context.Context, runID string) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, SpanExport, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(AttrRunID.String(runID))
	}
	return ctx, span
}

// endSpan ends span, with an error status for err: its errorType, never
// the error's text (which may quote what storage was given).
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && span.IsRecording() {
		typ := errorType(err)
		span.SetAttributes(semconv.ErrorTypeKey.String(typ))
		span.SetStatus(codes.Error, typ)
	}
	span.End()
}

// spanErrorTypes name the errors a commit or an export reports, first
// match wins.
var spanErrorTypes = []struct {
	err error
	typ string
}{
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "timeout"},
	{rtstore.ErrUnavailable, "unavailable"},
	{rtstore.ErrLeaseLost, "lease_lost"},
	{rtstore.ErrSessionBusy, "session_busy"},
	{rtstore.ErrRecordConflict, "record_conflict"},
	{rtstore.ErrForeignRecord, "foreign_record"},
	{rtstore.ErrInvalidCommit, "invalid_commit"},
	{rtstore.ErrNotFound, "not_found"},
	{ErrRecording, "recording"},
}

// errorType is the error.type of err: a stable name for the errors callers
// branch on, else the conventions' "_OTHER".
func errorType(err error) string {
	for _, e := range spanErrorTypes {
		if errors.Is(err, e.err) {
			return e.typ
		}
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// otelPart and otelMessage are the GenAI conventions' message shapes
// (gen_ai.input.messages, gen_ai.output.messages).
type (
	otelPart struct {
		Type      string          `json:"type"`
		Content   string          `json:"content,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Response  json.RawMessage `json:"response,omitempty"`
	}
	otelMessage struct {
		Role         string     `json:"role"`
		Parts        []otelPart `json:"parts"`
		FinishReason string     `json:"finish_reason,omitempty"`
	}
)

func otelParts(blocks []model.ContentBlock) []otelPart {
	parts := make([]otelPart, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case model.BlockText:
			parts = append(parts, otelPart{Type: "text", Content: b.Text})
		case model.BlockThinking:
			parts = append(parts, otelPart{Type: "reasoning", Content: b.Thinking})
		case model.BlockToolUse:
			parts = append(parts, otelPart{Type: "tool_call", ID: b.ID, Name: b.Name, Arguments: b.Input})
		case model.BlockToolResult:
			parts = append(parts, otelPart{Type: "tool_call_response", ID: b.ToolUseID, Response: b.Content})
		default: // redacted thinking, opaque blocks: their type only
			parts = append(parts, otelPart{Type: string(b.Type)})
		}
	}
	return parts
}

func otelMessages(msgs []model.Message) []otelMessage {
	out := make([]otelMessage, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, otelMessage{Role: string(m.Role), Parts: otelParts(m.Content)})
	}
	return out
}

func responseMessage(resp *model.Response) otelMessage {
	m := otelMessage{Role: string(model.RoleAssistant), FinishReason: resp.StopReason}
	if resp.Content != nil {
		m.Parts = otelParts(resp.Content)
		return m
	}
	m.Parts = []otelPart{}
	if resp.Thinking != "" {
		m.Parts = append(m.Parts, otelPart{Type: "reasoning", Content: resp.Thinking})
	}
	if resp.Text != "" {
		m.Parts = append(m.Parts, otelPart{Type: "text", Content: resp.Text})
	}
	for _, c := range resp.ToolCalls {
		m.Parts = append(m.Parts, otelPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: c.Input})
	}
	return m
}

// setContent sets key to the JSON of v, auto-redacted and bounded.
func (t *Tracing) setContent(span trace.Span, key attribute.Key, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		return
	}
	t.setContentJSON(span, key, raw)
}

// setContentJSON sets key to the JSON document raw, auto-redacted as
// exports are and cut at MaxSpanContent bytes. A document the redaction
// refuses is left out (fail closed).
func (t *Tracing) setContentJSON(span trace.Span, key attribute.Key, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	red, err := hxbundle.AutoRedactJSON(raw)
	if err != nil {
		return
	}
	span.SetAttributes(key.String(truncateUTF8(string(red), MaxSpanContent)))
}

// truncateUTF8 cuts s to at most n bytes at a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
