package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlightRecorderDemo: `hxd demo flight-recorder` reproduces REFERENCE
// §10.1: the answer, the model/tool timeline (the failed first attempt,
// its retry, the tool, the second step), the record count and the bundle
// path; the bundle is private and complete; the temporary database is
// gone; a second run refuses to overwrite the bundle.
func TestFlightRecorderDemo(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "x.hx")
	tmp := t.TempDir()
	res := runCLIEnv(t, map[string]string{"TMPDIR": tmp}, "demo", "flight-recorder", "--output", out)
	require.Equal(t, 0, res.code, res.stdout+res.stderr)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "the temporary folder is deleted")

	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	require.Len(t, lines, 17, res.stdout)
	require.Equal(t, "Overdue balance: $1,500. (synthetic fixture)", lines[0])
	boundary := regexp.MustCompile(`^( {2}\d| \d{2}|\d{3,}) step=(\d+) attempt=(\d+) ([a-z.]+)$`)
	var got []string
	lastSeq := ""
	for _, l := range lines[1:15] {
		m := boundary.FindStringSubmatch(l)
		require.NotNil(t, m, "boundary line %q", l)
		require.NotEqual(t, lastSeq, m[1])
		lastSeq = m[1]
		got = append(got, m[4]+"@"+m[2]+"/"+m[3])
	}
	require.Equal(t, []string{
		"model.started@1/1", "model.failed@1/1",
		"model.started@1/2", "model.response@1/2", "model.processed@1/2", "model.completed@1/2",
		"tool.started@1/1", "tool.dispatched@1/1", "tool.returned@1/1", "tool.processed@1/1",
		"model.started@2/1", "model.response@2/1", "model.processed@2/1", "model.completed@2/1",
	}, got)
	require.Regexp(t, `^Verified \d+ records\. Playback made zero model/tool calls\.$`, lines[15])
	require.Equal(t, "Bundle: "+out, lines[16])

	st, err := os.Stat(out)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	v := runCLI(t, "verify", out)
	require.Equal(t, 0, v.code, v.stdout)
	n := regexp.MustCompile(`Verified (\d+) records`).FindStringSubmatch(lines[15])[1]
	require.Contains(t, v.stdout, "records: "+n+"\n")

	before, err := os.ReadFile(out)
	require.NoError(t, err)
	again := runCLI(t, "demo", "flight-recorder", "--output", out)
	require.Equal(t, 1, again.code)
	require.Contains(t, again.stderr, "already exists")
	require.Empty(t, again.stdout)
	after, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, before, after)
}
