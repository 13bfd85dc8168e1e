package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxbundle"
	"hxd/internal/hxtest"
)

// cliResult is what one in-process hxd command printed and returned.
type cliResult struct {
	stdout, stderr string
	code           int // the exit code main would use
}

// runCLI runs `hxd <args>` in-process with an empty environment.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLIEnv(t, nil, args...)
}

// runCLIEnv runs `hxd <args>` in-process with the environment vars.
func runCLIEnv(t *testing.T, vars map[string]string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, env{
		getenv: func(k string) string { return vars[k] }, stdout: &stdout, stderr: &stderr,
		exit: func(code int) { t.Errorf("unexpected exit(%d)", code) },
	})
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		res.code = 1
		var ee *exitError
		if errors.As(err, &ee) {
			res.code = ee.code
		}
		if ee == nil || ee.err != nil {
			res.stderr += "hxd: " + err.Error() + "\n"
		}
	}
	return res
}

// recordedRun creates a session of agent (recording as given) on d, runs
// message to its end and returns the session and run ids.
func recordedRun(t *testing.T, d *daemon, name string, recording bool, message string) (sid, rid string) {
	t.Helper()
	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{
		"agent": map[string]string{"name": name, "version": "v1"}, "recording": recording,
	})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sid = decode(t, body)["session_id"].(string)
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs?wait=30", map[string]any{"message": message})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	run := decode(t, body)
	require.Equal(t, "completed", run["status"], string(body))
	return sid, run["run_id"].(string)
}

// export POSTs an export policy (nil: no body) and returns the response
// and its bytes.
func export(t *testing.T, d *daemon, rid string, policy any) (*http.Response, []byte) {
	t.Helper()
	if policy == nil {
		return d.do(t, http.MethodPost, "/runs/"+rid+"/export", nil)
	}
	return d.do(t, http.MethodPost, "/runs/"+rid+"/export", policy)
}

// upload POSTs archive bytes to a /bundles operation.
func upload(t *testing.T, d *daemon, path string, data []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, d.base+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/vnd.harnessx.incident+zip")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer hxtest.Close(t, resp.Body)
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, out
}

// verifyReport is the VerificationReport of the API and of `hxd verify --json`.
type verifyReport struct {
	Valid       bool             `json:"valid"`
	Complete    bool             `json:"complete"`
	RecordCount int              `json:"record_count"`
	Issues      []string         `json:"issues"`
	Details     []map[string]any `json:"details"`
}

func verifyOverHTTP(t *testing.T, d *daemon, data []byte) verifyReport {
	t.Helper()
	resp, body := upload(t, d, "/bundles/verify", data)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var rep verifyReport
	require.NoError(t, json.Unmarshal(body, &rep), string(body))
	require.NotNil(t, rep.Issues, "issues is an array: %s", body)
	require.NotNil(t, rep.Details, "details is an array: %s", body)
	return rep
}

