package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	hxruntime "hxd/internal/runtime"
)

// TestServeSessionIdsPerPrincipal: caller-chosen session ids are scoped
// per principal, end to end over HTTP with two OIDC principals. Alice and
// Bob each create session "foo" (and "ap", awaiting approvals): neither
// collides with nor learns of the other's, every path with "foo" or "ap"
// (runs, events, pending, export, pause, cancel, resume, approve) reaches
// the caller's own, everything shows "foo", and a principal re-using its
// own id gets 409 session_exists.
func TestServeSessionIdsPerPrincipal(t *testing.T) {
	t.Parallel()
	iss := hxtest.NewIssuer(t)
	d := startDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), "--agents", authAgents(t),
		"--auth", "oidc", "--oidc-issuer", iss.URL, "--oidc-audience", hxtest.IssuerAudience)
	roles := map[string]any{"roles": []string{"export:payloads"}}
	who := map[string][]string{
		"alice": bearerHdr(iss.Token(t, "alice", roles)),
		"bob":   bearerHdr(iss.Token(t, "bob", roles)),
	}
	create := func(p, agentName, id string) (*http.Response, []byte) {
		return d.do(t, http.MethodPost, "/sessions", map[string]any{
			"agent": map[string]string{"name": agentName, "version": "v1"}, "recording": true,
			"session_id": id, "metadata": map[string]string{"who": p},
		}, who[p]...)
	}

	runs := map[string]string{}
	for _, p := range []string{"alice", "bob"} {
		resp, body := create(p, "invoice-analyst", "foo")
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s: %s", p, body)
		require.Equal(t, "foo", decode(t, body)["session_id"])
		resp, body = d.do(t, http.MethodPost, "/sessions/foo/runs?wait=30",
			map[string]any{"message": "Analyze overdue invoices for the demo account", "request_id": "same"}, who[p]...)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s: %s", p, body)
		run := decode(t, body)
		require.Equal(t, "completed", run["status"], string(body))
		require.Equal(t, "foo", run["session_id"])
		runs[p] = run["run_id"].(string)
	}
	require.NotEqual(t, runs["alice"], runs["bob"], "the same request id started a run in each session")

	for _, p := range []string{"alice", "bob"} {
		other := map[string]string{"alice": "bob", "bob": "alice"}[p]
		hdr := who[p]
		resp, body := create(p, "invoice-analyst", "foo")
		requireProblem(t, resp, body, http.StatusConflict, "session_exists")

		resp, body = d.do(t, http.MethodGet, "/sessions/foo", nil, hdr...)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		s := decode(t, body)
		require.Equal(t, map[string]any{"who": p}, s["metadata"], "%s sees their own foo", p)
		require.Equal(t, runs[p], s["latest_run"].(map[string]any)["run_id"])

		resp, body = d.do(t, http.MethodGet, "/sessions", nil, hdr...)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		items := decode(t, body)["items"].([]any)
		require.Len(t, items, 1)
		require.Equal(t, map[string]any{"who": p}, items[0].(map[string]any)["metadata"])

		resp, body = d.do(t, http.MethodGet, "/sessions/foo/runs", nil, hdr...)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		items = decode(t, body)["items"].([]any)
		require.Len(t, items, 1)
		require.Equal(t, runs[p], items[0].(map[string]any)["run_id"])

		resp, body = d.do(t, http.MethodGet, "/runs/"+runs[other], nil, hdr...)
		requireProblem(t, resp, body, http.StatusNotFound, "not_found")
		resp, body = d.do(t, http.MethodPost, "/runs/"+runs[other]+"/export", map[string]any{}, hdr...)
		requireProblem(t, resp, body, http.StatusNotFound, "not_found")

		resp, body = d.do(t, http.MethodGet, "/runs/"+runs[p]+"/events", nil, withHdr(hdr, "Accept", "application/json")...)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		evs := decode(t, body)["events"].([]any)
		require.NotEmpty(t, evs)
		for _, ev := range evs {
			require.Equal(t, "foo", ev.(map[string]any)["session_id"])
		}

		// The bundle of the run shows "foo", in its manifest and records.
		resp, bundle := d.do(t, http.MethodPost, "/runs/"+runs[p]+"/export", map[string]any{"include_payloads": true}, hdr...)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(bundle))
		resp, body = d.do(t, http.MethodPost, "/bundles/playback", string(bundle),
			withHdr(hdr, "Content-Type", "application/vnd.harnessx.incident+zip")...)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		played := decode(t, body)
		require.Equal(t, true, played["report"].(map[string]any)["valid"], string(body))
		require.Equal(t, "foo", played["manifest"].(map[string]any)["session_id"])
		for _, rec := range played["records"].([]any) {
			require.Equal(t, "foo", rec.(map[string]any)["session_id"])
		}
		require.False(t, bytes.Contains(bundle, []byte(other)), "nothing of %s in %s's bundle", other, p)
		tag := hxruntime.SessionKey(p, "") // the principal's part of its keys
		for _, shown := range [][]byte{bundle, body} {
			require.False(t, bytes.Contains(shown, []byte(tag[:len(tag)-1])), "session keys stay inside")
		}
	}

	// Approvals, pause, cancel and resume reach the caller's own "ap".
	pending := map[string][]string{}
	for _, p := range []string{"alice", "bob"} {
		resp, body := create(p, "approver", "ap")
		require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
		resp, body = d.do(t, http.MethodPost, "/sessions/ap/runs?wait=30", map[string]any{"message": "echo three things"}, who[p]...)
		require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
		require.Equal(t, "awaiting_input", decode(t, body)["status"], string(body))
		resp, body = d.do(t, http.MethodGet, "/sessions/ap/pending", nil, who[p]...)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		for _, it := range decode(t, body)["items"].([]any) {
			pending[p] = append(pending[p], it.(map[string]any)["execution_key"].(string))
		}
		require.Len(t, pending[p], 3)
	}
	require.NotEqual(t, pending["alice"], pending["bob"])
	// Bob cannot decide Alice's tools through his own "ap".
	resp, body := d.do(t, http.MethodPost, "/sessions/ap/tools/"+pending["alice"][0]+"/approve", map[string]any{"allow": true}, who["bob"]...)
	requireProblem(t, resp, body, http.StatusNotFound, "unknown_execution_key")
	// Bob cancels his "ap"; Alice's still awaits her decisions.
	resp, body = d.do(t, http.MethodPost, "/sessions/ap/cancel", nil, who["bob"]...)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "cancelled", decode(t, body)["run"].(map[string]any)["status"], string(body))
	resp, body = d.do(t, http.MethodPost, "/sessions/ap/pause", nil, who["alice"]...)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "awaiting_input", decode(t, body)["run"].(map[string]any)["status"], "Bob's cancel left Alice's run alone: %s", body)
	for i, key := range pending["alice"] {
		resp, body = d.do(t, http.MethodPost, "/sessions/ap/tools/"+key+"/approve",
			map[string]any{"allow": true, "resume": i == len(pending["alice"])-1}, who["alice"]...)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	resp, body = d.do(t, http.MethodGet, "/sessions/ap", nil, who["alice"]...)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "completed", decode(t, body)["latest_run"].(map[string]any)["status"], string(body))
	resp, body = d.do(t, http.MethodPost, "/sessions/ap/resume", map[string]any{}, who["bob"]...)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Nil(t, decode(t, body)["run_id"], "Bob's cancelled run has nothing to resume: %s", body)
	resp, body = d.do(t, http.MethodGet, "/sessions/ap", nil, who["bob"]...)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "cancelled", decode(t, body)["latest_run"].(map[string]any)["status"], string(body))
}
