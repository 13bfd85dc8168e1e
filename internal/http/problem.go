package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"hxd/internal/http/api"
	"hxd/internal/hxbundle"
	"hxd/internal/mcp"
	hxruntime "hxd/internal/runtime"
)

// Errors of the HTTP layer itself (the runtime's are in runtime/errors.go).
var (
	errNoRoute          = errors.New("no route matches the path")
	errMethodNotAllowed = errors.New("method not allowed for the path")
)

// requestError is a request that violates the contract (400
// invalid_request). Detail is client-safe: it names the parameter or field
// but never echoes the input.
type requestError struct {
	Detail string
	Err    error
}

func (e *requestError) Error() string {
	if e.Err != nil {
		return e.Detail + ": " + e.Err.Error()
	}
	return e.Detail
}

func (e *requestError) Unwrap() error { return e.Err }

func badRequest(detail string) error { return &requestError{Detail: detail} }

// panicError is a recovered handler panic.
type panicError struct {
	Value any
	Stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("handler panic: %v", e.Value) }

// problemRule maps matching errors to a status and a stable code.
type problemRule struct {
	match  func(r *http.Request, err error) bool
	status int
	code   string
	title  string
}

func is(target error) func(*http.Request, error) bool {
	return func(_ *http.Request, err error) bool { return errors.Is(err, target) }
}

func as[T error](_ *http.Request, err error) bool {
	var t T
	return errors.As(err, &t)
}

// osShortage matches an OS error saying that the disk is full or that no
// file descriptor is left, from wherever it comes (the stores report
// theirs as ErrUnavailable already): it passes, so it is a 503 too.
func osShortage(_ *http.Request, err error) bool {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE, syscall.ENFILE} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// retryAfter is the Retry-After of a 503 (seconds): runs waiting for
// storage try again at least this often.
const retryAfter = "5"

// clientGone matches a cancellation caused by the client going away.
func clientGone(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && r.Context().Err() != nil
}

// statusClientClosedRequest is nginx's 499: the client went away first.
const statusClientClosedRequest = 499

// problemTable is THE error → problem mapping, tried in order; the first
// match wins. Anything unmatched is a 500 `internal`.
var problemTable = []problemRule{
	{clientGone, statusClientClosedRequest, "client_closed_request", "Client closed request"},
	{as[*requestError], http.StatusBadRequest, "invalid_request", "Invalid request"},
	{as[*http.MaxBytesError], http.StatusRequestEntityTooLarge, "payload_too_large", "Request body too large"},
	{is(errBodyTimeout), http.StatusRequestTimeout, "request_timeout", "Request body did not arrive in time"},
	{as[*mediaTypeError], http.StatusUnsupportedMediaType, "unsupported_media_type", "Unsupported media type"},
	{is(ErrUnauthorized), http.StatusUnauthorized, "unauthorized", "Unauthorized"},
	{is(ErrForbidden), http.StatusForbidden, "forbidden", "Forbidden"},
	{is(hxruntime.ErrInvalidCursor), http.StatusBadRequest, "invalid_request", "Invalid request"},
	{is(errNoRoute), http.StatusNotFound, "not_found", "Not found"},
	{is(errMethodNotAllowed), http.StatusMethodNotAllowed, "method_not_allowed", "Method not allowed"},
	{is(hxruntime.ErrGone), http.StatusGone, "gone", "Gone"},
	{is(hxruntime.ErrNotFound), http.StatusNotFound, "not_found", "Not found"},
	{is(hxruntime.ErrUnknownExecutionKey), http.StatusNotFound, "unknown_execution_key", "Unknown execution key"},
	{is(hxruntime.ErrSessionExists), http.StatusConflict, "session_exists", "Session exists"},
	{is(hxruntime.ErrSessionBusy), http.StatusConflict, "session_busy", "Session busy"},
	{is(hxruntime.ErrRequestConflict), http.StatusConflict, "request_id_conflict", "Request id already used with a different message"},
	{is(hxruntime.ErrRecordingMismatch), http.StatusConflict, "recording_mismatch", "Recording configuration differs from the session"},
	{is(hxruntime.ErrAgentMismatch), http.StatusConflict, "agent_mismatch", "Agent definition differs from the session"},
	{is(hxruntime.ErrNotAwaitingResolution), http.StatusConflict, "not_awaiting_resolution", "Run is not awaiting a resolution"},
	{is(hxruntime.ErrResolutionInvalid), http.StatusUnprocessableEntity, "resolution_invalid", "Invalid resolution"},
	{is(mcp.ErrUnavailable), http.StatusUnprocessableEntity, "mcp_unavailable", "MCP server unavailable"},
	{is(hxruntime.ErrMCPTools), http.StatusUnprocessableEntity, "mcp_tools_invalid", "MCP tools cannot be pinned"},
	{is(hxruntime.ErrUnknownAgent), http.StatusUnprocessableEntity, "unknown_agent", "Unknown agent"},
	{is(hxruntime.ErrInvalidMessage), http.StatusUnprocessableEntity, "invalid_message", "Invalid message"},
	{is(hxruntime.ErrRecordingDisabled), http.StatusUnprocessableEntity, "recording_disabled", "Flight recording was not enabled"},
	{is(hxruntime.ErrRecordingUnsupported), http.StatusUnprocessableEntity, "recording_unsupported", "Flight recording is not supported by this engine"},
	{is(hxruntime.ErrNoWorker), http.StatusServiceUnavailable, "unavailable", "Service unavailable"},
	{is(hxbundle.ErrInvalidPolicy), http.StatusUnprocessableEntity, "invalid_policy", "Invalid export policy"},
	{is(hxbundle.ErrLimitExceeded), http.StatusUnprocessableEntity, "bundle_limit_exceeded", "Bundle limit exceeded"},
	{is(hxbundle.ErrInvalidBundle), http.StatusUnprocessableEntity, "invalid_bundle", "Invalid bundle"},
	{is(hxruntime.ErrUnavailable), http.StatusServiceUnavailable, "unavailable", "Service unavailable"},
	{osShortage, http.StatusServiceUnavailable, "unavailable", "Service unavailable"},
}

