package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
)

// filterSession is one session of the filter cases: its owner, agent and
// the status of its latest run ("" for no run).
type filterSession struct {
	principal, name, version string
	status                   rtstore.RunStatus
}

var sessionFilterCases = []testCase{
	{"FiltersPageFully", func(t *testing.T, b *bundle) {
		// Matches are spread among non-matching sessions of alice and
		// sessions of bob that would match, so a filter applied after
		// LIMIT (or ignoring the owner) yields short or wrong pages.
		var specs []filterSession
		for i := range 12 {
			name, version := "assistant", "1"
			switch i % 3 {
			case 1:
				version = "2"
			case 2:
				name = "other"
			}
			status := []rtstore.RunStatus{"", rtstore.StatusRunning, rtstore.StatusCompleted, rtstore.StatusFailed}[i%4]
			specs = append(specs, filterSession{"alice", name, version, status},
				filterSession{"bob", name, version, status})
		}
		ids := make([]string, len(specs))
		for i, sp := range specs {
			ids[i] = b.filterSession(t, sp)
		}
		cases := []struct {
			name   string
			params rtstore.SessionListParams
			keep   func(filterSession) bool
		}{
			{"agent name", rtstore.SessionListParams{AgentName: "assistant"},
				func(s filterSession) bool { return s.name == "assistant" }},
			{"agent name and version", rtstore.SessionListParams{AgentName: "assistant", AgentVersion: "2"},
				func(s filterSession) bool { return s.name == "assistant" && s.version == "2" }},
			{"status", rtstore.SessionListParams{LatestRun: rtstore.SessionStatusFilter{Status: rtstore.StatusCompleted}},
				func(s filterSession) bool { return s.status == rtstore.StatusCompleted }},
			{"no run", rtstore.SessionListParams{LatestRun: rtstore.SessionStatusFilter{NoRun: true}},
				func(s filterSession) bool { return s.status == "" }},
			{"agent and status", rtstore.SessionListParams{AgentName: "other",
				LatestRun: rtstore.SessionStatusFilter{Status: rtstore.StatusRunning}},
				func(s filterSession) bool { return s.name == "other" && s.status == rtstore.StatusRunning }},
			{"unknown agent", rtstore.SessionListParams{AgentName: "nobody"},
				func(filterSession) bool { return false }},
			{"no filter", rtstore.SessionListParams{},
				func(filterSession) bool { return true }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var want []string
				for i, sp := range specs {
					if sp.principal == "alice" && tc.keep(sp) {
						want = append(want, ids[i])
					}
				}
				const limit = 2
				var got []string
				after := int64(0)
				for range len(specs) {
					p := tc.params
					p.Principal, p.ListParams = "alice", rtstore.ListParams{After: after, Limit: limit}
					page, err := b.store.SessionList(t.Context(), &p)
					require.NoError(t, err)
					for _, s := range page {
						require.Equal(t, "alice", s.Principal)
						require.Greater(t, s.Seq, after)
						after = s.Seq
						got = append(got, s.ID)
					}
					if len(page) < limit {
						break
					}
				}
				// Every page but the last is full: the number of pages
				// is the fewest that hold the matches.
				require.Equal(t, want, got)
			})
		}
	}},
}

// filterSession inserts a session of sp's owner and agent whose latest
// run has sp's status (no run for ""), and returns its id.
func (b *bundle) filterSession(t *testing.T, sp filterSession) string {
	t.Helper()
	s := &rtstore.SessionRow{
		ID: "ses-" + uuid.NewString(), Principal: sp.principal, AgentName: sp.name, AgentVersion: sp.version,
		AgentConfig: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`),
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	require.NoError(t, b.store.SessionInsert(t.Context(), s))
	if sp.status == "" {
		return s.ID
	}
	run := b.newRun(t, s.ID)
	if sp.status != rtstore.StatusRunning {
		require.NoError(t, b.store.Commit(t.Context(), commitFor(run, sp.status, "done")))
	}
	return s.ID
}
