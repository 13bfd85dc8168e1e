package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// seenReply records what came back for the one HTTP request of a call: the
// status and headers, so that an error reply whose body the SDK cannot parse
// (an HTML 502 from a proxy) is still classified by its status, and whether
// reading the body failed, so that a connection dropped mid-body is told
// apart from a complete but malformed body. The SDK reads the body on the
// calling goroutine, before Complete classifies, so no locking is needed.
//
// A 2xx reply with Content-Type application/json comes from a server that
// ignored `stream: true`: the middleware reads it whole (within
// MaxReplyBytes) into plain, or records the read error in plainErr, and
// hands the SDK's stream an empty body.
type seenReply struct {
	status   int
	header   http.Header
	bodyErr  error
	plain    []byte
	plainErr error
	isPlain  bool
	// lines watches the body's lines (sseLines).
	lines sseLines
}

// notEventStream reports whether a 2xx reply that ended before its answer
// was complete is no event stream at all: a line of it was not an SSE
// field line (sseLines).
func (s *seenReply) notEventStream() bool {
	return s.status >= 200 && s.status < 300 && s.lines.foreign
}

// middleware is an SDK middleware capturing the reply status, headers and
// body read errors.
func (s *seenReply) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if res != nil {
		s.status = res.StatusCode
		s.header = res.Header.Clone()
		if res.Body != nil {
			res.Body = &watchedBody{ReadCloser: res.Body, seen: s}
			if res.StatusCode >= 200 && res.StatusCode < 300 && isMediaType(res.Header, "application/json") {
				s.isPlain = true
				s.plain, s.plainErr = io.ReadAll(res.Body)
				_ = res.Body.Close()
				res.Body = io.NopCloser(bytes.NewReader(nil))
			}
		}
	}
	return res, err
}

// MaxReplyBytes bounds the body of a model server's reply; reading past it
// fails the call (a non-retryable APIResponseValidationError).
const MaxReplyBytes = 32 << 20

// errReplyTooLarge is the read error of a reply body past MaxReplyBytes.
var errReplyTooLarge = fmt.Errorf("model server reply exceeds %d bytes", MaxReplyBytes)

// watchedBody records the first read error other than io.EOF, and fails
// the reads past MaxReplyBytes.
type watchedBody struct {
	io.ReadCloser
	seen *seenReply
	read int64
}

// Read implements io.Reader.
func (b *watchedBody) Read(p []byte) (int, error) {
	if b.read > MaxReplyBytes {
		return 0, errReplyTooLarge
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	b.seen.lines.write(p[:n])
	if b.read > MaxReplyBytes {
		err = errReplyTooLarge
	}
	if err != nil && !errors.Is(err, io.EOF) && b.seen.bodyErr == nil {
		b.seen.bodyErr = err
	}
	return n, err
}

// ctxError wraps the error of a done ctx (and its cause, when a custom one was
// given) for a call that must not be classified as a failure.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
		return fmt.Errorf("model call: %w: %w", err, cause)
	}
	return fmt.Errorf("model call: %w", err)
}

// classify turns an error of one Chat Completions call into a *Failure, or
// into a ctx error when the caller's ctx is done; the table is on
// OpenAI.Complete.
func (p *OpenAI) classify(ctx, callCtx context.Context, err error, seen *seenReply) error {
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	if callCtx.Err() != nil {
		return &Failure{
			Type:      FailureTimeout,
			Message:   fmt.Sprintf("no model reply within the call timeout of %s", p.timeout),
			Retryable: true,
			Cause:     context.DeadlineExceeded,
		}
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return p.streamErrorFailure(streamErr.Event.Data)
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		var header http.Header
		if apiErr.Response != nil {
			header = apiErr.Response.Header
		}
		code := safeCode(apiErr.Code)
		if code == "" {
			code = safeCode(apiErr.Type)
		}
		text := strings.Join([]string{apiErr.Code, apiErr.Type, apiErr.Message}, " ")
		return p.statusFailure(apiErr.StatusCode, header, code, text)
	}
	if seen.status >= http.StatusBadRequest {
		return p.statusFailure(seen.status, seen.header, "", "")
	}
	f, err := seen.transportFailure(err, "chat completion stream")
	if f != nil {
		return f
	}
	if f := markerFailure(err.Error(), 0, "model call"); f != nil {
		f.Cause = err
		return f
	}
	return &Failure{Type: FailureGeneric, Message: "model call failed", Cause: err}
}

// isMediaType reports whether a reply's Content-Type has media type mt.
func isMediaType(h http.Header, mt string) bool {
	if h == nil {
		return false
	}
	got, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && got == mt
}

// streamErrorTypes maps the type or code of an in-stream error object to a
// retryable failure type; any other type or code is a permanent failure.
var streamErrorTypes = map[string]string{
	"rate_limit_exceeded": FailureRateLimit,
	"rate_limit_error":    FailureRateLimit,
	"server_error":        FailureAPIStatus,
	"api_error":           FailureAPIStatus,
	"overloaded_error":    FailureAPIStatus,
	"service_unavailable": FailureAPIStatus,
	"internal_error":      FailureAPIStatus,
	"timeout":             FailureTimeout,
	"timeout_error":       FailureTimeout,
}

