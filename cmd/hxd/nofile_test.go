package main

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeDrivesRunsBeyondOpenFileLimit: `hxd serve` on SQLite with an
// open-file limit of 64 drives 200 runs at once, each asleep in a tool
// while its process holds the session's lock: every submit is accepted
// and every run is running at the same time (issue 18 item 4: a lock file
// per driven run capped them at the limit).
func TestServeDrivesRunsBeyondOpenFileLimit(t *testing.T) {
	t.Parallel()
	const runs = 200
	agents := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(agents, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(agents, "sleeper.yaml"), []byte(napAgent("sleeper", 600, "")), 0o600))
	db := filepath.Join(t.TempDir(), "hxd.db")
	c := startHxd(t, "hxd", db, agents, envNoFile+"=64")

	rids := make([]string, 0, runs)
	for range runs {
		sid := c.createSession("sleeper")
		code, m := c.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "sleep"})
		require.Equal(t, http.StatusAccepted, code, "run %d: %v", len(rids)+1, m)
		rids = append(rids, m["run_id"].(string))
	}
	for _, rid := range rids {
		require.Equal(t, "running", c.getRun(rid)["status"], rid)
	}
}
