package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	hxruntime "hxd/internal/runtime"
)

// TestListSessionsFiltersOwnSessions: the runtime passes the filters to
// the store and pages the caller's matching sessions only; the cursor
// continues after the last match.
func TestListSessionsFiltersOwnSessions(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	alice := hxruntime.WithPrincipal(context.Background(), "alice")
	bob := hxruntime.WithPrincipal(context.Background(), "bob")
	var want []string
	for i := range 5 {
		for _, ctx := range []context.Context{bob, alice} {
			s, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: agent.Ref{Name: "invoice-analyst", Version: "v1"}})
			require.NoError(t, err)
			if ctx == alice && i%2 == 0 {
				want = append(want, s.ID)
			}
			if i%2 == 1 {
				_, _, err = tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: s.ID, Message: jsonString("go")})
				require.NoError(t, err)
			}
		}
	}
	filter := hxruntime.SessionListParams{AgentName: "invoice-analyst", AgentVersion: "v1", NoRun: true}
	var got []string
	for range 5 {
		p := filter
		p.Limit = 2
		page, err := tb.rt.ListSessions(alice, p)
		require.NoError(t, err)
		for _, s := range page.Items {
			require.Nil(t, s.LatestRun)
			got = append(got, s.ID)
		}
		if page.NextCursor == "" {
			break
		}
		require.Len(t, page.Items, 2)
		filter.Cursor = page.NextCursor
	}
	require.Equal(t, want, got)

	other, err := tb.rt.ListSessions(alice, hxruntime.SessionListParams{AgentName: "invoice-analyst", AgentVersion: "v2"})
	require.NoError(t, err)
	require.Empty(t, other.Items)
}
