package hxbundle

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDepsOffline proves that verification and playback cannot reach the
// network, a database, a subprocess or hxd's stores, runtime, models or
// tools: none of them is among the package's (non-test, transitive)
// dependencies.
func TestDepsOffline(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	out, err := exec.Command(goTool, "list", "-deps", "hxd/internal/hxbundle").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "hxd/internal/hxbundle")
	forbidden := []string{
		"net", "net/http", "database/sql", "os/exec",
		"hxd/internal/runtime", "hxd/internal/store", "hxd/internal/model", "hxd/internal/tool",
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			require.False(t, dep == f || strings.HasPrefix(dep, f+"/"), "hxbundle depends on %s", dep)
		}
		if strings.HasPrefix(dep, "hxd/") {
			require.True(t, slices.Contains([]string{"hxd/internal/hxbundle", "hxd/internal/journal"}, dep),
				"hxbundle depends on %s; it may use only internal/journal of hxd", dep)
		}
	}
}
