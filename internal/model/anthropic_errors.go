package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/shared"
)

// anthropicMiddleware is seenReply.middleware for the Anthropic SDK: it
// records the reply status, headers and body read errors, and bounds the
// body to MaxReplyBytes. The SDK reads the event stream on the calling
// goroutine, so no locking is needed.
func (s *seenReply) anthropicMiddleware(req *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if res != nil {
		s.status = res.StatusCode
		s.header = res.Header.Clone()
		if res.Body != nil {
			res.Body = &watchedBody{ReadCloser: res.Body, seen: s}
		}
	}
	return res, err
}

// streamErrorClass is the class of an in-stream `event: error` (sent with
// HTTP 200), by its error type.
var streamErrorClass = map[shared.ErrorType]struct {
	failureType string
	retryable   bool
}{
	shared.ErrorTypeOverloadedError: {FailureAPIStatus, true},
	shared.ErrorTypeAPIError:        {FailureAPIStatus, true},
	shared.ErrorTypeRateLimitError:  {FailureRateLimit, true},
	shared.ErrorTypeTimeoutError:    {FailureTimeout, true},
}

// timeoutFailure is the failure of a call that exceeded its timeout.
func (p *Anthropic) timeoutFailure() *Failure {
	return &Failure{
		Type:      FailureTimeout,
		Message:   fmt.Sprintf("no complete model reply within the call timeout of %s", p.timeout),
		Retryable: true,
		Cause:     context.DeadlineExceeded,
	}
}

// classify turns an error of one streamed Messages call into a *Failure, or
// into a ctx error when the caller's ctx is done; the table is on
// Anthropic.Complete.
func (p *Anthropic) classify(ctx, callCtx context.Context, err error, seen *seenReply) error {
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	if callCtx.Err() != nil {
		return p.timeoutFailure()
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		code := safeCode(string(apiErr.Type()))
		if apiErr.StatusCode >= 200 && apiErr.StatusCode < 300 {
			if !json.Valid([]byte(apiErr.RawJSON())) {
				return &Failure{Type: FailureResponseValidation, Message: "model server sent an error event whose data is not JSON"}
			}
			msg := "model server sent an error event in the stream"
			if code != "" {
				msg += " (" + code + ")"
			}
			f := &Failure{Type: FailureAPIStatus, Message: msg, RetryAfterSeconds: retryAfterSeconds(seen.header, p.now())}
			if c, ok := streamErrorClass[apiErr.Type()]; ok {
				f.Type, f.Retryable = c.failureType, c.retryable
			}
			return f
		}
		var header http.Header
		if apiErr.Response != nil {
			header = apiErr.Response.Header
		}
		return p.statusFailure(apiErr.StatusCode, header, code)
	}
	if seen.status >= http.StatusBadRequest {
		return p.statusFailure(seen.status, seen.header, "")
	}
	f, err := seen.transportFailure(err, "message event stream")
	if f != nil {
		return f
	}
	return &Failure{Type: FailureGeneric, Message: "model call failed", Cause: err}
}

// statusFailure classifies an HTTP error reply by its status alone: 429 and
// 5xx (529 overloaded included) are transient, other 4xx permanent.
func (p *Anthropic) statusFailure(status int, header http.Header, code string) *Failure {
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
	case status >= http.StatusInternalServerError:
		f.Type, f.Retryable = FailureAPIStatus, true
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		f.Type = FailureAuthentication
	default:
		f.Type = FailureBadRequest
	}
	return f
}
