package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxbundle"
	hxruntime "hxd/internal/runtime"
)

// runHxd runs hxd in-process and returns its stdout.
func runHxd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, env{getenv: func(string) string { return "" }, stdout: &out, stderr: &errOut, exit: func(code int) {
		t.Fatalf("hxd %v exited with %d", args, code)
	}})
	if err != nil {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), err
}

// TestGCCommand: `hxd gc` beside a serving process. A gc that crashes
// after its first session (HXD_CRASH_AFTER=gc.session) leaves that session
// gone and the others whole; a rerun deletes the rest and reports counts
// and bytes as JSON; the server then answers 410 gone for the sessions,
// their runs and a re-sent request id.
func TestGCCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "hxd.db")
	srv := spawnHxdArgs(t, "serve", []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--demo",
		"--workdir", dir, "--shutdown-timeout", "500ms"})
	srv.awaitListening()

	type made struct{ sid, rid, req string }
	var all []made
	for i := range 3 {
		sid := srv.createSession("invoice-analyst")
		req := "req-" + string(rune('a'+i))
		code, m := srv.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "go", "request_id": req})
		require.Contains(t, []int{http.StatusCreated, http.StatusAccepted, http.StatusOK}, code, m)
		rid := m["run_id"].(string)
		require.Equal(t, "completed", srv.settle(rid)["status"])
		all = append(all, made{sid, rid, req})
	}
	waiting := srv.createSession("invoice-analyst") // no run: never deleted

	// Dry run: counts, deletes nothing.
	out, err := runHxd(t, "gc", "--db", db, "--older-than", "1ns", "--dry-run", "--json")
	require.NoError(t, err)
	var rep hxruntime.GCReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.DryRun)
	require.Equal(t, 3, rep.Sessions)
	for _, s := range all {
		code, m := srv.call(http.MethodGet, "/sessions/"+url.PathEscape(s.sid), nil)
		require.Equal(t, http.StatusOK, code, m)
	}

	// A gc process that dies right after its first session.
	gc := spawnHxdArgs(t, "gc", []string{"gc", "--db", db, "--older-than", "1ns"}, "HXD_CRASH_AFTER=gc.session:1")
	require.Equal(t, 42, gc.waitExit(30*time.Second))
	gone := 0
	for _, s := range all {
		code, m := srv.call(http.MethodGet, "/sessions/"+url.PathEscape(s.sid), nil)
		if code == http.StatusGone {
			require.Equal(t, "gone", m["code"])
			gone++
			continue
		}
		require.Equal(t, http.StatusOK, code, m)
		code, m = srv.call(http.MethodGet, "/runs/"+url.PathEscape(s.rid)+"/timeline", nil)
		require.Equal(t, http.StatusOK, code, "a session left is whole: %v", m)
	}
	require.Equal(t, 1, gone)

	// A dry run now reports what the rerun then deletes, bytes and
	// artifacts included, and deletes nothing.
	out, err = runHxd(t, "gc", "--db", db, "--older-than", "1ns", "--dry-run", "--json")
	require.NoError(t, err)
	var dry hxruntime.GCReport
	require.NoError(t, json.Unmarshal([]byte(out), &dry))
	for _, s := range all {
		code, m := srv.call(http.MethodGet, "/runs/"+url.PathEscape(s.rid), nil)
		require.Contains(t, []int{http.StatusOK, http.StatusGone}, code, m)
	}

	// The rerun finishes.
	out, err = runHxd(t, "gc", "--db", db, "--older-than", "1ns", "--json")
	require.NoError(t, err)
	rep = hxruntime.GCReport{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	requireDryMatches(t, dry, rep)
	require.Equal(t, 2, rep.Sessions)
	require.Equal(t, 2, rep.Runs)
	require.Positive(t, rep.Bytes)
	require.EqualValues(t, 6, rep.Tombstones)

	for _, s := range all {
		code, m := srv.call(http.MethodGet, "/sessions/"+url.PathEscape(s.sid), nil)
		require.Equal(t, http.StatusGone, code, m)
		require.Equal(t, "gone", m["code"])
		code, m = srv.call(http.MethodGet, "/runs/"+url.PathEscape(s.rid), nil)
		require.Equal(t, http.StatusGone, code, m)
		code, m = srv.call(http.MethodPost, "/sessions/"+url.PathEscape(s.sid)+"/runs", map[string]any{"message": "go", "request_id": s.req})
		require.Equal(t, http.StatusGone, code, "a re-sent request id never returns the old run: %v", m)
		code, m = srv.call(http.MethodPost, "/sessions", map[string]any{
			"session_id": s.sid, "agent": map[string]string{"name": "invoice-analyst", "version": "v1"},
		})
		require.Equal(t, http.StatusGone, code, "a deleted session id is not taken again: %v", m)
	}
	code, m := srv.call(http.MethodGet, "/sessions/"+url.PathEscape(waiting), nil)
	require.Equal(t, http.StatusOK, code, m)

	// Text report.
	out, err = runHxd(t, "gc", "--db", db, "--older-than", "1ns")
	require.NoError(t, err)
	require.Contains(t, out, "deleted 0 sessions")
	require.Contains(t, out, "6 kept")
}

// TestGCFlags: bad flags exit 2.
func TestGCFlags(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "hxd.db")
	tests := []struct {
		name string
		args []string
	}{
		{"no store", []string{"gc"}},
		{"negative older-than", []string{"gc", "--db", db, "--older-than", "-1h"}},
		{"zero tombstone-for", []string{"gc", "--db", db, "--tombstone-for", "0s"}},
		{"schema without url", []string{"gc", "--db", db, "--schema", "x"}},
		{"argument", []string{"gc", "--db", db, "extra"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := runHxd(t, tt.args...)
			var ee *exitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, 2, ee.code)
		})
	}
}

