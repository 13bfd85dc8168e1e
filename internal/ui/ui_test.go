package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func get(t *testing.T, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	resp := rec.Result()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func TestHandlerRoutes(t *testing.T) {
	t.Parallel()
	h := Handler(Config{})
	for _, tc := range []struct {
		path, wantType string
		status         int
		wantBody       string
	}{
		{path: "/ui/", status: 200, wantType: "text/html; charset=utf-8", wantBody: `id="hxd-console-config"`},
		{path: "/ui/sessions/incident-42", status: 200, wantType: "text/html; charset=utf-8", wantBody: `<div id="app">`},
		{path: "/ui/runs/0194a3b0-7c1d-7e4f-8a2b-3c4d5e6f7a8b", status: 200, wantType: "text/html; charset=utf-8", wantBody: `<div id="app">`},
		{path: "/ui/bundles", status: 200, wantType: "text/html; charset=utf-8", wantBody: `<div id="app">`},
		{path: "/ui/callback?code=x&state=y", status: 200, wantType: "text/html; charset=utf-8", wantBody: `<div id="app">`},
		{path: "/ui/assets/app.js", status: 200, wantType: "text/javascript; charset=utf-8"},
		{path: "/ui/assets/app.css", status: 200, wantType: "text/css; charset=utf-8"},
		{path: "/ui/assets/nope.js", status: 404},
		{path: "/ui/assets/index.html", status: 404},
		{path: "/ui/assets/", status: 404},
		{path: "/ui/assets/../index.html", status: 404},
		{path: "/ui/favicon.ico", status: 404},
		{path: "/ui/sessions/x/app.js", status: 404},
		{path: "/elsewhere", status: 404},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			resp, body := get(t, h, http.MethodGet, tc.path)
			require.Equal(t, tc.status, resp.StatusCode, body)
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			require.NotEmpty(t, resp.Header.Get("Content-Security-Policy"))
			if tc.wantType != "" {
				require.Equal(t, tc.wantType, resp.Header.Get("Content-Type"))
				require.NotEmpty(t, body)
			}
			require.Contains(t, body, tc.wantBody)
		})
	}
}

func TestHandlerRedirectsAndMethods(t *testing.T) {
	t.Parallel()
	h := Handler(Config{})
	resp, _ := get(t, h, http.MethodGet, "/ui")
	require.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	require.Equal(t, "/ui/", resp.Header.Get("Location"))

	resp, _ = get(t, h, http.MethodPost, "/ui/")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))

	resp, body := get(t, h, http.MethodHead, "/ui/runs/r1")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, body)
}

func TestHandlerConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		cfg        Config
		wantConfig string
		wantCSP    string
	}{
		{
			name:       "no auth",
			wantConfig: `<script id="hxd-console-config" type="application/json">{"oidc":null}</script>`,
			wantCSP:    "connect-src 'self';",
		},
		{
			name: "oidc",
			cfg: Config{OIDC: &OIDCConfig{Issuer: "https://id.example.com:8443/realms/x", ClientID: "console",
				Audience: "hxd", Scope: "openid profile"}},
			wantConfig: `{"oidc":{"issuer":"https://id.example.com:8443/realms/x","client_id":"console","audience":"hxd","scope":"openid profile"}}</script>`,
			wantCSP:    "connect-src 'self' https://id.example.com:8443;",
		},
		{
			name:       "escaped",
			cfg:        Config{OIDC: &OIDCConfig{Issuer: "https://id.example.com/", ClientID: `</script><script>alert(1)</script>&`}},
			wantConfig: `"client_id":"\u003c/script\u003e\u003cscript\u003ealert(1)\u003c/script\u003e\u0026"}}</script>`,
			wantCSP:    "connect-src 'self' https://id.example.com;",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp, body := get(t, Handler(tc.cfg), http.MethodGet, "/ui/sessions/s1")
			require.Contains(t, body, tc.wantConfig)
			require.Equal(t, 1, strings.Count(body, "</script>")-1, "only the configuration and the app script close")
			csp := resp.Header.Get("Content-Security-Policy")
			require.Contains(t, csp, "default-src 'self';")
			require.Contains(t, csp, "script-src 'self';")
			require.Contains(t, csp, tc.wantCSP)
		})
	}
}

func TestHandlerRejectsBadIssuer(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { Handler(Config{OIDC: &OIDCConfig{Issuer: "id.example.com", ClientID: "c"}}) })
}
