package temporal

import (
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/runtime"
)

func TestSessionMatches(t *testing.T) {
	t.Parallel()
	withRun := func(name, version string, status runtime.RunStatus) runtime.Session {
		s := runtime.Session{ID: "s", LatestRun: &runtime.RunRef{RunID: "r", Status: status}}
		s.Agent.Name, s.Agent.Version = name, version
		return s
	}
	noRun := runtime.Session{ID: "s"}
	noRun.Agent.Name, noRun.Agent.Version = "a", "v1"
	tests := []struct {
		name string
		s    runtime.Session
		p    runtime.SessionListParams
		want bool
	}{
		{"no filter", noRun, runtime.SessionListParams{}, true},
		{"agent name", withRun("a", "v2", "completed"), runtime.SessionListParams{AgentName: "a"}, true},
		{"other agent", withRun("b", "v1", "completed"), runtime.SessionListParams{AgentName: "a"}, false},
		{"agent version", withRun("a", "v1", "completed"), runtime.SessionListParams{AgentName: "a", AgentVersion: "v1"}, true},
		{"other version", withRun("a", "v2", "completed"), runtime.SessionListParams{AgentName: "a", AgentVersion: "v1"}, false},
		{"status", withRun("a", "v1", "failed"), runtime.SessionListParams{Status: "failed"}, true},
		{"other status", withRun("a", "v1", "running"), runtime.SessionListParams{Status: "failed"}, false},
		{"status without run", noRun, runtime.SessionListParams{Status: "failed"}, false},
		{"none without run", noRun, runtime.SessionListParams{NoRun: true}, true},
		{"none with run", withRun("a", "v1", "running"), runtime.SessionListParams{NoRun: true}, false},
		{"agent and status", withRun("a", "v1", "paused"), runtime.SessionListParams{AgentName: "a", Status: "paused"}, true},
		{"agent but not status", withRun("a", "v1", "paused"), runtime.SessionListParams{AgentName: "a", Status: "running"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, sessionMatches(&tt.s, &tt.p))
		})
	}
}
