package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// benchAgent is agent bench@v1: a scripted model whose first 10 steps
// each call the builtin tool echo, then answers "done" (11 model calls
// and 10 tool calls: 21 effects).
func benchAgent() string {
	var b strings.Builder
	b.WriteString("name: bench\nversion: v1\nmodel:\n  provider: scripted\n  script:\n")
	for i := 1; i <= benchSteps; i++ {
		fmt.Fprintf(&b, "    - tool_calls: [{id: t%d, name: echo, input: {text: step%d}}]\n", i, i)
	}
	b.WriteString("    - text: done\n")
	b.WriteString("tools:\n  - name: echo\n    kind: builtin\n    replay_policy: safe\n")
	b.WriteString("    input_schema: {type: object, properties: {text: {type: string}}}\n")
	return b.String()
}

// writeAgents writes the agents folder of hxd's processes.
func (e *env) writeAgents() (string, error) {
	dir, err := e.tempDir()
	if err != nil {
		return "", err
	}
	agents := filepath.Join(dir, "agents")
	if err := os.MkdirAll(agents, 0o700); err != nil {
		return "", err
	}
	return agents, os.WriteFile(filepath.Join(agents, "bench.yaml"), []byte(benchAgent()), 0o600)
}

// hxdClient drives an hxd over HTTP.
type hxdClient struct {
	base      string
	debug     string // the --debug-addr listener, "" without
	recording bool
	http      *http.Client
}

func newHTTPClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			MaxIdleConns: conns + 16, MaxIdleConnsPerHost: conns + 16, IdleConnTimeout: time.Minute,
		},
	}
}

// startHxd starts `bin/hxd serve` on a free loopback port with the agents
// folder and extra flags (the store), and waits for /readyz.
func (e *env) startHxd(ctx context.Context, name string, args []string, extraEnv ...string) (*hxdClient, error) {
	return e.startHxdBin(ctx, e.hxdBin, name, args, extraEnv...)
}

// startHxdBin is startHxd with another binary.
func (e *env) startHxdBin(ctx context.Context, bin, name string, args []string, extraEnv ...string) (*hxdClient, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	debug, err := freeAddr()
	if err != nil {
		return nil, err
	}
	argv := append([]string{bin, "serve", "--addr", addr}, args...)
	if bin == e.hxdBin { // a base binary may predate --debug-addr
		argv = append(argv, "--debug-addr", debug)
	}
	p, err := e.start(name, argv, extraEnv...)
	if err != nil {
		return nil, err
	}
	c := &hxdClient{base: "http://" + addr, debug: "http://" + debug, http: newHTTPClient(64)}
	err = p.waitReady(ctx, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/readyz", nil)
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %d", resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// hxdSystem is hxd serve on PostgreSQL (a database of its own) or SQLite
// (a file), driving sessions recorded or not.
func (e *env) hxdSystem(ctx context.Context, name string, pg, recording bool, maxC int) (*system, error) {
	return e.hxdSystemBin(ctx, e.hxdBin, name, pg, recording, maxC)
}

// hxdSystemBin is hxdSystem with another binary.
func (e *env) hxdSystemBin(ctx context.Context, bin, name string, pg, recording bool, maxC int) (*system, error) {
	agents, err := e.writeAgents()
	if err != nil {
		return nil, err
	}
	work, err := e.tempDir()
	if err != nil {
		return nil, err
	}
	args := []string{"--agents", agents, "--workdir", work, "--shutdown-timeout", "2s"}
	s := &system{name: name, effects: effectsPerRun}
	if pg {
		db, url, err := e.createDB(ctx, name)
		if err != nil {
			return nil, err
		}
		s.db = db
		args = append(args, "--database-url", url, "--auto-migrate")
	} else {
		args = append(args, "--db", filepath.Join(work, "hxd.db"))
	}
	c, err := e.startHxdBin(ctx, bin, name, args)
	if err != nil {
		return nil, err
	}
	c.recording = recording
	c.http = newHTTPClient(maxC)
	s.op = func(ctx context.Context, _ int) error { return c.run(ctx) }
	if bin == e.hxdBin {
		s.profile = c.cpuProfile
	}
	return s, nil
}

// post sends body as JSON and decodes the JSON answer into out; a status
// of 300 or more is an error.
func (c *hxdClient) post(ctx context.Context, path string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// run is one op: POST /sessions, then POST /sessions/{id}/runs?wait=60;
// the run must have completed.
func (c *hxdClient) run(ctx context.Context) error {
	var sess struct {
		SessionID string `json:"session_id"`
	}
	if err := c.post(ctx, "/sessions", map[string]any{
		"agent": map[string]any{"name": "bench", "version": "v1"}, "recording": c.recording,
	}, &sess); err != nil {
		return err
	}
	var run struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	if err := c.post(ctx, "/sessions/"+sess.SessionID+"/runs?wait=60", map[string]any{"message": "go"}, &run); err != nil {
		return err
	}
	if run.Status != "completed" {
		return fmt.Errorf("run %s of session %s: status %q, want completed", run.RunID, sess.SessionID, run.Status)
	}
	return nil
}

// cpuProfile fetches a CPU profile of d from the debug listener into file.
func (c *hxdClient) cpuProfile(ctx context.Context, d time.Duration, file string) error {
	secs := max(1, int(math.Floor(d.Seconds())))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.debug+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %d", resp.StatusCode)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
