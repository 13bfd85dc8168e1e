package tool

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"unicode/utf8"

	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/telemetry/propagate"
)

// MaxWebhookReplyBytes bounds a webhook reply body; a larger reply is a
// non-transient failure.
const MaxWebhookReplyBytes = 8 << 20

// webhookTool POSTs each call to a URL (DESIGN §5).
type webhookTool struct {
	base
	client *http.Client
}

// webhookRequest is the JSON body of a webhook call.
type webhookRequest struct {
	Tool         string          `json:"tool"`
	Input        json.RawMessage `json:"input"`
	ExecutionKey string          `json:"execution_key"`
	Attempt      int             `json:"attempt"`
	SessionID    string          `json:"session_id"`
	RunID        string          `json:"run_id"`
}

// webhookReply is a 2xx webhook reply object.
type webhookReply struct {
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Artifacts []struct {
		MediaType string `json:"media_type"`
		Base64    string `json:"base64"`
	} `json:"artifacts"`
}

// Call POSTs one attempt, bounded by the tool's timeout, with the execution
// key as Idempotency-Key. 429, 5xx, timeouts and connection errors are
// transient failures; other 4xx replies are error results. Bodies are
// never logged.
func (t *webhookTool) Call(ctx context.Context, inv Invocation) (Outcome, error) {
	timeout := t.timeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	input := inv.Call.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	body, err := json.Marshal(webhookRequest{
		Tool:         t.cfg.Name,
		Input:        input,
		ExecutionKey: inv.ExecutionKey,
		Attempt:      inv.Attempt,
		SessionID:    inv.SessionID,
		RunID:        inv.RunID,
	})
	if err != nil {
		return Outcome{}, &Failure{Type: "WebhookError", Message: "cannot encode the webhook request", Cause: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return Outcome{}, &Failure{Type: "WebhookError", Message: "cannot build the webhook request", Cause: stripURL(err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Idempotency-Key", inv.ExecutionKey)
	// The run's trace continues at the webhook (W3C traceparent), when
	// tracing is on.
	propagate.Inject(ctx, req.Header)

	resp, err := t.client.Do(req)
	if err != nil {
		if f := callFailure(ctx, timeout, err); f != nil {
			return Outcome{}, f
		}
		// Only a failed dial is known to have sent nothing.
		return Outcome{}, &Failure{Type: "ConnectionError", Message: "webhook connection failed", Transient: true, MayHaveRun: !isDialError(err), Cause: stripURL(err)}
	}
	// Closing the reply has nothing to report: the outcome is decided by
	// what was read.
	defer func() { _ = resp.Body.Close() }()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, MaxWebhookReplyBytes+1))
	if err != nil {
		if f := callFailure(ctx, timeout, err); f != nil {
			return Outcome{}, f
		}
		return Outcome{}, &Failure{Type: "ConnectionError", Message: "webhook reply was cut off", Transient: true, MayHaveRun: true, Cause: stripURL(err)}
	}
	if len(reply) > MaxWebhookReplyBytes {
		return Outcome{}, &Failure{Type: "WebhookError", Message: fmt.Sprintf("webhook reply exceeds %d bytes", MaxWebhookReplyBytes)}
	}

	status := fmt.Sprintf("webhook returned HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return Outcome{}, &Failure{Type: "TransientToolError", Message: status, Transient: true}
	case resp.StatusCode >= 400:
		return Outcome{Result: ErrorResult(inv.Call.ID, status)}, nil
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		return Outcome{}, &Failure{Type: "WebhookError", Message: status}
	}
	return parseReply(inv.Call.ID, reply), nil
}

// parseReply turns a 2xx body into an outcome: an object with "content" is
// the result, anything else (JSON nested deeper than journal.MaxInputDepth,
// holding bytes that are not UTF-8, or content without a canonical form: a
// repeated key, a number beyond float range, a lone surrogate) is text
// content, where invalid bytes become U+FFFD. Stored JSON is always UTF-8
// (PostgreSQL refuses anything else, which would fail the run's commit)
// and has a canonical form (the journal is exported as canonical JSON).
func parseReply(callID string, body []byte) Outcome {
	var r webhookReply
	if !utf8.Valid(body) || journal.Deeper(body, journal.MaxInputDepth) || json.Unmarshal(body, &r) != nil || len(r.Content) == 0 || !isObject(body) ||
		journal.CheckCanonical(r.Content) != nil {
		return Outcome{Result: textResult(callID, string(body))}
	}
	out := Outcome{Result: model.ToolResult{ToolCallID: callID, Content: r.Content, IsError: r.IsError}}
	for i, a := range r.Artifacts {
		data, err := base64.StdEncoding.DecodeString(a.Base64)
		if err != nil {
			return Outcome{Result: ErrorResult(callID, fmt.Sprintf("webhook reply artifacts[%d].base64 is not valid base64", i))}
		}
		mt := a.MediaType
		if mt == "" {
			mt = "application/octet-stream"
		}
		out.Artifacts = append(out.Artifacts, Artifact{MediaType: mt, Data: data})
	}
	return out
}

// isObject reports whether body is a JSON object.
func isObject(body []byte) bool {
	b := bytes.TrimSpace(body)
	return len(b) > 0 && b[0] == '{'
}

// isDialError reports a failure to connect: the request never left.
func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// stripURL drops the *url.Error wrapper so the webhook URL (which may carry
// a token) stays out of messages and logs.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
