package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
)

// Agents of the streaming tests: one answer streamed in pieces (split
// after each space), and the same with response middleware.
const (
	streamAnswer = "The overdue balance is 1500 dollars and it is due today."
	streamAgents = `name: streamer
version: v1
model:
  provider: scripted
  script:
    - text: "` + streamAnswer + `"
      thinking: "add the two open invoices"
`
	streamMWAgent = `name: streamer-mw
version: v1
model:
  provider: scripted
  script:
    - text: "` + streamAnswer + `"
response_middleware:
  - append_text: " (checked)"
`
)

// startStreamDaemon runs `hxd serve` in-process on 127.0.0.1:0 on the
// SQLite file db with the streaming agents (startAgentsDaemon).
func startStreamDaemon(t *testing.T, db string, extra ...string) *daemon {
	t.Helper()
	return startAgentsDaemon(t, db, map[string]string{"streamer": streamAgents, "streamer-mw": streamMWAgent}, nil, extra...)
}

// startAgentsDaemon runs `hxd serve` in-process on 127.0.0.1:0 on the
// SQLite file db (none: "", for --database-url in extra) with the agent
// files given (name → YAML) and the environment vars; extra args are
// appended.
func startAgentsDaemon(t *testing.T, db string, files, vars map[string]string, extra ...string) *daemon {
	t.Helper()
	agents := filepath.Join(t.TempDir(), "agents")
	require.NoError(t, os.MkdirAll(agents, 0o700))
	for name, yaml := range files {
		require.NoError(t, os.WriteFile(filepath.Join(agents, name+".yaml"), []byte(yaml), 0o600))
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrCh := make(chan string, 1)
	errCh := make(chan error, 1)
	args := []string{"serve", "--addr", "127.0.0.1:0"}
	if db != "" {
		args = append(args, "--db", db)
	}
	args = append(append(args, "--agents", agents, "--workdir", t.TempDir(), "--shutdown-timeout", "200ms"), extra...)
	go func() {
		errCh <- run(ctx, args, env{
			getenv: func(k string) string { return vars[k] }, stdout: io.Discard, stderr: io.Discard,
			onListen: func(addr string) { addrCh <- addr },
		})
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case err := <-errCh:
		cancel()
		t.Fatalf("hxd serve exited: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("hxd serve did not start")
	}
	d := &daemon{base: "http://" + addr, db: db}
	stopped := false
	d.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-errCh)
	}
	t.Cleanup(d.stop)
	return d
}

// streamedRun creates a recording session of agent on d and submits
// message with stream, waiting for the run to end; it returns the run.
func streamedRun(t *testing.T, d *daemon, agentName string) map[string]any {
	t.Helper()
	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{
		"agent": map[string]string{"name": agentName, "version": "v1"}, "recording": true,
	})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sid := decode(t, body)["session_id"].(string)
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs?wait=30", map[string]any{"message": "how much is overdue?", "stream": true})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	run := decode(t, body)
	require.Equal(t, "completed", run["status"], string(body))
	return run
}

// TestServeStreamSSE: a run submitted with stream shows its answer on
// SSE as text_delta (and thinking_delta) frames before run_result; their
// concatenation is the run's output. With response middleware one
// text_delta after the call holds the post-middleware text.
func TestServeStreamSSE(t *testing.T) {
	t.Parallel()
	requireStreamSSE(t, startStreamDaemon(t, filepath.Join(t.TempDir(), "hxd.db")))
}

// TestPostgresServeStream: the same on PostgreSQL, whose delta-only
// commits go through the group committer; the streamed run's bundle
// verifies.
func TestPostgresServeStream(t *testing.T) {
	t.Parallel()
	dbURL, schema := testDatabase(t)
	d := startStreamDaemon(t, "", "--database-url", dbURL, "--schema", schema, "--auto-migrate", "--bundle-signing-key", testSigningKey(t))
	rid := requireStreamSSE(t, d)
	rep := exportAndVerify(t, d.base, rid)
	require.True(t, rep.Valid, "%+v", rep)
	require.True(t, rep.Complete, "%+v", rep)
}

// requireStreamSSE runs the streamer agents on d and checks what SSE
// shows; it returns the streamer's run id.
func requireStreamSSE(t *testing.T, d *daemon) string {
	t.Helper()

	run := streamedRun(t, d, "streamer")
	require.Equal(t, streamAnswer, run["output"])
	rid := run["run_id"].(string)
	frames := readSSE(t, d, "/runs/"+rid+"/events", "Accept", "text/event-stream")
	var text, thinking strings.Builder
	result := -1
	for i, f := range frames {
		switch f.event {
		case "text_delta":
			require.Equal(t, -1, result, "text_delta after run_result")
			text.WriteString(f.data["data"].(string))
		case "thinking_delta":
			thinking.WriteString(f.data["data"].(string))
		case "run_result":
			result = i
		}
	}
	require.NotEqual(t, -1, result, "no run_result frame")
	require.Equal(t, streamAnswer, text.String())
	require.Equal(t, "add the two open invoices", thinking.String())

	run = streamedRun(t, d, "streamer-mw")
	frames = readSSE(t, d, "/runs/"+run["run_id"].(string)+"/events", "Accept", "text/event-stream")
	var deltas []string
	for _, f := range frames {
		if f.event == "text_delta" {
			deltas = append(deltas, f.data["data"].(string))
		}
	}
	require.Equal(t, []string{streamAnswer + " (checked)"}, deltas)
	return rid
}

// TestServeStreamBundle: the export of a streamed recording run verifies
// with `hxd verify`, and its delta `event` records have no checkpoint of
// their own: model.started's checkpoint, the delta records, then
// model.response.
func TestServeStreamBundle(t *testing.T) {
	t.Parallel()
	d := startStreamDaemon(t, filepath.Join(t.TempDir(), "hxd.db"))
	run := streamedRun(t, d, "streamer")
	rid := run["run_id"].(string)
	resp, full := export(t, d, rid, map[string]any{"include_payloads": true})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(full))
	rep := verifyOverHTTP(t, d, full)
	require.True(t, rep.Valid, "%+v", rep)
	require.True(t, rep.Complete, "%+v", rep)

	path := filepath.Join(t.TempDir(), rid+".hx")
	require.NoError(t, os.WriteFile(path, full, 0o600))
	res := runCLI(t, "verify", path)
	require.Zero(t, res.code, "hxd verify: %s %s", res.stdout, res.stderr)

	resp, body := upload(t, d, "/bundles/playback", full)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var played struct {
		Records []struct {
			Kind    string         `json:"kind"`
			Payload map[string]any `json:"payload"`
		} `json:"records"`
	}
	require.NoError(t, json.Unmarshal(body, &played))
	var kinds []string
	for _, r := range played.Records {
		k := r.Kind
		if k == string(journal.KindEvent) {
			k += ":" + r.Payload["type"].(string)
		}
		kinds = append(kinds, k)
	}
	start := indexOfKind(kinds, "model.started")
	response := indexOfKind(kinds, "model.response")
	require.Positive(t, start, kinds)
	require.Equal(t, "checkpoint", kinds[start+1], kinds)
	between := kinds[start+2 : response]
	require.NotEmpty(t, between, kinds)
	for _, k := range between {
		require.Contains(t, []string{"event:text_delta", "event:thinking_delta"}, k, kinds)
	}
}

func indexOfKind(kinds []string, k string) int {
	for i, v := range kinds {
		if v == k {
			return i
		}
	}
	return -1
}