// internalRule is the answer to anything problemTable does not match.
var internalRule = problemRule{status: http.StatusInternalServerError, code: "internal", title: "Internal server error"}

// problemFor returns the rule for err and the client-safe detail, if any.
func problemFor(r *http.Request, err error) (problemRule, string) {
	for _, rule := range problemTable {
		if !rule.match(r, err) {
			continue
		}
		var detail string
		var re *requestError
		var me *mediaTypeError
		var pe *hxruntime.PublicError
		var le *hxbundle.LimitError
		var ie *hxbundle.InvalidError
		switch {
		case errors.As(err, &re):
			detail = re.Detail
		case errors.As(err, &me):
			detail = me.Detail
		case errors.As(err, &pe):
			detail = pe.Detail
		case errors.As(err, &le):
			detail = le.Message // the reference's message, e.g. "Incident exceeds byte limit"
		case errors.As(err, &ie):
			detail = ie.Message // the verifier's message
		}
		return rule, detail
	}
	return internalRule, ""
}

// maxDetail bounds a problem's detail (it may quote a field name).
const maxDetail = 300

// writeProblem answers err as application/problem+json. Every error path of
// the server ends here: the chi, request and response hooks of the
// generated code, the router's 404/405, the body limit and panic recovery.
// Server errors (5xx) are logged once here with the request id; a client
// that went away is logged at debug and answered 499.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	rule, detail := problemFor(r, err)
	reqID := requestIDFrom(ctx)
	attrs := []any{"request_id", reqID, "http_status", rule.status, "code", rule.code, "error", err.Error()}
	for _, p := range []string{"session_id", "run_id"} {
		if v := chi.URLParamFromCtx(ctx, p); v != "" {
			attrs = append(attrs, p, v)
		}
	}
	switch {
	case rule.status == statusClientClosedRequest:
		s.log.DebugContext(ctx, "client closed request", attrs...)
	case rule.status == http.StatusServiceUnavailable:
		s.log.WarnContext(ctx, "service unavailable", attrs...)
	case rule.status >= http.StatusInternalServerError:
		var pe *panicError
		if errors.As(err, &pe) {
			attrs = append(attrs, "stack", string(pe.Stack))
		}
		s.log.ErrorContext(ctx, "request failed", attrs...)
	}
	if headerWritten(w) {
		return // a stream already started; nothing more can be said
	}
	p := api.Problem{
		Type:      "urn:hxd:problem:" + rule.code,
		Title:     rule.title,
		Status:    rule.status,
		Code:      rule.code,
		RequestId: reqID,
	}
	if id := traceID(r); id != "" {
		p.TraceId = &id
	}
	if detail != "" {
		d := truncate(detail, maxDetail)
		p.Detail = &d
	}
	if path := r.URL.EscapedPath(); len(path) <= 1000 {
		p.Instance = &path
	}
	body, merr := json.Marshal(p)
	if merr != nil { // cannot happen: Problem has only strings and ints
		body = []byte(`{"type":"urn:hxd:problem:internal","title":"Internal server error","status":500,"code":"internal"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	if rule.status == http.StatusServiceUnavailable {
		h.Set("Retry-After", retryAfter)
	}
	w.WriteHeader(rule.status)
	_, _ = w.Write(append(body, '\n'))
}

// paramError is the generated router's hook for a path, query or header
// parameter it cannot bind.
func (s *Server) paramError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeProblem(w, r, &requestError{Detail: fmt.Sprintf("invalid parameter %q", paramName(err)), Err: err})
}

// bodyError is the strict server's hook for a body it cannot decode.
func (s *Server) bodyError(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		s.writeProblem(w, r, err)
		return
	}
	s.writeProblem(w, r, &requestError{Detail: "request body is not valid JSON for this operation", Err: err})
}

// paramName names the parameter of a generated parameter error.
func paramName(err error) string {
	var (
		e1 *api.InvalidParamFormatError
		e2 *api.RequiredParamError
		e3 *api.RequiredHeaderError
		e4 *api.TooManyValuesForParamError
		e5 *api.UnmarshalingParamError
		e6 *api.UnescapedCookieParamError
	)
	switch {
	case errors.As(err, &e1):
		return e1.ParamName
	case errors.As(err, &e2):
		return e2.ParamName
	case errors.As(err, &e3):
		return e3.ParamName
	case errors.As(err, &e4):
		return e4.ParamName
	case errors.As(err, &e5):
		return e5.ParamName
	case errors.As(err, &e6):
		return e6.ParamName
	}
	return "unknown"
}

// truncate shortens s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
