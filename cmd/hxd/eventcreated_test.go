package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEventCreatedAtEndToEnd: a recorded run's events carry created_at,
// in UTC and in commit order, the same in the JSON page, on a second read
// and in the stream; the run's export still verifies (created_at stays
// out of the bundle's event records, which the reference's RunEvent(**data)
// rule would refuse).
func TestEventCreatedAtEndToEnd(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"))
	before := time.Now().UTC().Truncate(time.Microsecond)
	_, rid := recordedRun(t, d, "invoice-analyst", true, "Analyze overdue invoices for the demo account")
	after := time.Now().UTC()

	page := func() map[string]string {
		resp, body := d.do(t, http.MethodGet, "/runs/"+rid+"/events?after=0", nil, "Accept", "application/json")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var p struct {
			Events []struct {
				Cursor    string `json:"cursor"`
				CreatedAt string `json:"created_at"`
			} `json:"events"`
		}
		require.NoError(t, json.Unmarshal(body, &p))
		require.NotEmpty(t, p.Events)
		out := map[string]string{}
		var prev time.Time
		for _, ev := range p.Events {
			require.True(t, strings.HasSuffix(ev.CreatedAt, "Z"), "UTC: %q", ev.CreatedAt)
			at, err := time.Parse(time.RFC3339Nano, ev.CreatedAt)
			require.NoError(t, err)
			require.False(t, at.Before(before), "%s before the run (%s)", at, before)
			require.False(t, at.After(after), "%s after the run (%s)", at, after)
			require.False(t, at.Before(prev), "created_at follows commit order")
			prev = at
			out[ev.Cursor] = ev.CreatedAt
		}
		return out
	}
	first := page()
	require.Equal(t, first, page(), "stable across reads")

	resp, body := d.do(t, http.MethodGet, "/runs/"+rid+"/events?after=0", nil, "Accept", "text/event-stream")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	streamed := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Cursor    string `json:"cursor"`
			CreatedAt string `json:"created_at"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &ev))
		streamed[ev.Cursor] = ev.CreatedAt
	}
	require.NoError(t, sc.Err())
	require.Equal(t, first, streamed, "the stream gives the page's created_at")

	resp, full := export(t, d, rid, map[string]any{"include_payloads": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(full))
	rep := verifyOverHTTP(t, d, full)
	require.True(t, rep.Valid, "%+v", rep)
	require.True(t, rep.Complete, "%+v", rep)
	require.Empty(t, rep.Issues)
}
