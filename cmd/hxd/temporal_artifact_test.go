package main

// Artifacts on the Temporal engine (issue 8): a webhook tool's files and a
// result over max_result_chars are stored by the worker in S3 with an
// owner index, referenced in the run's results, and served by
// GET /artifacts/{sha256} to the session's owner only. Needs
// HXD_TEST_TEMPORAL=1 (make test-temporal), like temporal_e2e_test.go.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

func TestTemporalEngineArtifacts(t *testing.T) {
	te := newTemporalEnv(t)
	const csv = "region,orders\nnorth,12\nsouth,7\n"
	long := strings.Repeat("all work and no play ", 20) // 420 characters
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Call struct {
				Name string `json:"name"`
			} `json:"call"`
			Input map[string]any `json:"input"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		if body.Input["what"] == "long" {
			_ = json.NewEncoder(w).Encode(map[string]any{"content": long})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"content":   "report ready",
			"artifacts": []map[string]any{{"media_type": "text/csv", "base64": base64.StdEncoding.EncodeToString([]byte(csv))}},
		})
	}))
	t.Cleanup(hook.Close)
	agentYAML := fmt.Sprintf(`name: reporter
version: v1
max_result_chars: 300
model:
  provider: scripted
  script:
    - tool_calls: [{id: r1, name: hook, input: {what: report}}, {id: r2, name: hook, input: {what: long}}]
    - text: done
tools:
  - name: hook
    kind: webhook
    url: %s
    replay_policy: idempotent
    timeout_seconds: 30
    input_schema: {type: object, properties: {what: {type: string}}}
`, hook.URL)
	agents := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(agents, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(agents, "reporter.yaml"), []byte(agentYAML), 0o600))

	iss := hxtest.NewIssuer(t)
	d := serveInProcess(t, te.getenv, append([]string{"serve", "--engine", "temporal", "--addr", "127.0.0.1:0",
		"--agents", agents, "--shutdown-timeout", "500ms",
		"--auth", "oidc", "--oidc-issuer", iss.URL, "--oidc-audience", hxtest.IssuerAudience,
		"--bundle-signing-key", testSigningKey(t)}, te.flags...))
	w := te.worker(t, "worker", agents)
	alice := bearerHdr(iss.Token(t, "alice", nil))
	bob := bearerHdr(iss.Token(t, "bob", nil))

	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{"agent": map[string]any{"name": "reporter", "version": "v1"}}, alice...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sid := decode(t, body)["session_id"].(string)
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "report please"}, alice...)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	runID := decode(t, body)["run_id"].(string)
	var run map[string]any
	require.Eventually(t, func() bool {
		resp, body := d.do(t, http.MethodGet, "/runs/"+runID, nil, alice...)
		if resp.StatusCode != http.StatusOK {
			return false
		}
		run = decode(t, body)
		return run["status"] != "running"
	}, 2*time.Minute, 200*time.Millisecond)
	require.Equal(t, "completed", run["status"], "run %v\nworker log:\n%s", run, w.log())

	csvKey, longKey := sha256Hex(csv), sha256Hex(long)

	t.Run("results carry the references", func(t *testing.T) {
		resp, body := d.do(t, http.MethodGet, "/runs/"+runID+"/events", nil, withHdr(alice, "Accept", "application/json")...)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		var results []string
		for _, ev := range decode(t, body)["events"].([]any) {
			e := ev.(map[string]any)
			if e["type"] == "tool_result" {
				raw, err := json.Marshal(e["data"])
				require.NoError(t, err)
				results = append(results, string(raw))
			}
		}
		all := strings.Join(results, "\n")
		require.Contains(t, all, fmt.Sprintf(`[artifact://%s text/csv, %d bytes]`, csvKey, len(csv)))
		require.Contains(t, all, fmt.Sprintf(`[Result truncated: %d characters. Full result: artifact://%s]`, len(long), longKey))
		require.NotContains(t, all, long, "the long result is spilled, not carried")
	})

	t.Run("the owner reads the artifacts", func(t *testing.T) {
		for key, want := range map[string]string{csvKey: csv, longKey: long} {
			resp, body := d.do(t, http.MethodGet, "/artifacts/"+key, nil, alice...)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			require.Equal(t, want, string(body))
			require.Equal(t, "application/octet-stream", resp.Header.Get("Content-Type"))
			require.Equal(t, `"`+key+`"`, resp.Header.Get("ETag"))
		}
	})

	t.Run("anything else is 404", func(t *testing.T) {
		for _, c := range []struct {
			name string
			hdr  []string
			key  string
		}{
			{"another principal", bob, csvKey},
			{"another principal, spilled result", bob, longKey},
			{"unknown key", alice, sha256Hex("never stored")},
			{"uppercase key", alice, strings.ToUpper(csvKey)},
			{"short key", alice, csvKey[:63]},
			{"not hex", alice, strings.Repeat("z", 64)},
		} {
			t.Run(c.name, func(t *testing.T) {
				resp, body := d.do(t, http.MethodGet, "/artifacts/"+c.key, nil, c.hdr...)
				requireProblem(t, resp, body, http.StatusNotFound, "not_found")
			})
		}
		resp, _ := d.do(t, http.MethodGet, "/artifacts/"+csvKey, nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no token")
	})

	t.Run("owner index in the bucket", func(t *testing.T) {
		objs := s3Objects(t, te.s3)
		for _, key := range []string{csvKey, longKey} {
			require.True(t, objs["harness-x/"+key], "artifact %s stored", key)
			var owners []string
			for k := range objs {
				if rest, ok := strings.CutPrefix(k, "harness-x/owners/"+key+"/"); ok {
					owners = append(owners, rest)
				}
			}
			require.Len(t, owners, 1, "one owner (alice) recorded for %s: %v", key, objs)
			require.Regexp(t, `^[0-9a-f]{64}$`, owners[0], "the principal's SHA-256, never the principal")
		}
	})
	w.stop()
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
