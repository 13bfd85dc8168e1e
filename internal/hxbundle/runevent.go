package hxbundle

import "math"

// The reference validates the payload of an `event` record with capture
// "present" by building a RunEvent from it (RunEvent.from_dict in
// harnessx/execution.py, with ToolCall, ToolResult, RunResult,
// PendingTool, TokenUsage and ToolRetry from harnessx/types.py). Any
// exception becomes "Invalid incident bundle (<class>)". decodeRunEvent
// reproduces which exception that construction raises, step by step in
// the same order:
//
//	missing "type", "data" (where subscripted), "status", "call",
//	"execution_key", "id", "name"                          → KeyError
//	unknown RunEventType / RunStatus value                 → ValueError
//	a non-mapping where ** unpacks one, an unknown or a
//	missing constructor argument                           → TypeError
//	subscripting a list, string, number or null with a key → TypeError
//	payload type not valid for the event type
//	(string / ToolCall / ToolResult / RunResult / object)  → TypeError
//	ToolResult content not a string or is_error not a bool → TypeError
//	ToolResult tool_call_id ≠ tool_use_id (both truthy)    → ValueError
//	approval/recovery without string execution_key and
//	object call, attempt_reset without an integer attempt,
//	waiting without on ∈ {model, tool} or numeric seconds  → ValueError
//	RunResult error not null and not an object (.get)      → AttributeError
//	RunResult error without string type and message        → ValueError
//	PendingTool status not approval/uncertain, or
//	execution_key not a string                             → ValueError
//	int()/float()/dict() of an unsuitable value            → TypeError or ValueError
//	ToolRetry given a truthy non-object (.items)           → AttributeError
//	ToolRetry field out of range                           → ConfigurationError
//	float() or math.isfinite() of an int beyond float,
//	int() of a float literal beyond float (an infinity)    → OverflowError
//
// (The reference itself does not catch OverflowError: its verify() would
// raise instead of reporting. hxd reports "(OverflowError)".)

// runEventTypes are the RunEventType values (REFERENCE §1.9).
var runEventTypes = []string{
	"text_delta", "text_complete", "thinking_delta", "tool_call_start",
	"tool_call_complete", "tool_result", "turn_complete", "error",
	"approval_required", "recovery_required", "attempt_reset",
	"todos_updated", "waiting", "run_result", "gap",
}

var runStatuses = []string{"running", "paused", "awaiting_input", "completed", "failed", "cancelled"}

var (
	runEventFields  = []string{"type", "data", "session_id", "run_id", "step_id", "attempt_id", "event_id", "cursor"}
	toolCallFields  = []string{"id", "name", "input"}
	toolResultArgs  = []string{"tool_call_id", "content", "is_error", "tool_use_id"}
	runResultFields = []string{"session_id", "run_id", "output", "status", "stop_reason", "usage", "error", "pending", "usage_incomplete"}
	tokenUsageArgs  = []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "thinking_tokens"}
)

// keysWithin reports whether every key of object v is one of names.
func keysWithin(v jv, names []string) bool {
	ok := true
	v.members(func(key, _ jv) bool {
		ok = key.strIn(names...)
		return ok
	})
	return ok
}

// decodeRunEvent returns the exception class RunEvent.from_dict raises on
// the (object) payload p, or "" when it succeeds.
func decodeRunEvent(p jv) string {
	typ := p.get("type")
	if !typ.exists() {
		return pyKeyError
	}
	if !typ.strIn(runEventTypes...) {
		return pyValueError
	}
	t, _ := typ.str()
	data := p.get("data")
	switch t {
	case "tool_call_start", "tool_call_complete":
		if !data.exists() {
			return pyKeyError
		}
		if !data.isObject() || !keysWithin(data, toolCallFields) ||
			!data.has("id") || !data.has("name") || !data.has("input") {
			return pyTypeError
		}
	case "tool_result":
		if !data.exists() {
			return pyKeyError
		}
		if c := toolResultInit(data); c != "" {
			return c
		}
	case "run_result":
		if !data.exists() {
			return pyKeyError
		}
		if c := runResultFromDict(data); c != "" {
			return c
		}
	}
	// cls(**data)
	if !keysWithin(p, runEventFields) || !data.exists() {
		return pyTypeError
	}
	// __post_init__
	switch t {
	case "text_delta", "text_complete", "thinking_delta", "turn_complete", "error":
		if !data.isString() {
			return pyTypeError
		}
	case "tool_call_start", "tool_call_complete", "tool_result", "run_result":
		// converted above
	default:
		if !data.isObject() {
			return pyTypeError
		}
	}
	switch t {
	case "approval_required", "recovery_required":
		if !data.get("execution_key").isString() || !data.get("call").isObject() {
			return pyValueError
		}
	case "attempt_reset":
		if !data.get("attempt").isInt() {
			return pyValueError
		}
	case "waiting":
		if !data.get("on").strIn("model", "tool") {
			return pyValueError
		}
		if !isNumeric(data.get("seconds").kind()) {
			return pyValueError // isinstance(x, (int, float)): bool counts
		}
	}
	return ""
}

