package main

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/sqlite"
)

// TestOTelCrashResumeLinked (issue 24): a run whose process dies mid-run
// (HXD_CRASH_AFTER) is resumed at start-up by a fresh `hxd serve --otel`
// on the same database; the resumed attempt's invoke_agent span is the
// root of a new trace (no request started it) with one link to the first
// attempt's invoke_agent span, whose context the run saved. The crashed
// process never exports its open invoke_agent span, so the first
// attempt's context is read from the database. (t.Setenv: not parallel;
// the children inherit the OTEL_* variables.)
func TestOTelCrashResumeLinked(t *testing.T) {
	recv := startOTLPReceiver(t)
	otelEnv(t, recv, nil)
	hook := newHookServer(t, nil)
	agents := writeHookAgent(t, "hooker", hook.srv.URL, "idempotent", 1)
	db := filepath.Join(t.TempDir(), "hxd.db")

	// Process 1 exits right after the tool's raw result is committed,
	// with the first attempt's invoke_agent span open.
	p1 := startHxd(t, "process 1", db, agents, "HXD_OTEL=true", "HXD_CRASH_AFTER=tool.returned")
	sid := p1.createSession("hooker")
	_, _, _ = p1.try(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "go"}) // may race the exit
	require.Equal(t, 42, p1.waitExit(15*time.Second), "HXD_CRASH_AFTER exit code")

	// The first attempt's span context, as the run saved it.
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: db})
	require.NoError(t, err)
	rows, err := st.RunListByStatus(ctx, rtstore.StatusRunning)
	hxtest.Close(t, st)
	require.NoError(t, err)
	require.Len(t, rows, 1, "the interrupted run")
	row, rid := rows[0], rows[0].ID
	parts := strings.Split(row.TraceContext, "-")
	require.Len(t, parts, 4, "saved trace context %q", row.TraceContext)
	first := otlpLink{traceID: parts[1], spanID: parts[2]}
	require.Len(t, first.traceID, 32, row.TraceContext)
	require.Len(t, first.spanID, 16, row.TraceContext)

	// Process 2 resumes the run at start-up and finishes it.
	p2 := startHxd(t, "process 2", db, agents, "HXD_OTEL=true")
	run := p2.settle(rid)
	require.Equal(t, "completed", run["status"], run)
	require.Equal(t, "done", run["output"], run)
	p2.stop() // flushes the spans still queued

	spans, _ := recv.received()
	var names []string
	var invokes []otlpSpan
	for _, s := range spans {
		names = append(names, s.name)
		if s.name == "invoke_agent hooker" {
			invokes = append(invokes, s)
		}
	}
	// Only the resumed attempt's span ended: the first one died open.
	require.Len(t, invokes, 1, "spans: %q", names)
	resumed := invokes[0]
	require.Equal(t, rid, resumed.attrs["hxd.run_id"])
	require.Equal(t, sid, resumed.attrs["hxd.session_id"])
	require.Equal(t, "completed", resumed.attrs["hxd.run.status"])
	require.NotEqual(t, first.traceID, resumed.traceID, "a resume at start-up starts a new trace")
	require.Empty(t, resumed.parentID, "a resume at start-up has no request: its span is a root")
	require.Equal(t, []otlpLink{first}, resumed.links, "the resumed attempt links to the first attempt's span")

	// The resumed attempt's model call (step 2) is in its trace, under it;
	// a chat span the crashed process exported before dying (step 1) is
	// under the first attempt's span.
	var chats int
	for _, s := range spans {
		if !strings.HasPrefix(s.name, "chat") || s.attrs["hxd.run_id"] != rid {
			continue
		}
		if s.traceID == resumed.traceID {
			require.Equal(t, resumed.spanID, s.parentID)
			chats++
			continue
		}
		require.Equal(t, first, otlpLink{traceID: s.traceID, spanID: s.parentID}, "chat span of the first attempt")
	}
	require.Equal(t, 1, chats, "spans: %q", names)
}