// streamErrorFailure classifies an error object sent inside a stream
// (`data: {"error": {...}}`, with HTTP status 200) by its code and type,
// never by its message. A numeric code (some compatible servers send the
// HTTP status they would have answered) is classified as that status.
func (p *OpenAI) streamErrorFailure(data []byte) *Failure {
	if !json.Valid(data) {
		return &Failure{Type: FailureResponseValidation, Message: "model stream sent an error whose data is not JSON"}
	}
	var payload struct {
		Error struct {
			Type string          `json:"type"`
			Code json.RawMessage `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &payload) // a malformed object is a permanent failure below
	var code string
	if err := json.Unmarshal(payload.Error.Code, &code); err != nil {
		code = string(bytes.TrimSpace(payload.Error.Code))
	}
	typ := payload.Error.Type
	label := safeCode(code)
	if label == "" {
		label = safeCode(typ)
	}
	msg := "model stream sent an error"
	if label != "" {
		msg += " (" + label + ")"
	}
	if status, err := strconv.Atoi(code); err == nil && status >= 400 && status <= 599 {
		f := p.statusFailure(status, nil, label, "")
		f.Message, f.Status = msg, 0
		return f
	}
	for _, k := range []string{code, typ} {
		if t, ok := streamErrorTypes[k]; ok {
			return &Failure{Type: t, Message: msg, Retryable: true}
		}
	}
	return &Failure{Type: FailureGeneric, Message: msg}
}

// statusFailure classifies an HTTP error reply. text is the provider's error
// text, used only to look for retry markers.
func (p *OpenAI) statusFailure(status int, header http.Header, code, text string) *Failure {
	msg := fmt.Sprintf("model server answered HTTP %d", status)
	if st := http.StatusText(status); st != "" {
		msg += " " + st
	}
	if code != "" {
		msg += " (" + code + ")"
	}
	f := &Failure{Message: msg, Status: status, RetryAfterSeconds: retryAfterSeconds(header, p.now())}
	switch {
	case status == http.StatusTooManyRequests:
		f.Type, f.Retryable = FailureRateLimit, true
	case status == http.StatusRequestTimeout:
		f.Type, f.Retryable = FailureTimeout, true
	case status == http.StatusConflict || status >= http.StatusInternalServerError:
		f.Type, f.Retryable = FailureAPIStatus, true
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// Never retried, whatever the text says: a bad key stays bad.
		f.Type = FailureAuthentication
	default:
		f.Type = FailureBadRequest
		if m := markerFailure(text, status, msg); m != nil {
			m.RetryAfterSeconds = f.RetryAfterSeconds
			return m
		}
	}
	return f
}

// retryMarkers are the message markers of the reference classifier
// (REFERENCE §4.1, harnessx/providers/retry.py), with the failure type each
// one maps to.
var retryMarkers = []struct {
	marker, failureType, note string
}{
	{"rate limit", FailureRateLimit, "provider reports rate limiting"},
	{"overloaded", FailureAPIStatus, "provider reports overload"},
	{"timed out", FailureTimeout, "provider reports a timeout"},
}

// markerFailure returns a retryable failure when text contains a retry
// marker (case-insensitive), else nil. prefix starts the message.
func markerFailure(text string, status int, prefix string) *Failure {
	lower := strings.ToLower(text)
	for _, m := range retryMarkers {
		if strings.Contains(lower, m.marker) {
			return &Failure{Type: m.failureType, Message: prefix + ": " + m.note, Retryable: true, Status: status}
		}
	}
	return nil
}

// connectionReason reports whether err is a network-level failure and names
// it briefly.
func connectionReason(err error) (string, bool) {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var urlErr *url.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", true
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset", true
	case errors.As(err, &dnsErr):
		return "DNS lookup failed", true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed before the reply was complete", true
	case errors.As(err, &opErr), errors.As(err, &urlErr):
		return "network error", true
	}
	return "", false
}

// safeCode returns s when it is a short identifier (letters, digits, _ . -),
// else "". Provider error codes such as "rate_limit_exceeded" pass; free text
// does not.
func safeCode(s string) string {
	if s == "" || len(s) > 64 {
		return ""
	}
	for _, r := range s {
		ok := r == '_' || r == '.' || r == '-' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return ""
		}
	}
	return s
}

// retryAfterSeconds reads the server's retry hint: Retry-After-Ms
// (milliseconds), else Retry-After (seconds, or an HTTP date relative to
// now). It returns 0 when absent, unparsable or in the past.
func retryAfterSeconds(h http.Header, now time.Time) float64 {
	if h == nil {
		return 0
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && validHint(ms) {
			return ms / 1000
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if validHint(s) {
			return s
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now).Seconds(); d > 0 {
			return d
		}
	}
	return 0
}

// validHint reports whether a numeric retry hint is finite and positive.
func validHint(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v > 0
}

// transportFailure classifies what is left once the SDK's error is no API
// error: a reply over MaxReplyBytes, a connection that broke while the body
// was read (err becomes that read error), a complete 2xx body that is not a
// valid <what>, a timeout and other connection failures. It returns nil and
// the error to classify further otherwise.
func (s *seenReply) transportFailure(err error, what string) (*Failure, error) {
	if errors.Is(s.bodyErr, errReplyTooLarge) {
		return &Failure{Type: FailureResponseValidation, Message: errReplyTooLarge.Error()}, err
	}
	if s.bodyErr != nil {
		err = s.bodyErr // the connection broke while the body was read
	} else if s.status >= 200 && s.status < 300 {
		return &Failure{Type: FailureResponseValidation, Message: fmt.Sprintf("model server reply (HTTP %d) is not a valid %s", s.status, what), Cause: err}, err
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return &Failure{Type: FailureTimeout, Message: "model server connection timed out", Retryable: true, Cause: err}, err
	}
	if reason, ok := connectionReason(err); ok {
		return &Failure{Type: FailureConnection, Message: "connection to the model server failed: " + reason, Retryable: true, Cause: err}, err
	}
	return nil, err
}