// toolResultInit is ToolResult(**data).
func toolResultInit(data jv) string {
	if !data.isObject() || !keysWithin(data, toolResultArgs) {
		return pyTypeError
	}
	callID, useID := data.get("tool_call_id"), data.get("tool_use_id")
	if pyTruthy(callID) && pyTruthy(useID) && !pyEqual(callID, useID) {
		return pyValueError
	}
	content, isError := data.get("content"), data.get("is_error")
	if content.exists() && !content.isString() {
		return pyTypeError
	}
	if isError.exists() && isError.kind() != jsonTrue && isError.kind() != jsonFalse {
		return pyTypeError
	}
	return ""
}

// runResultFromDict is RunResult.from_dict(data).
func runResultFromDict(data jv) string {
	if !data.isObject() {
		return pyTypeError // {**data}
	}
	status := data.get("status")
	if !status.exists() {
		return pyKeyError
	}
	if !status.strIn(runStatuses...) {
		return pyValueError
	}
	if usage := data.get("usage"); usage.exists() {
		if !usage.isObject() || !keysWithin(usage, tokenUsageArgs) {
			return pyTypeError
		}
	}
	if !keysWithin(data, runResultFields) || !data.has("session_id") || !data.has("run_id") {
		return pyTypeError
	}
	// __post_init__
	if e := data.get("error"); !e.isNone() {
		if !e.isObject() {
			return pyAttributeError
		}
		if !e.get("type").isString() || !e.get("message").isString() {
			return pyValueError
		}
	}
	pending := data.get("pending")
	if !pending.exists() {
		return ""
	}
	switch pending.kind() {
	case jsonNull, jsonTrue, jsonFalse, jsonNumber:
		return pyTypeError // not iterable
	case jsonString, jsonObject:
		if pending.length() > 0 || (pending.isString() && len(pending.raw()) > 0) {
			return pyTypeError // PendingTool.from_dict(<str>): str["call"]
		}
		return ""
	}
	class := ""
	pending.elems(func(item jv) bool {
		class = pendingFromDict(item)
		return class == ""
	})
	return class
}

// subscript is x[key] on a decoded value: a missing key of an object is a
// KeyError, subscripting anything else with a string a TypeError.
func subscript(x jv, key string) (jv, string) {
	if !x.isObject() {
		return absent, pyTypeError
	}
	v := x.get(key)
	if !v.exists() {
		return absent, pyKeyError
	}
	return v, ""
}

// pendingFromDict is PendingTool.from_dict(item) followed by the
// dataclass's __post_init__.
func pendingFromDict(item jv) string {
	call, c := subscript(item, "call")
	if c != "" {
		return c
	}
	executionKey, c := subscript(item, "execution_key")
	if c != "" {
		return c
	}
	if _, c = subscript(call, "id"); c != "" {
		return c
	}
	if _, c = subscript(call, "name"); c != "" {
		return c
	}
	if input := call.get("input"); pyTruthy(input) {
		if c = pyDictCall(input); c != "" {
			return c
		}
	}
	status, c := subscript(item, "status")
	if c != "" {
		return c
	}
	if attempt := item.get("attempt"); attempt.exists() {
		if c = pyIntCall(attempt); c != "" {
			return c
		}
	}
	timeout := item.get("timeout")
	if !timeout.exists() {
		timeout = item.get("timeout_seconds")
	}
	if timeout.exists() {
		if c = pyFloatCall(timeout); c != "" {
			return c
		}
	}
	if retry := item.get("retry"); pyTruthy(retry) {
		if c = toolRetryFromDict(retry); c != "" {
			return c
		}
	}
	if !status.strIn("approval", "uncertain") || !executionKey.isString() {
		return pyValueError
	}
	return ""
}

// toolRetryFromDict is ToolRetry.from_dict(data) for a truthy data.
func toolRetryFromDict(data jv) string {
	if !data.isObject() {
		return pyAttributeError // data.items()
	}
	if a := data.get("attempts"); a.exists() {
		if !a.isInt() || toNumber(a).i.Sign() <= 0 {
			return pyConfigurationError
		}
	}
	// backoff_seconds: None or a finite number >= 0.
	if b := data.get("backoff_seconds"); b.exists() && !b.isNone() {
		if c := nonNegativeNumber(b, false); c != "" {
			return c
		}
	}
	// max_backoff_seconds: a finite number > 0.
	if m := data.get("max_backoff_seconds"); m.exists() {
		if c := nonNegativeNumber(m, true); c != "" {
			return c
		}
	}
	if r := data.get("retry_error_results"); r.exists() && r.kind() != jsonTrue && r.kind() != jsonFalse {
		return pyTypeError
	}
	return ""
}

// nonNegativeNumber is types._nonnegative_or_none (positive false) or
// types._positive (positive true) for a present, non-None value.
func nonNegativeNumber(v jv, positive bool) string {
	if v.kind() != jsonNumber {
		return pyConfigurationError // bool, None (for _positive), str, list, dict
	}
	if v.isInt() && intOverflowsFloat(v) {
		return pyOverflowError // math.isfinite(huge int)
	}
	n := toNumber(v)
	if n.isFloat && math.IsInf(n.f, 0) {
		return pyConfigurationError // not math.isfinite: a float literal that overflowed
	}
	sign := 0
	if n.isFloat {
		switch {
		case n.f > 0:
			sign = 1
		case n.f < 0:
			sign = -1
		}
	} else {
		sign = n.i.Sign()
	}
	if sign < 0 || (positive && sign == 0) {
		return pyConfigurationError
	}
	return ""
}