// TestServeSweeper: serve's background sweeper deletes a session once its
// retention passed and counts it in /metrics.
func TestServeSweeper(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "hxd.db")
	srv := spawnHxdArgs(t, "serve", []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--demo",
		"--workdir", dir, "--shutdown-timeout", "500ms", "--retain-finished-for", "2s", "--gc-interval", "100ms"})
	srv.awaitListening()
	sid := srv.createSession("invoice-analyst")
	kept := srv.createSession("invoice-analyst") // no run: never deleted
	code, m := srv.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "go"})
	require.Equal(t, http.StatusAccepted, code, m)
	require.Equal(t, "completed", srv.settle(m["run_id"].(string))["status"])
	require.Eventually(t, func() bool {
		code, _ := srv.call(http.MethodGet, "/sessions/"+url.PathEscape(sid), nil)
		return code == http.StatusGone
	}, 20*time.Second, 50*time.Millisecond)
	code, m = srv.call(http.MethodGet, "/sessions/"+url.PathEscape(kept), nil)
	require.Equal(t, http.StatusOK, code, m)
	require.Eventually(t, func() bool {
		code, raw, err := srv.try(http.MethodGet, "/metrics", nil)
		return err == nil && code == http.StatusOK &&
			bytes.Contains(raw, []byte("hxd_gc_deleted_sessions_total 1\n")) &&
			bytes.Contains(raw, []byte("hxd_gc_tombstones 2\n"))
	}, 5*time.Second, 50*time.Millisecond)
	srv.stop()
}

// TestServeRetentionFlags: bad retention flags exit 2.
func TestServeRetentionFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--retain-finished-for", "-1h"},
		{"--gc-interval", "0s"},
		{"--tombstone-for", "0s"},
	} {
		_, err := runHxd(t, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "x.db")}, args...)...)
		var ee *exitError
		require.ErrorAs(t, err, &ee, "%v", args)
		require.Equal(t, 2, ee.code, "%v", args)
	}
}

// TestPostgresGCCLI: `hxd gc --database-url --schema` beside the serving
// process deletes the finished session; the owner then gets 410, and a
// bundle exported before stays valid.
func TestPostgresGCCLI(t *testing.T) {
	t.Parallel()
	d, dbURL, schema, sid, rid := pgInvoiceRun(t)
	bundle := filepath.Join(t.TempDir(), "before.hx")
	key := testSigningKey(t)
	res := runCLI(t, "export", "--database-url", dbURL, "--schema", schema, "--session", sid, "--run", rid,
		"--output", bundle, "--include-payloads", "--bundle-signing-key", key)
	require.Equal(t, 0, res.code, res.stderr)

	res = runCLI(t, "gc", "--database-url", dbURL, "--schema", schema, "--older-than", "1ns", "--dry-run", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var dry hxruntime.GCReport
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &dry), res.stdout)
	resp, raw := d.do(t, http.MethodGet, "/sessions/"+url.PathEscape(sid), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a dry run deletes nothing: %s", raw)

	res = runCLI(t, "gc", "--database-url", dbURL, "--schema", schema, "--older-than", "1ns", "--json")
	require.Equal(t, 0, res.code, res.stderr)
	var rep hxruntime.GCReport
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep), res.stdout)
	requireDryMatches(t, dry, rep)
	require.Equal(t, 1, rep.Sessions)
	require.Positive(t, rep.Records)
	require.Positive(t, rep.Bytes)
	require.EqualValues(t, 2, rep.Tombstones)

	resp, raw = d.do(t, http.MethodGet, "/sessions/"+url.PathEscape(sid), nil)
	require.Equal(t, http.StatusGone, resp.StatusCode, string(raw))
	resp, raw = d.do(t, http.MethodGet, "/runs/"+url.PathEscape(rid), nil)
	require.Equal(t, http.StatusGone, resp.StatusCode, string(raw))

	// Its signature, too, depends on nothing the server kept.
	priv, err := os.ReadFile(key)
	require.NoError(t, err)
	pk, err := hxbundle.ParsePrivateKeyPEM(priv)
	require.NoError(t, err)
	trust := filepath.Join(t.TempDir(), "trust.jwks")
	jwks, err := json.Marshal(hxbundle.NewKeySet(pk.Public().(ed25519.PublicKey)).JWKS())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(trust, jwks, 0o600))
	res = runCLI(t, "verify", "--trust", trust, bundle)
	require.Equal(t, 0, res.code, "a bundle exported before deletion stays valid and signed: %s", res.stdout+res.stderr)
}

// requireDryMatches: a dry run reported the sessions, runs, records,
// events, bytes and artifacts the real run after it deleted.
func requireDryMatches(t *testing.T, dry, real hxruntime.GCReport) {
	t.Helper()
	require.True(t, dry.DryRun)
	require.False(t, real.DryRun)
	require.Positive(t, real.Sessions)
	require.Positive(t, real.Bytes)
	counts := func(r hxruntime.GCReport) []int64 {
		return []int64{int64(r.Sessions), int64(r.Runs), int64(r.Records), int64(r.Events), r.Bytes, int64(r.Artifacts), r.ArtifactBytes}
	}
	require.Equal(t, counts(real), counts(dry), "sessions, runs, records, events, bytes, artifacts, artifact bytes")
}