// TestServeExportVerifyPlayback: a recorded demo run exports with
// payloads as a complete bundle that the server verifies and plays back;
// the default export is metadata only; every refusal is a problem sent
// before any byte of the archive.
func TestServeExportVerifyPlayback(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"))
	sid, rid := recordedRun(t, d, "invoice-analyst", true, "Analyze overdue invoices for the demo account")

	resp, full := export(t, d, rid, map[string]any{"include_payloads": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(full))
	require.Equal(t, "application/vnd.harnessx.incident+zip", resp.Header.Get("Content-Type"))
	require.Equal(t, `attachment; filename="`+rid+`.hx"`, resp.Header.Get("Content-Disposition"))
	require.Equal(t, strconv.Itoa(len(full)), resp.Header.Get("Content-Length"))
	require.Equal(t, "PK\x03\x04", string(full[:4]))

	rep := verifyOverHTTP(t, d, full)
	require.True(t, rep.Valid, "%+v", rep)
	require.True(t, rep.Complete, "%+v", rep)
	require.Empty(t, rep.Issues)
	require.Greater(t, rep.RecordCount, 14)

	// Playback: manifest, the records in order, the report, no artifacts.
	resp, body := upload(t, d, "/bundles/playback", full)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var played struct {
		Manifest  map[string]any   `json:"manifest"`
		Records   []map[string]any `json:"records"`
		Report    verifyReport     `json:"report"`
		Artifacts []map[string]any `json:"artifacts"`
	}
	require.NoError(t, json.Unmarshal(body, &played))
	require.Equal(t, "harness-x.incident", played.Manifest["format"])
	require.Equal(t, rid, played.Manifest["run_id"])
	require.Equal(t, sid, played.Manifest["session_id"])
	require.Equal(t, "completed", played.Manifest["status"])
	require.Equal(t, "n/a", played.Manifest["python_version"])
	require.Equal(t, map[string]any{"name": "invoice-analyst", "version": "v1"}, played.Manifest["agent"])
	require.Len(t, played.Records, rep.RecordCount)
	for i, r := range played.Records {
		require.EqualValues(t, i+1, r["seq"])
		require.Equal(t, "present", r["capture"])
	}
	require.Equal(t, "run.started", played.Records[0]["kind"])
	require.True(t, played.Report.Complete)
	require.NotNil(t, played.Artifacts)
	require.Empty(t, played.Artifacts)

	// The default export is metadata only: valid, incomplete.
	resp, meta := export(t, d, rid, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(meta))
	rep = verifyOverHTTP(t, d, meta)
	require.True(t, rep.Valid)
	require.False(t, rep.Complete)
	require.Equal(t, []string{"payloads_omitted_or_redacted"}, rep.Issues)
	resp, meta2 := export(t, d, rid, map[string]any{})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(meta2))
	require.Equal(t, rep, verifyOverHTTP(t, d, meta2))

	// Redaction rules apply: the second model answer's text is scrubbed.
	resp, redacted := export(t, d, rid, map[string]any{"include_payloads": true, "redact": []any{
		map[string]any{"pattern": `\$1,500`, "replace": "$X"},
		map[string]any{"kinds": []string{"model.started"}, "action": "omit"},
		map[string]any{"kinds": []string{"model.response"}, "pointer": "/usage", "action": "replace", "value": nil},
	}})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(redacted))
	require.NotContains(t, string(redacted), "$1,500")
	require.Contains(t, string(full), "$1,500")
	rep = verifyOverHTTP(t, d, redacted)
	require.True(t, rep.Valid)
	require.Equal(t, []string{"payloads_omitted_or_redacted"}, rep.Issues)

	// Refusals, each a problem before any byte.
	resp, body = export(t, d, rid, map[string]any{"include_artifacts": true})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "invalid_policy")
	require.Equal(t, "Artifact export also requires include_payloads=True", decode(t, body)["detail"])
	resp, body = export(t, d, rid, map[string]any{"limits": map[string]any{"max_records": 3}})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "bundle_limit_exceeded")
	require.Equal(t, "Incident exceeds the configured record limit", decode(t, body)["detail"])
	resp, body = export(t, d, rid, map[string]any{"include_payloads": true, "limits": map[string]any{"max_bytes": 2000}})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "bundle_limit_exceeded")
	require.Contains(t, []any{"Incident exceeds byte limit", "Incident exceeds member limits"}, decode(t, body)["detail"])
	resp, body = export(t, d, rid, map[string]any{"redact": []any{map[string]any{"action": "explode"}}})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "invalid_policy")
	resp, body = export(t, d, rid, map[string]any{"limits": map[string]any{"max_bytes": 0}})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "invalid_policy")
	require.Equal(t, "Bundle limits must be positive integers", decode(t, body)["detail"])
	resp, body = export(t, d, rid, map[string]any{"include_payloads": "yes"})
	requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")
	resp, body = export(t, d, "no-such-run", nil)
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	_, unrecorded := recordedRun(t, d, "invoice-analyst", false, "Analyze overdue invoices for the demo account")
	resp, body = export(t, d, unrecorded, map[string]any{"include_payloads": true})
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "recording_disabled")

	// Garbage: verify answers 200 invalid, playback 422 invalid_bundle.
	rep = verifyOverHTTP(t, d, []byte("this is not a zip archive"))
	require.Equal(t, verifyReport{Issues: []string{"Invalid incident bundle (BadZipFile)"}, Details: rep.Details}, rep)
	rep = verifyOverHTTP(t, d, nil)
	require.False(t, rep.Valid)
	resp, body = upload(t, d, "/bundles/playback", []byte("garbage"))
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "invalid_bundle")
	require.Equal(t, "Invalid incident bundle (BadZipFile)", decode(t, body)["detail"])
	// A tampered archive: one byte of the records changed.
	tampered := bytes.Replace(full, []byte("Overdue balance: $1,500."), []byte("Overdue balance: $9,500."), 1)
	require.NotEqual(t, full, tampered)
	rep = verifyOverHTTP(t, d, tampered)
	require.False(t, rep.Valid)
	require.Len(t, rep.Issues, 1)
	resp, body = upload(t, d, "/bundles/playback", tampered)
	requireProblem(t, resp, body, http.StatusUnprocessableEntity, "invalid_bundle")
	require.Equal(t, rep.Issues[0], decode(t, body)["detail"])

	// Artifacts: unknown keys of any shape are 404.
	for _, key := range []string{strings.Repeat("a", 64), "nope", strings.Repeat("A", 64)} {
		resp, body = d.do(t, http.MethodGet, "/artifacts/"+key, nil)
		requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	}
}

