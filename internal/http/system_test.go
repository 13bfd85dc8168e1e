package http_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	hxhttp "hxd/internal/http"
	hxruntime "hxd/internal/runtime"
)

// TestOpenAPIServed: GET /openapi.yaml serves api/openapi.yaml byte for
// byte, with a strong ETag that If-None-Match turns into a 304; HEAD gives
// the same headers without the body.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	src, err := os.ReadFile("../../api/openapi.yaml")
	require.NoError(t, err)
	sum := sha256.Sum256(src)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`

	resp, body := tb.do(t, request{method: "GET", path: "/openapi.yaml"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/yaml", resp.Header.Get("Content-Type"))
	require.Equal(t, etag, resp.Header.Get("ETag"))
	require.Equal(t, strconv.Itoa(len(src)), resp.Header.Get("Content-Length"))
	require.Equal(t, string(src), string(body), "the committed bytes")
	require.True(t, strings.HasPrefix(string(body), "openapi: 3.0.3\n"))
	doc, err := openapi3.NewLoader().LoadFromData(body)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))

	head, headBody := tb.do(t, request{method: "HEAD", path: "/openapi.yaml"})
	require.Equal(t, http.StatusOK, head.StatusCode)
	require.Empty(t, headBody)
	for _, h := range []string{"Content-Type", "Content-Length", "ETag"} {
		require.Equal(t, resp.Header.Get(h), head.Header.Get(h), h)
	}

	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		for _, method := range []string{"GET", "HEAD"} {
			resp, body := tb.do(t, request{method: method, path: "/openapi.yaml", header: map[string]string{"If-None-Match": inm}})
			require.Equal(t, http.StatusNotModified, resp.StatusCode, "%s If-None-Match: %s", method, inm)
			require.Equal(t, etag, resp.Header.Get("ETag"))
			require.Empty(t, body)
		}
	}
	for _, inm := range []string{`"other"`, `"` + hex.EncodeToString(sum[:16]) + `"`, ""} {
		resp, body := tb.do(t, request{method: "GET", path: "/openapi.yaml", header: map[string]string{"If-None-Match": inm}})
		require.Equal(t, http.StatusOK, resp.StatusCode, "If-None-Match: %s", inm)
		require.Equal(t, string(src), string(body))
	}
}

// TestContract checks the source contract: valid (examples included) and
// every operation has an id, a summary, a tag, an example and a default
// Problem response.
func TestContract(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../../api/openapi.yaml")
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background(), openapi3.EnableExamplesValidation()))

	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			require.Regexp(t, `^[a-z][A-Za-z]+$`, op.OperationID, name)
			require.NotEmpty(t, op.Summary, name)
			require.NotEmpty(t, op.Tags, name)
			def := op.Responses.Default()
			require.NotNil(t, def, name)
			require.Equal(t, "#/components/responses/Problem", def.Ref, name)
			hasExample := false
			for _, r := range op.Responses.Map() {
				for _, mt := range r.Value.Content {
					hasExample = hasExample || mt.Example != nil || len(mt.Examples) > 0
				}
			}
			require.True(t, hasExample, "%s has no example", name)
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.svc.GetRunFunc = func(context.Context, string) (*hxruntime.RunResult, error) { return nil, hxruntime.ErrNotFound }
	tb.do(t, request{method: "GET", path: "/healthz"})
	tb.do(t, request{method: "GET", path: "/runs/x"})
	tb.do(t, request{method: "GET", path: "/nope"})

	resp, body := tb.do(t, request{method: "GET", path: "/metrics"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	text := string(body)
	require.Contains(t, text, `hxd_http_requests_total{method="GET",operation="getHealth",status="200"} 1`)
	require.Contains(t, text, `hxd_http_requests_total{method="GET",operation="getRun",status="404"} 1`)
	require.Contains(t, text, `hxd_http_requests_total{method="GET",operation="unmatched",status="404"} 1`)
	require.Contains(t, text, `hxd_http_request_duration_seconds_count{method="GET",operation="getHealth"} 1`)
}

// TestMetricsMethodLabel: the method label takes the methods the contract
// can route and "other" for anything else, so that callers inventing
// methods cannot grow the metrics without bound.
func TestMetricsMethodLabel(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for i := range 3 {
		tb.do(t, request{method: fmt.Sprintf("XYZZY%d", i), path: "/healthz"})
		tb.do(t, request{method: fmt.Sprintf("PLUGH%d", i), path: "/nope"})
	}
	tb.do(t, request{method: "DELETE", path: "/healthz"})

	_, body := tb.do(t, request{method: "GET", path: "/metrics"})
	text := string(body)
	require.NotContains(t, text, "XYZZY")
	require.NotContains(t, text, "PLUGH")
	require.Contains(t, text, `hxd_http_requests_total{method="other",operation="unmatched",status="405"}`)
	require.Contains(t, text, `hxd_http_requests_total{method="DELETE",operation="unmatched",status="405"} 1`)
}

func TestNewPanicsOnWiringBugs(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { hxhttp.New(hxhttp.Config{}) })

	reg := prometheus.NewRegistry()
	hxhttp.New(hxhttp.Config{Service: &fakeService{}, Registry: reg})
	require.Panics(t, func() { hxhttp.New(hxhttp.Config{Service: &fakeService{}, Registry: reg}) }, "metrics registered twice")
}
