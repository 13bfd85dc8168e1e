package http_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	hxruntime "hxd/internal/runtime"
)

// TestExportRunProblems: every refusal is a problem (the archive path is
// covered end to end in cmd/hxd); policy problems are found before the
// runtime is asked.
func TestExportRunProblems(t *testing.T) {
	t.Parallel()
	recordingDisabled := &hxruntime.PublicError{Err: hxruntime.ErrRecordingDisabled, Detail: "Flight recording was not enabled for this run"}
	tests := []struct {
		name      string
		body      string
		exportErr error // nil: Export must not be called
		status    int
		code      string
		detail    string
	}{
		{name: "unknown run", exportErr: fmt.Errorf("run: %w", hxruntime.ErrNotFound), status: 404, code: "not_found"},
		{name: "unknown run with policy", body: `{"include_payloads":true}`, exportErr: hxruntime.ErrNotFound, status: 404, code: "not_found"},
		{name: "not recorded", body: `{}`, exportErr: recordingDisabled, status: 422, code: "recording_disabled",
			detail: "Flight recording was not enabled for this run"},
		{name: "artifacts without payloads", body: `{"include_artifacts":true}`, status: 422, code: "invalid_policy",
			detail: "Artifact export also requires include_payloads=True"},
		{name: "unknown action", body: `{"include_payloads":true,"redact":[{"action":"explode"}]}`, status: 422, code: "invalid_policy",
			detail: `redact[0]: unknown action "explode" (want omit or replace)`},
		{name: "bad pattern", body: `{"include_payloads":true,"redact":[{"pattern":"("}]}`, status: 422, code: "invalid_policy",
			detail: "redact[0]: pattern does not compile: error parsing regexp: missing closing ): `(`"},
		{name: "zero limit", body: `{"limits":{"max_records":0}}`, status: 422, code: "invalid_policy",
			detail: "Bundle limits must be positive integers"},
		{name: "negative limit", body: `{"limits":{"max_bytes":-1}}`, status: 422, code: "invalid_policy",
			detail: "Bundle limits must be positive integers"},
		{name: "limit above the server's", body: `{"limits":{"max_members":10001}}`, status: 422, code: "invalid_policy",
			detail: "limits.max_members must not exceed the server's 10000"},
		{name: "several problems", body: `{"include_artifacts":true,"limits":{"max_records":0}}`, status: 422, code: "invalid_policy",
			detail: "Bundle limits must be positive integers; Artifact export also requires include_payloads=True"},
		{name: "flag not a bool", body: `{"include_payloads":"yes"}`, status: 400, code: "invalid_request"},
		{name: "unknown field", body: `{"include_payload":true}`, status: 400, code: "invalid_request"},
		{name: "rule not an object", body: `{"redact":["omit"]}`, status: 400, code: "invalid_request"},
		{name: "unknown rule field", body: `{"redact":[{"action":"omit","kind":"event"}]}`, status: 400, code: "invalid_request"},
		{name: "malformed JSON", body: `{"include_payloads":`, status: 400, code: "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			called := false
			tb.svc.ExportFunc = func(ctx context.Context, runID string, _ func(*hxruntime.Incident) error) error {
				called = true
				require.Equal(t, "r1", runID)
				require.Equal(t, hxruntime.LocalPrincipal, hxruntime.PrincipalFrom(ctx))
				return tt.exportErr
			}
			resp, body := tb.do(t, request{method: "POST", path: "/runs/r1/export", body: tt.body})
			p := requireProblem(t, resp, body, tt.status, tt.code)
			if tt.status != http.StatusBadRequest { // 400 details come from the validator
				require.Equal(t, tt.detail, deref(p.Detail))
			}
			require.Equal(t, tt.exportErr != nil, called)
		})
	}
}

// TestExportRunAudit: an export attempt is logged with the principal and
// the policy, never with payloads.
func TestExportRunAudit(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.svc.ExportFunc = func(context.Context, string, func(*hxruntime.Incident) error) error { return hxruntime.ErrNotFound }
	resp, body := tb.do(t, request{method: "POST", path: "/runs/r1/export", body: `{"include_payloads":true}`})
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	lines := tb.logs.matching(`"msg":"run export failed"`, `"principal":"local"`, `"run_id":"r1"`, `"include_payloads":true`)
	require.Len(t, lines, 1)
}