const spillerAgent = `name: spiller
version: v1
max_result_chars: 50
model:
  provider: scripted
  script:
    - tool_calls: [{id: big, name: echo, input: {text: "%s"}}]
    - text: done
tools:
  - name: echo
    kind: builtin
    replay_policy: safe
`

// TestServeArtifacts: a tool result longer than max_result_chars becomes
// an artifact the owner can download; an export with include_artifacts
// carries it and verifies complete, one without lists it as omitted.
func TestServeArtifacts(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789", 30)
	agents := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(agents, "spiller.yaml"), []byte(strings.Replace(spillerAgent, "%s", long, 1)), 0o600))
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), "--agents", agents)
	_, rid := recordedRun(t, d, "spiller", true, "go")

	// The artifact key is in the tool_result event's content.
	resp, body := d.do(t, http.MethodGet, "/runs/"+rid+"/events", nil, "Accept", "application/json")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var key string
	for _, ev := range decode(t, body)["events"].([]any) {
		ev := ev.(map[string]any)
		if ev["type"] != "tool_result" {
			continue
		}
		content, err := json.Marshal(ev["data"])
		require.NoError(t, err)
		m := regexp.MustCompile(`artifact://([0-9a-f]{64})`).FindStringSubmatch(string(content))
		require.NotNil(t, m, "no artifact URI in %s", content)
		key = m[1]
	}
	require.NotEmpty(t, key)

	resp, data := d.do(t, http.MethodGet, "/artifacts/"+key, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(data))
	require.Equal(t, "application/octet-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, strconv.Itoa(len(data)), resp.Header.Get("Content-Length"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Contains(t, string(data), long)

	resp, withArtifacts := export(t, d, rid, map[string]any{"include_payloads": true, "include_artifacts": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(withArtifacts))
	rep := verifyOverHTTP(t, d, withArtifacts)
	require.True(t, rep.Complete, "%+v", rep)
	resp, body = upload(t, d, "/bundles/playback", withArtifacts)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	arts := decode(t, body)["artifacts"].([]any)
	require.Equal(t, []any{map[string]any{"sha256": key, "size": float64(len(data))}}, arts)

	resp, without := export(t, d, rid, map[string]any{"include_payloads": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(without))
	rep = verifyOverHTTP(t, d, without)
	require.True(t, rep.Valid)
	require.Equal(t, []string{"artifacts_unavailable"}, rep.Issues)
}

// TestExportCLI: `hxd export` on the store of a stopped daemon writes a
// private bundle that verifies; it never overwrites and leaves no
// temporary file; verify and playback answer with their exit codes.
func TestExportCLI(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "hxd.db")
	d := startDaemon(t, db)
	sid, rid := recordedRun(t, d, "invoice-analyst", true, "Analyze overdue invoices for the demo account")
	usid, unrecorded := recordedRun(t, d, "invoice-analyst", false, "Analyze overdue invoices for the demo account")
	d.stop()

	out := t.TempDir()
	full := filepath.Join(out, "full.hx")
	res := runCLI(t, "export", "--db", db, "--session", sid, "--run", rid, "--output", full, "--include-payloads")
	require.Equal(t, 0, res.code, res.stderr)
	require.Contains(t, res.stderr, "exporting run "+rid)
	require.Regexp(t, `wrote `+regexp.QuoteMeta(full)+` \(\d+ bytes, \d+ records\)`, res.stderr)
	st, err := os.Stat(full)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	original, err := os.ReadFile(full)
	require.NoError(t, err)

	// Never overwrites: exit 1, the file unchanged, no temporary file left.
	res = runCLI(t, "export", "--db", db, "--session", sid, "--run", rid, "--output", full)
	require.Equal(t, 1, res.code, res.stderr)
	require.Contains(t, res.stderr, "already exists")
	again, err := os.ReadFile(full)
	require.NoError(t, err)
	require.Equal(t, original, again)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the bundle is in the folder")

	meta := filepath.Join(out, "meta.hx")
	res = runCLI(t, "export", "--db", db, "--session", sid, "--run", rid, "--output", meta)
	require.Equal(t, 0, res.code, res.stderr)

	// Redaction rules from a file.
	rules := filepath.Join(t.TempDir(), "rules.json")
	require.NoError(t, os.WriteFile(rules, []byte(`[{"pattern":"\\$1,500","replace":"$$X"}]`), 0o600))
	scrubbed := filepath.Join(t.TempDir(), "scrubbed.hx")
	res = runCLI(t, "export", "--db", db, "--session", sid, "--run", rid, "--output", scrubbed, "--include-payloads", "--redact-file", rules)
	require.Equal(t, 0, res.code, res.stderr)
	data, err := os.ReadFile(scrubbed)
	require.NoError(t, err)
	require.NotContains(t, string(data), "$1,500")
	require.Contains(t, string(data), "$X")
	require.Contains(t, string(original), "$1,500")
	require.NoError(t, os.WriteFile(rules, []byte(`{"pattern":"x"}`), 0o600))
	res = runCLI(t, "export", "--db", db, "--session", sid, "--run", rid, "--output", filepath.Join(out, "x.hx"), "--redact-file", rules)
	require.Equal(t, 1, res.code)
	require.Contains(t, res.stderr, "JSON array of rules")

	// Failures: exit 1 with a message, nothing written.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unrecorded", []string{"--session", usid, "--run", unrecorded}, "not recorded"},
		{"foreign session", []string{"--session", "other", "--run", rid}, "not found"},
		{"missing store", []string{"--db", filepath.Join(out, "none.db"), "--session", sid, "--run", rid}, "open store"},
	} {
		args := append([]string{"export", "--db", db, "--output", filepath.Join(out, "x.hx")}, tc.args...)
		res := runCLI(t, args...)
		require.Equal(t, 1, res.code, "%s: %s", tc.name, res.stderr)
		require.Contains(t, res.stderr, tc.want, tc.name)
	}
	_, err = os.Stat(filepath.Join(out, "none.db"))
	require.ErrorIs(t, err, os.ErrNotExist, "validate-only open creates nothing")
	res = runCLI(t, "export", "--db", db, "--run", rid, "--output", filepath.Join(out, "x.hx"))
	require.Equal(t, 2, res.code, "usage error")
	entries, err = os.ReadDir(out)
	require.NoError(t, err)
	require.Len(t, entries, 2, "full.hx and meta.hx only")

	// verify: 0 complete, 1 incomplete, 2 invalid or unreadable.
	res = runCLI(t, "verify", full)
	require.Equal(t, 0, res.code, res.stdout+res.stderr)
	// Signed with the store's generated key, which verify (no --trust)
	// does not know.
	require.Regexp(t, `^valid: true, complete: true, records: \d+\nsignature: unknown_key \(kid [A-Za-z0-9_-]{43}\)\n$`, res.stdout)
	res = runCLI(t, "verify", meta)
	require.Equal(t, 1, res.code)
	require.Contains(t, res.stdout, "valid: true, complete: false, records: ")
	require.Contains(t, res.stdout, "\npayloads_omitted_or_redacted\n")
	garbage := filepath.Join(out, "garbage.hx")
	require.NoError(t, os.WriteFile(garbage, []byte("not a zip"), 0o600))
	res = runCLI(t, "verify", garbage)
	require.Equal(t, 2, res.code)
	require.Contains(t, res.stdout, "valid: false, complete: false, records: 0\nInvalid incident bundle (BadZipFile)\n")
	res = runCLI(t, "verify", filepath.Join(out, "missing.hx"))
	require.Equal(t, 2, res.code)
	require.Contains(t, res.stderr, "cannot read bundle")

	res = runCLI(t, "verify", "--json", meta)
	require.Equal(t, 1, res.code)
	var rep verifyReport
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep), res.stdout)
	require.True(t, rep.Valid)
	require.False(t, rep.Complete)
	require.Equal(t, []string{"payloads_omitted_or_redacted"}, rep.Issues)
	res = runCLI(t, "verify", "--json", garbage)
	require.Equal(t, 2, res.code)
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep), res.stdout)
	require.Equal(t, []string{"Invalid incident bundle (BadZipFile)"}, rep.Issues)

	// playback: the timeline, tool records with their execution key.
	res = runCLI(t, "playback", full)
	require.Equal(t, 0, res.code, res.stderr)
	lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	require.Len(t, lines, 15)
	require.Regexp(t, `^ +\d+ step=1 attempt=1 model\.started$`, lines[0])
	require.Regexp(t, `^ +\d+ step=1 attempt=1 tool\.started key=`+regexp.QuoteMeta(rid)+`:1:overdue$`, lines[6])
	require.Regexp(t, `^Verified \d+ records\. Playback made zero model/tool calls\.$`, lines[14])
	res = runCLI(t, "playback", garbage)
	require.Equal(t, 2, res.code)
	require.Contains(t, res.stderr, "Invalid incident bundle (BadZipFile)")
}

// TestTimelineReadsExactKeys: a record may carry extra keys (REFERENCE
// §7.3); ones that differ from the timeline's only in case, or in type,
// change nothing it prints.
func TestTimelineReadsExactKeys(t *testing.T) {
	t.Parallel()
	played := &hxbundle.Played{Records: []json.RawMessage{
		json.RawMessage(`{"seq":10,"kind":"tool.dispatched","step_id":"1","attempt_id":"1","execution_key":"r:1:c","KIND":"model.completed","Step_ID":"99","SEQ":77,"Execution_Key":"forged"}`),
		json.RawMessage(`{"seq":11,"kind":"tool.returned","step_id":"1","attempt_id":"1","execution_key":"r:1:c","Seq":"x","ATTEMPT_ID":7}`),
		json.RawMessage(`{"seq":12,"kind":"event","step_id":"1","attempt_id":"1","execution_key":null,"Kind":"model.started"}`),
	}}
	var out bytes.Buffer
	require.NoError(t, printTimeline(&out, played, true))
	require.Equal(t, " 10 step=1 attempt=1 tool.dispatched key=r:1:c\n 11 step=1 attempt=1 tool.returned key=r:1:c\n", out.String())
}
