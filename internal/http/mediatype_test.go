package http_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	hxruntime "hxd/internal/runtime"
)

// TestUnsupportedMediaType: a body hxd would misread (compressed, in a
// charset other than UTF-8, or of a media type the operation does not
// take) is a 415 before the service sees it.
func TestUnsupportedMediaType(t *testing.T) {
	t.Parallel()
	session := `{"agent":{"name":"demo","version":"v1"}}`
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, err := zw.Write([]byte(session))
	require.NoError(t, err)
	require.NoError(t, zw.Close())

	tests := []struct {
		name   string
		header map[string]string
		body   string
		status int
		detail string
	}{
		{name: "gzip", header: map[string]string{"Content-Encoding": "gzip"}, body: zipped.String(), status: 415, detail: "Content-Encoding"},
		{name: "gzip declared on a plain body", header: map[string]string{"Content-Encoding": "gzip"}, status: 415, detail: "Content-Encoding"},
		{name: "br", header: map[string]string{"Content-Encoding": "br"}, status: 415, detail: "Content-Encoding"},
		{name: "identity then gzip", header: map[string]string{"Content-Encoding": "identity, gzip"}, status: 415, detail: "Content-Encoding"},
		{name: "identity", header: map[string]string{"Content-Encoding": "identity"}, status: 201},
		{name: "IDENTITY", header: map[string]string{"Content-Encoding": "IDENTITY"}, status: 201},
		{name: "latin-1", header: map[string]string{"Content-Type": "application/json; charset=iso-8859-1"}, status: 415, detail: "UTF-8"},
		{name: "utf-16", header: map[string]string{"Content-Type": "application/json; charset=utf-16"}, status: 415, detail: "UTF-8"},
		{name: "utf-8", header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, status: 201},
		{name: "UTF-8 quoted", header: map[string]string{"Content-Type": `application/json;charset="UTF-8"`}, status: 201},
		{name: "text/plain", header: map[string]string{"Content-Type": "text/plain"}, status: 415, detail: "application/json"},
		{name: "form", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, status: 415, detail: "application/json"},
		{name: "no content type", header: map[string]string{"Content-Type": ""}, status: 415, detail: "application/json"},
		{name: "malformed content type", header: map[string]string{"Content-Type": "application/json; charset"}, status: 415, detail: "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			created := false
			tb.svc.CreateSessionFunc = func(context.Context, hxruntime.CreateSessionParams) (*hxruntime.Session, error) {
				created = true
				return sessionFixture(), nil
			}
			body := tt.body
			if body == "" {
				body = session
			}
			resp, data := tb.do(t, request{method: "POST", path: "/sessions", body: body, header: tt.header})
			if tt.status != 415 {
				require.Equal(t, tt.status, resp.StatusCode, "body: %s", data)
				require.True(t, created)
				return
			}
			p := requireProblem(t, resp, data, 415, "unsupported_media_type")
			require.Equal(t, "Unsupported media type", p.Title)
			require.NotNil(t, p.Detail)
			require.Contains(t, *p.Detail, tt.detail)
			require.False(t, created, "the service never sees the body")
			if tt.detail == "Content-Encoding" {
				require.Equal(t, "identity", resp.Header.Get("Accept-Encoding"))
			} else {
				require.Empty(t, resp.Header.Get("Accept-Encoding"))
			}
		})
	}
}

// TestUnsupportedMediaTypeEveryBody: every operation that takes a body
// refuses a compressed one, and documents its 415.
func TestUnsupportedMediaTypeEveryBody(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromFile("../../api/openapi.yaml")
	require.NoError(t, err)
	tb := setup(t)
	var n int
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil {
				require.Nil(t, op.Responses.Status(415), "%s %s takes no body", method, path)
				continue
			}
			n++
			ref := op.Responses.Status(415)
			require.NotNil(t, ref, "%s %s documents its 415", method, path)
			require.Equal(t, "#/components/responses/UnsupportedMediaType", ref.Ref)
			url := headPaths.Replace(path)
			resp, data := tb.do(t, request{method: method, path: url, body: "{}", header: map[string]string{"Content-Encoding": "gzip"}})
			requireProblem(t, resp, data, 415, "unsupported_media_type")
		}
	}
	require.Equal(t, 8, n)
}

// TestBundleUploadMediaType: bundle uploads take their three media types
// (or none), never compressed and without a charset other than UTF-8.
func TestBundleUploadMediaType(t *testing.T) {
	t.Parallel()
	valid := metadataBundle(t)
	tests := []struct {
		contentType, encoding string
		ok                    bool
	}{
		{contentType: "application/vnd.harnessx.incident+zip", ok: true},
		{contentType: "application/zip", ok: true},
		{contentType: "application/octet-stream", ok: true},
		{contentType: "-", ok: true}, // no Content-Type
		{contentType: "application/zip", encoding: "identity", ok: true},
		{contentType: "application/zip", encoding: "gzip"},
		{contentType: "-", encoding: "deflate"},
		{contentType: "application/zip; charset=latin1"},
		{contentType: "text/plain"},
		{contentType: "application/json"},
		{contentType: "application/x-www-form-urlencoded"},
	}
	tb := setup(t)
	for _, path := range []string{"/bundles/verify", "/bundles/playback"} {
		for _, tt := range tests {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, tb.srv.URL+path, bytes.NewReader(valid))
			require.NoError(t, err)
			if tt.contentType != "-" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.encoding != "" {
				req.Header.Set("Content-Encoding", tt.encoding)
			}
			resp, err := tb.srv.Client().Do(req)
			require.NoError(t, err)
			var body bytes.Buffer
			_, err = body.ReadFrom(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			if tt.ok {
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s %+v: %s", path, tt, body.String())
				continue
			}
			requireProblem(t, resp, body.Bytes(), 415, "unsupported_media_type")
		}
	}
}

// TestMediaTypeNotCheckedWithoutBody: a request without a body (or to an
// operation that takes none) is not refused for its headers.
func TestMediaTypeNotCheckedWithoutBody(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.svc.PauseFunc = func(context.Context, string) (*hxruntime.RunResult, error) {
		return runFixture(hxruntime.StatusPaused), nil
	}
	resp, body := tb.do(t, request{method: "POST", path: "/sessions/s1/pause", header: map[string]string{"Content-Encoding": "gzip", "Content-Type": "text/plain; charset=latin1"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
}
