package http_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hxhttp "hxd/internal/http"
	"hxd/internal/http/api"
	"hxd/internal/hxbundle"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
)

// recordSource is a hxbundle.Source over fixed records.
type recordSource []journal.Record

func (s recordSource) Records(_ context.Context, fn func(journal.Record) error) error {
	for _, r := range s {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (s recordSource) OpenArtifact(context.Context, string) (io.ReadCloser, error) {
	return nil, os.ErrNotExist
}

// testBundle builds a small valid bundle (metadata only, so valid but
// incomplete: payloads_omitted_or_redacted) with the real writer.
func metadataBundle(t *testing.T) []byte {
	t.Helper()
	rec := func(seq int64, kind journal.Kind) journal.Record {
		return journal.Record{
			Version: 1, ID: "rec-" + string(rune('0'+seq)), Kind: kind, RecordedAt: "2025-01-02T03:04:05+00:00",
			SessionID: "s1", RunID: "r1", StepID: "0", AttemptID: "0", Payload: []byte(`{"x":1}`), Seq: seq,
		}
	}
	a, err := hxbundle.Build(context.Background(), hxbundle.RunInfo{
		RunID: "r1", SessionID: "s1", Status: "completed", Phase: "result", SDKVersion: "test",
	}, recordSource{rec(1, journal.KindRunStarted), rec(2, journal.KindCheckpoint)}, hxbundle.Policy{}, t.TempDir())
	require.NoError(t, err)
	defer hxtest.Close(t, a)
	var b strings.Builder
	_, err = a.WriteTo(&b)
	require.NoError(t, err)
	return []byte(b.String())
}

// upload is one bundle upload.
type upload struct {
	path        string
	data        []byte
	contentType string // default application/vnd.harnessx.incident+zip
	chunked     bool   // no Content-Length
}

func (tb *testBundle) upload(t *testing.T, u upload) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader = strings.NewReader(string(u.data))
	if u.chunked {
		body = io.MultiReader(body) // hides the length
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, tb.srv.URL+u.path, body)
	require.NoError(t, err)
	ct := u.contentType
	if ct == "" {
		ct = "application/vnd.harnessx.incident+zip"
	}
	if ct != "-" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := tb.srv.Client().Do(req)
	require.NoError(t, err)
	defer hxtest.Close(t, resp.Body)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	tb.checkContract(t, req, resp, data)
	return resp, data
}

func TestVerifyBundle(t *testing.T) {
	t.Parallel()
	valid := metadataBundle(t)
	incomplete := api.VerificationReport{Valid: true, RecordCount: 2, Issues: []string{"payloads_omitted_or_redacted"},
		Signature: &api.SignatureReport{Status: api.SignatureAbsent}}
	tests := []struct {
		name string
		up   upload
		want api.VerificationReport
	}{
		{"valid incomplete", upload{data: valid}, incomplete},
		{"application/zip", upload{data: valid, contentType: "application/zip"}, incomplete},
		{"application/octet-stream", upload{data: valid, contentType: "application/octet-stream"}, incomplete},
		{"no content type", upload{data: valid, contentType: "-"}, incomplete},
		{"chunked", upload{data: valid, chunked: true}, incomplete},
		{"garbage", upload{data: []byte("not a zip")}, api.VerificationReport{Issues: []string{"Invalid incident bundle (BadZipFile)"}}},
		{"empty", upload{}, api.VerificationReport{Issues: []string{"Invalid incident bundle (BadZipFile)"}}},
		{"truncated", upload{data: valid[:len(valid)-30]}, api.VerificationReport{Issues: []string{"Invalid incident bundle (BadZipFile)"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spool := t.TempDir()
			tb := setup(t, func(c *hxhttp.Config) { c.SpoolDir = spool })
			tt.up.path = "/bundles/verify"
			resp, body := tb.upload(t, tt.up)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			got := decode[api.VerificationReport](t, body)
			require.NotNil(t, got.Details)
			got.Details = nil
			require.Equal(t, tt.want, got)
			left, err := os.ReadDir(spool)
			require.NoError(t, err)
			require.Empty(t, left, "the upload's spool file is removed")
		})
	}
}

// TestBundleUploadLimits: uploads are bounded by the bundle byte limit,
// not by MaxBodyBytes; a larger one is the reference's first check.
func TestBundleUploadLimits(t *testing.T) {
	t.Parallel()
	valid := metadataBundle(t)
	tb := setup(t, func(c *hxhttp.Config) { c.MaxBodyBytes = 100; c.BundleLimits = hxbundle.Limits{MaxBytes: 4096} })
	require.Greater(t, len(valid), 100)
	require.Less(t, len(valid), 4096)

	resp, body := tb.upload(t, upload{path: "/bundles/verify", data: valid})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.True(t, decode[api.VerificationReport](t, body).Valid, "MaxBodyBytes does not apply to uploads")

	big := append(append([]byte{}, valid...), make([]byte, 8192)...)
	for _, chunked := range []bool{false, true} {
		resp, body = tb.upload(t, upload{path: "/bundles/verify", data: big, chunked: chunked})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		rep := decode[api.VerificationReport](t, body)
		require.False(t, rep.Valid)
		require.Equal(t, []string{"Incident exceeds byte limit"}, rep.Issues)

		resp, body = tb.upload(t, upload{path: "/bundles/playback", data: big, chunked: chunked})
		p := requireProblem(t, resp, body, http.StatusUnprocessableEntity, "invalid_bundle")
		require.Equal(t, "Incident exceeds byte limit", deref(p.Detail))
	}

	// Other bodies keep MaxBodyBytes.
	resp, body = tb.do(t, request{method: "POST", path: "/runs/r1/export", body: `{"include_payloads":true,"redact":[` + strings.Repeat(`{"action":"omit"},`, 20) + `{"action":"omit"}]}`})
	requireProblem(t, resp, body, http.StatusRequestEntityTooLarge, "payload_too_large")
}

func TestPlaybackBundle(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	resp, body := tb.upload(t, upload{path: "/bundles/playback", data: metadataBundle(t)})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	got := decode[api.PlaybackResult](t, body)
	m := decode[map[string]any](t, got.Manifest)
	require.Equal(t, "harness-x.incident", m["format"])
	require.Equal(t, "r1", m["run_id"])
	require.Equal(t, "test", m["sdk_version"])
	require.Len(t, got.Records, 2)
	for i, raw := range got.Records {
		r := decode[map[string]any](t, raw)
		require.EqualValues(t, i+1, r["seq"])
		require.Equal(t, "omitted", r["capture"])
		require.Nil(t, r["payload"])
	}
	require.True(t, got.Report.Valid)
	require.False(t, got.Report.Complete)
	require.Equal(t, []api.ArtifactInfo{}, got.Artifacts)

	resp, body = tb.upload(t, upload{path: "/bundles/playback", data: []byte("PK garbage")})
	p := requireProblem(t, resp, body, http.StatusUnprocessableEntity, "invalid_bundle")
	require.Equal(t, "Invalid incident bundle (BadZipFile)", deref(p.Detail))
}

func TestBundleLimitsConfig(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() {
		hxhttp.New(hxhttp.Config{Service: &fakeService{}, BundleLimits: hxbundle.Limits{MaxRecords: -1}})
	})
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// TestBundleUploadTooLargeAnsweredAtOnce: an upload over the byte limit,
// declared so or sent so (chunked), is answered as soon as the limit is
// passed, without waiting for (or reading) the rest of a body that may
// never come or never end.
func TestBundleUploadTooLargeAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(c *hxhttp.Config) { c.BundleLimits = hxbundle.Limits{MaxBytes: 4096} })
	heads := map[string]string{
		"declared": fmt.Sprintf("Content-Length: %d\r\n\r\nPK", int64(1)<<40),
		"chunked":  fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", 8192, strings.Repeat("x", 8192)),
	}
	for name, head := range heads {
		for _, path := range []string{"/bundles/verify", "/bundles/playback"} {
			t.Run(name+path, func(t *testing.T) {
				t.Parallel()
				conn, err := net.Dial("tcp", tb.srv.Listener.Addr().String())
				require.NoError(t, err)
				defer hxtest.Close(t, conn)
				require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
				_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/zip\r\n%s", path, head)
				require.NoError(t, err)
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				require.NoError(t, err, "no answer while the client holds the rest of the body back")
				defer hxtest.Close(t, resp.Body)
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				if path == "/bundles/verify" {
					require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
					require.Equal(t, []string{"Incident exceeds byte limit"}, decode[api.VerificationReport](t, body).Issues)
					return
				}
				p := requireProblem(t, resp, body, http.StatusUnprocessableEntity, "invalid_bundle")
				require.Equal(t, "Incident exceeds byte limit", deref(p.Detail))
			})
		}
	}
}
