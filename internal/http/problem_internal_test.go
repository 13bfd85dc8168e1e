package http

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxbundle"
	hxruntime "hxd/internal/runtime"
)

func TestProblemTable(t *testing.T) {
	t.Parallel()

	live := httptest.NewRequest("GET", "/", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone := live.WithContext(ctx)

	tests := []struct {
		name   string
		req    *http.Request
		err    error
		status int
		code   string
		detail string
	}{
		{"not found", live, hxruntime.ErrNotFound, 404, "not_found", ""},
		{"wrapped not found", live, fmt.Errorf("load: %w", hxruntime.ErrNotFound), 404, "not_found", ""},
		{"gone", live, fmt.Errorf("session: %w", hxruntime.ErrGone), 410, "gone", ""},
		{"session exists", live, hxruntime.ErrSessionExists, 409, "session_exists", ""},
		{"session busy", live, hxruntime.ErrSessionBusy, 409, "session_busy", ""},
		{"request conflict", live, hxruntime.ErrRequestConflict, 409, "request_id_conflict", ""},
		{"recording mismatch", live, hxruntime.ErrRecordingMismatch, 409, "recording_mismatch", ""},
		{"agent mismatch", live, hxruntime.ErrAgentMismatch, 409, "agent_mismatch", ""},
		{"not awaiting", live, hxruntime.ErrNotAwaitingResolution, 409, "not_awaiting_resolution", ""},
		{"unknown key", live, hxruntime.ErrUnknownExecutionKey, 404, "unknown_execution_key", ""},
		{"resolution invalid", live, &hxruntime.PublicError{Err: hxruntime.ErrResolutionInvalid, Detail: "Tool has no uncertain outcome"},
			422, "resolution_invalid", "Tool has no uncertain outcome"},
		{"unknown agent", live, hxruntime.ErrUnknownAgent, 422, "unknown_agent", ""},
		{"no worker", live, fmt.Errorf("query get_run: task queue q: %w", &hxruntime.PublicError{Err: hxruntime.ErrNoWorker, Detail: "No worker is polling"}),
			503, "unavailable", "No worker is polling"},
		{"invalid message", live, hxruntime.ErrInvalidMessage, 422, "invalid_message", ""},
		{"recording disabled", live, hxruntime.ErrRecordingDisabled, 422, "recording_disabled", ""},
		{"recording unsupported", live, &hxruntime.PublicError{Err: hxruntime.ErrRecordingUnsupported, Detail: "The Temporal engine does not support flight recording"},
			422, "recording_unsupported", "The Temporal engine does not support flight recording"},
		{"unavailable", live, fmt.Errorf("ping: %w", hxruntime.ErrUnavailable), 503, "unavailable", ""},
		{"recording commit unavailable", live, fmt.Errorf("submit run: %w: commit run r: %w", hxruntime.ErrRecording, hxruntime.ErrUnavailable),
			503, "unavailable", ""},
		{"disk full", live, fmt.Errorf("spool: %w", &fs.PathError{Op: "write", Path: "/tmp/x", Err: syscall.ENOSPC}), 503, "unavailable", ""},
		{"quota", live, &fs.PathError{Op: "write", Path: "/tmp/x", Err: syscall.EDQUOT}, 503, "unavailable", ""},
		{"no descriptors", live, fmt.Errorf("lock session s: open lock file: %w", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EMFILE}),
			503, "unavailable", ""},
		{"no descriptors system-wide", live, os.NewSyscallError("socket", syscall.ENFILE), 503, "unavailable", ""},
		{"permission denied", live, &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, 500, "internal", ""},
		{"invalid cursor", live, hxruntime.ErrInvalidCursor, 400, "invalid_request", ""},
		{"request error", live, badRequest("query parameter \"limit\": too big"), 400, "invalid_request", "query parameter \"limit\": too big"},
		{"body too large", live, &http.MaxBytesError{Limit: 1}, 413, "payload_too_large", ""},
		{"no route", live, errNoRoute, 404, "not_found", ""},
		{"method", live, errMethodNotAllowed, 405, "method_not_allowed", ""},
		{"client went away", gone, fmt.Errorf("wait: %w", context.Canceled), 499, "client_closed_request", ""},
		{"cancelled but client still there", live, context.Canceled, 500, "internal", ""},
		{"deadline", live, context.DeadlineExceeded, 500, "internal", ""},
		{"panic", live, &panicError{Value: "boom"}, 500, "internal", ""},
		{"unmapped", live, errors.New("disk on fire"), 500, "internal", ""},
		{"unmapped public error", live, &hxruntime.PublicError{Err: hxruntime.ErrRecording, Detail: "x"}, 500, "internal", ""},
		{"invalid policy", live, &hxruntime.PublicError{Err: hxbundle.ErrInvalidPolicy, Detail: "Artifact export also requires include_payloads=True"},
			422, "invalid_policy", "Artifact export also requires include_payloads=True"},
		{"bundle limit", live, fmt.Errorf("build: %w", &hxbundle.LimitError{Message: hxbundle.MsgRecordLimit}),
			422, "bundle_limit_exceeded", "Incident exceeds the configured record limit"},
		{"invalid bundle", live, &hxbundle.InvalidError{Message: "Member checksum mismatch"}, 422, "invalid_bundle", "Member checksum mismatch"},
		{"self-verification", live, fmt.Errorf("%w: Record count mismatch", ErrSelfVerification), 500, "internal", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rule, detail := problemFor(tt.req, tt.err)
			require.Equal(t, tt.status, rule.status)
			require.Equal(t, tt.code, rule.code)
			require.NotEmpty(t, rule.title)
			require.Equal(t, tt.detail, detail)
		})
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", truncate("abc", 5))
	got := truncate("ééééé", 6)
	require.LessOrEqual(t, len(got), 6)
	require.Equal(t, "éé…", truncate("ééééé", 8))
}
