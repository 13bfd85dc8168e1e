package http_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	hxhttp "hxd/internal/http"
	"hxd/internal/hxtest"
)

// TestConsoleMount: /ui and /ui/... go to Config.Console without a token,
// even with authentication on, while the API still requires one; without
// a console /ui is the API's not_found problem.
func TestConsoleMount(t *testing.T) {
	t.Parallel()
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("console " + r.URL.Path))
	})
	iss := hxtest.NewIssuer(t)
	auth, err := hxhttp.NewOIDC(t.Context(), hxhttp.OIDCConfig{Issuer: iss.URL, Audience: hxtest.IssuerAudience})
	require.NoError(t, err)
	tb := setup(t, func(c *hxhttp.Config) { c.Console = console; c.Authenticator = auth })

	for _, p := range []string{"/ui", "/ui/", "/ui/runs/r1", "/ui/assets/app.js"} {
		resp, body := tb.do(t, request{method: http.MethodGet, path: p})
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
		require.Equal(t, "console "+p, string(body))
	}
	for _, p := range []string{"/uix", "/runs/r1", "/sessions"} {
		resp, body := tb.do(t, request{method: http.MethodGet, path: p})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s: %s", p, body)
	}

	plain := setup(t)
	resp, body := plain.do(t, request{method: http.MethodGet, path: "/ui/"})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.Contains(t, string(body), `"code":"not_found"`)
}
