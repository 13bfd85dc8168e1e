package main

// The developer entry points (issue 18, items 14 and 16): `make run` says
// it builds bin/hxd, builds it, then runs it; `make test` and `make
// test-temporal` build the pinned test peers (scripts/build-peers.sh) before
// any `go test`, one line of progress per peer.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

// toolEnv is this process's environment without the variables of an
// enclosing make (MAKEFLAGS would hand the child make this one's jobserver)
// or go command, plus extra.
func toolEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "MAKEFLAGS", k == "MFLAGS", k == "MAKELEVEL", k == "MAKEOVERRIDES",
			k == "GOFLAGS", k == "CI", strings.HasPrefix(k, "HXD_"):
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// TestMakeDryRun reads the commands of `make -n TARGET` (nothing is built
// or run, except that make expands sub-makes as dry runs too) and requires
// the given lines in this order.
func TestMakeDryRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed (README.md): %v", err)
	}
	root, err := hxtest.RepoRoot()
	require.NoError(t, err)
	cases := []struct {
		target string
		want   []string // regexps, each matching a later line than the one before
	}{
		{"run", []string{
			`^echo "make run: building bin/hxd .*" >&2$`,
			`go build -trimpath .* -o bin/hxd \./cmd/hxd;`,
			`^bin/hxd serve --demo --addr 127\.0\.0\.1:8080 --db \./hxd\.db$`,
		}},
		{"test", []string{`^bash scripts/build-peers\.sh$`, `^go test -count=1 -timeout 10m \./\.\.\.$`}},
		// The console's unit tests need no npm install: records.js imports nothing.
		{"test/console", []string{`^cd ui && npm test --silent$`}},
		{"test-temporal", []string{`^bash scripts/build-peers\.sh$`, `^HXD_TEST_TEMPORAL=1 go test .*-run 'Temporal' \./cmd/hxd/$`}},
		// A module of its own, run from its folder: DBOS stays out of hxd's go.mod.
		{"bench-peers", []string{`^cd bench/peers && go run \. -repo \.\./\.\. -out \.\./\.\./docs/bench *$`}},
	}
	for _, tc := range cases {
		t.Run(tc.target, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("make", "-n", "--no-print-directory", "GO=go", tc.target)
			cmd.Dir, cmd.Env = root, toolEnv()
			out, err := cmd.Output()
			require.NoError(t, err)
			lines := strings.Split(string(out), "\n")
			at := 0
			for _, w := range tc.want {
				re := regexp.MustCompile(w)
				found := false
				for ; at < len(lines); at++ {
					if re.MatchString(lines[at]) {
						found = true
						break
					}
				}
				require.True(t, found, "make -n %s: no line matching %s after the previous one:\n%s", tc.target, w, out)
			}
		})
	}
}

// TestBuildPeersProgress runs scripts/build-peers.sh on a cache of its own
// (XDG_CACHE_HOME): with every peer in place it builds nothing and says so,
// one line per peer; a binary named by HXD_TEMPORAL_CLI is not built; with
// no module proxy (GOPROXY=off, an empty module cache) each build says it
// starts and fails, which fails the script under CI=true only.
func TestBuildPeersProgress(t *testing.T) {
	t.Parallel()
	root, err := hxtest.RepoRoot()
	require.NoError(t, err)
	scripts := filepath.Join(root, "scripts")
	run := func(t *testing.T, env ...string) (string, error) {
		t.Helper()
		cmd := exec.Command("bash", filepath.Join(scripts, "build-peers.sh"))
		cmd.Dir, cmd.Env = t.TempDir(), toolEnv(env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	peerPath := func(t *testing.T, cache, script string) string {
		t.Helper()
		cmd := exec.Command("bash", filepath.Join(scripts, script), "--path")
		cmd.Env = toolEnv("XDG_CACHE_HOME=" + cache)
		out, err := cmd.Output()
		require.NoError(t, err)
		p := strings.TrimSpace(string(out))
		require.True(t, strings.HasPrefix(p, filepath.Join(cache, "hxd")+"/"), "%s --path: %s", script, p)
		_, statErr := os.Stat(p)
		require.ErrorIs(t, statErr, os.ErrNotExist, "--path builds nothing")
		return p
	}
	scriptsInOrder := []string{"build-hydra.sh", "build-temporal.sh", "build-versitygw.sh"}

	t.Run("cached", func(t *testing.T) {
		t.Parallel()
		cache := t.TempDir()
		var bins []string
		for _, s := range scriptsInOrder {
			p := peerPath(t, cache, s)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
			require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o700))
			bins = append(bins, p)
		}
		out, err := run(t, "XDG_CACHE_HOME="+cache)
		require.NoError(t, err, out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 4, out)
		for i, bin := range bins {
			want := `^peers \[` + strconv.Itoa(i+1) + `/3\] ` + regexp.QuoteMeta(filepath.Base(filepath.Dir(bin))) +
				`: cached, \d+s: ` + regexp.QuoteMeta(bin) + `$`
			require.Regexp(t, want, lines[i])
		}
		require.Regexp(t, `^peers: ready in \d+s$`, lines[3])
		require.Contains(t, bins[0], "hydra-")
		require.Contains(t, bins[1], "temporal-cli-")
		require.Contains(t, bins[2], "versitygw-")

		out, err = run(t, "XDG_CACHE_HOME="+cache, "HXD_TEMPORAL_CLI=/opt/temporal")
		require.NoError(t, err, out)
		require.Contains(t, out, "peers [2/3] build-temporal.sh: not built, HXD_TEMPORAL_CLI=/opt/temporal\n")
		require.NotContains(t, out, bins[1])
	})

	offline := func(t *testing.T) []string {
		return []string{"XDG_CACHE_HOME=" + t.TempDir(), "GOPROXY=off", "GOMODCACHE=" + t.TempDir(),
			"GOTOOLCHAIN=local", "GOFLAGS=-modcacherw"}
	}
	t.Run("builds fail outside CI", func(t *testing.T) {
		t.Parallel()
		out, err := run(t, offline(t)...)
		require.NoError(t, err, out)
		for i, name := range []string{"hydra-", "temporal-cli-", "versitygw-"} {
			prefix := "peers [" + strconv.Itoa(i+1) + "/3] " + name
			require.Regexp(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(prefix)+`\S+: building into .*\(minutes, once per machine\)…$`), out)
			require.Regexp(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(prefix)+`\S+: build FAILED after \d+s \(scripts/build-`), out)
		}
		require.Regexp(t, `(?m)^peers: not built: hydra-\S+ temporal-cli-\S+ versitygw-\S+; `, out)
	})
	t.Run("a failed build fails under CI", func(t *testing.T) {
		t.Parallel()
		out, err := run(t, append(offline(t), "CI=true")...)
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, out)
		require.Contains(t, out, "peers [1/3] hydra-")
		require.NotContains(t, out, "peers [2/3]", "stops at the first failure")
	})
}
