package http_test

import (
	"context"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	hxruntime "hxd/internal/runtime"
)

// TestListSessionsFilters: GET /sessions' status and agent reach the
// service as filters, next to the paging parameters.
func TestListSessionsFilters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		query string
		want  hxruntime.SessionListParams
	}{
		{"agent name", "agent=invoice-analyst",
			hxruntime.SessionListParams{AgentName: "invoice-analyst"}},
		{"agent name and version", "agent=invoice-analyst%40v1.2_b",
			hxruntime.SessionListParams{AgentName: "invoice-analyst", AgentVersion: "v1.2_b"}},
		{"status", "status=awaiting_input",
			hxruntime.SessionListParams{Status: hxruntime.RunStatus("awaiting_input")}},
		{"no run", "status=none", hxruntime.SessionListParams{NoRun: true}},
		{"all with paging", "status=completed&agent=demo@v1&limit=3&cursor=c7",
			hxruntime.SessionListParams{
				ListParams: hxruntime.ListParams{Cursor: "c7", Limit: 3},
				AgentName:  "demo", AgentVersion: "v1", Status: hxruntime.RunStatus("completed"),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			var got hxruntime.SessionListParams
			tb.svc.ListSessionsFunc = func(_ context.Context, p hxruntime.SessionListParams) (hxruntime.Page[hxruntime.Session], error) {
				got = p
				return hxruntime.Page[hxruntime.Session]{Items: []hxruntime.Session{*sessionFixture()}}, nil
			}
			resp, body := tb.do(t, request{method: "GET", path: "/sessions?" + tt.query})
			require.Equal(t, 200, resp.StatusCode, "body: %s", body)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestListSessionsBadFilters: a malformed agent or an unknown status is a
// 400 problem and never reaches the service.
func TestListSessionsBadFilters(t *testing.T) {
	t.Parallel()
	for _, q := range []string{
		"agent=",
		"agent=" + url.QueryEscape("a@"),
		"agent=" + url.QueryEscape("@v1"),
		"agent=" + url.QueryEscape("a@v1@v2"),
		"agent=" + url.QueryEscape("a b"),
		"agent=" + url.QueryEscape("a'; DROP TABLE sessions"),
		"agent=" + strings.Repeat("a", 65),
		"status=done",
		"status=",
	} {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			var calls atomic.Int32
			tb.svc.ListSessionsFunc = func(context.Context, hxruntime.SessionListParams) (hxruntime.Page[hxruntime.Session], error) {
				calls.Add(1)
				return hxruntime.Page[hxruntime.Session]{}, nil
			}
			resp, body := tb.do(t, request{method: "GET", path: "/sessions?" + q})
			requireProblem(t, resp, body, 400, "invalid_request")
			require.Zero(t, calls.Load())
		})
	}
}
