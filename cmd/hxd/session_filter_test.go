package main

import (
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeListSessionsFilters: GET /sessions with status and agent
// filters, on the real daemon, returns full pages of matching sessions and
// next_cursor continues the filtered listing to its end.
func TestServeListSessionsFilters(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"))

	// inv0 (completed run), sl1, inv2 (no run), sl3, inv4 (no run), sl5,
	// inv6 (completed run), sl7: sleeper sessions never run.
	ids := make([]string, 8)
	for i := range ids {
		ref := map[string]string{"name": "invoice-analyst", "version": "v1"}
		if i%2 == 1 {
			ref = map[string]string{"name": "sleeper", "version": "v1"}
		}
		resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": ref})
		require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
		ids[i] = decode(t, body)["session_id"].(string)
	}
	for _, i := range []int{0, 6} {
		resp, body := d.do(t, http.MethodPost, "/sessions/"+ids[i]+"/runs?wait=20", map[string]any{
			"message": "Analyze overdue invoices for the demo account",
		})
		require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
		require.Equal(t, "completed", decode(t, body)["status"], string(body))
	}
	pick := func(is ...int) []string {
		out := make([]string, len(is))
		for k, i := range is {
			out[k] = ids[i]
		}
		return out
	}

	tests := []struct {
		query string
		want  []string
	}{
		{"agent=invoice-analyst", pick(0, 2, 4, 6)},
		{"agent=" + url.QueryEscape("sleeper@v1"), pick(1, 3, 5, 7)},
		{"agent=" + url.QueryEscape("invoice-analyst@v2"), nil},
		{"status=completed", pick(0, 6)},
		{"status=running", nil},
		{"status=none", pick(1, 2, 3, 4, 5, 7)},
		{"status=none&agent=invoice-analyst", pick(2, 4)},
		{"status=completed&agent=sleeper", nil},
		{"", pick(0, 1, 2, 3, 4, 5, 6, 7)},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			const limit = 3
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, len(ids), "next_cursor never ends")
				path := "/sessions?limit=3&" + tt.query
				if cursor != "" {
					path += "&cursor=" + url.QueryEscape(cursor)
				}
				resp, body := d.do(t, http.MethodGet, path, nil)
				require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
				page := decode(t, body)
				items := page["items"].([]any)
				for _, it := range items {
					got = append(got, it.(map[string]any)["session_id"].(string))
				}
				next, more := page["next_cursor"].(string)
				if !more {
					require.Nil(t, page["next_cursor"])
					break
				}
				// Only the last page is short.
				require.Len(t, items, limit, string(body))
				cursor = next
			}
			if tt.want == nil {
				require.Empty(t, got)
				return
			}
			require.Equal(t, tt.want, got)
		})
	}

	for _, q := range []string{"agent=" + url.QueryEscape("invoice-analyst@"), "agent=" + url.QueryEscape("a b"), "status=done"} {
		resp, body := d.do(t, http.MethodGet, "/sessions?"+q, nil)
		requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")
	}
}
