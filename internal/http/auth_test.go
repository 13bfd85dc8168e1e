package http_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	hxhttp "hxd/internal/http"
	"hxd/internal/http/api"
	"hxd/internal/hxtest"
	hxruntime "hxd/internal/runtime"
)

// oidcBundle is a server with OIDC authentication against a fake issuer.
type oidcBundle struct {
	*testBundle
	iss *hxtest.Issuer
	// seen records the principals GetRun was called with.
	mu   sync.Mutex
	seen []*hxhttp.Principal
}

// setupOIDC starts a fake issuer and a server authenticating against it;
// GetRun answers a completed run and records the caller.
func setupOIDC(t *testing.T, cfg func(*hxhttp.OIDCConfig)) *oidcBundle {
	t.Helper()
	iss := hxtest.NewIssuer(t)
	oc := hxhttp.OIDCConfig{Issuer: iss.URL, Audience: hxtest.IssuerAudience}
	if cfg != nil {
		cfg(&oc)
	}
	auth, err := hxhttp.NewOIDC(t.Context(), oc)
	require.NoError(t, err)
	ob := &oidcBundle{iss: iss}
	ob.testBundle = setup(t, func(c *hxhttp.Config) { c.Authenticator = auth })
	ob.svc.GetRunFunc = func(ctx context.Context, runID string) (*hxruntime.RunResult, error) {
		p, ok := hxhttp.PrincipalFrom(ctx)
		require.True(t, ok)
		require.Equal(t, p.ID, hxruntime.PrincipalFrom(ctx), "the runtime sees the same principal")
		ob.mu.Lock()
		ob.seen = append(ob.seen, p)
		ob.mu.Unlock()
		return runFixture(hxruntime.StatusCompleted), nil
	}
	return ob
}

func (ob *oidcBundle) lastPrincipal(t *testing.T) *hxhttp.Principal {
	t.Helper()
	ob.mu.Lock()
	defer ob.mu.Unlock()
	require.NotEmpty(t, ob.seen)
	return ob.seen[len(ob.seen)-1]
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// requireUnauthorized asserts a 401 `unauthorized` problem with the
// challenge and nothing about the reason.
func requireUnauthorized(t *testing.T, resp *http.Response, body []byte, challenge string) {
	t.Helper()
	p := requireProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")
	require.Nil(t, p.Detail, "no reason goes to the client")
	require.Equal(t, challenge, resp.Header.Get("WWW-Authenticate"))
	for _, leak := range []string{"expired", "audience", "issuer", "signature", "kid", "key", "alg", "nbf", "oidc", "jwt", "token"} {
		require.NotContains(t, strings.ToLower(string(body)), leak)
	}
}

const invalidToken = `Bearer error="invalid_token"`

// TestOIDCTokens: every kind of bad token is a 401 with the same body;
// the log says why and never holds the token.
func TestOIDCTokens(t *testing.T) {
	t.Parallel()
	ob := setupOIDC(t, nil)
	iss := ob.iss
	now := time.Now()
	enc := base64.RawURLEncoding

	valid := iss.Token(t, "alice", nil)
	// A valid token whose payload is swapped for another subject's.
	parts := strings.Split(valid, ".")
	forged, err := json.Marshal(iss.Claims("mallory"))
	require.NoError(t, err)
	tampered := parts[0] + "." + enc.EncodeToString(forged) + "." + parts[2]

	tests := []struct {
		name      string
		header    string // the Authorization header; "" = none
		challenge string
		reason    string // in the log
	}{
		{name: "missing header", challenge: `Bearer realm="hxd"`, reason: "no Authorization header"},
		{name: "not bearer", header: "Basic YWxpY2U6c2VjcmV0", challenge: invalidToken, reason: "not a Bearer credential"},
		{name: "two spaces", header: "Bearer  " + valid, challenge: invalidToken, reason: "malformed bearer token"},
		{name: "bearer scheme only", header: "Bearer", challenge: invalidToken, reason: "not a Bearer credential"},
		{name: "token with spaces", header: "Bearer " + valid + " x", challenge: invalidToken, reason: "malformed bearer token"},
		{name: "not a JWT", header: "Bearer abc.def", challenge: invalidToken, reason: "malformed jwt"},
		{name: "oversized", header: "Bearer " + strings.Repeat("a", 17<<10), challenge: invalidToken, reason: "malformed bearer token"},
		{name: "expired", header: "Bearer " + iss.Token(t, "alice", map[string]any{
			"iat": now.Add(-2 * time.Hour).Unix(), "nbf": now.Add(-2 * time.Hour).Unix(), "exp": now.Add(-time.Hour).Unix(),
		}), challenge: invalidToken, reason: "token is expired"},
		{name: "no exp", header: "Bearer " + iss.Token(t, "alice", map[string]any{"exp": nil}), challenge: invalidToken, reason: "token is expired"},
		{name: "not yet valid", header: "Bearer " + iss.Token(t, "alice", map[string]any{"nbf": now.Add(time.Hour).Unix()}),
			challenge: invalidToken, reason: "not before"},
		{name: "not yet valid within go-oidc's 5m but beyond our 1m", header: "Bearer " + iss.Token(t, "alice", map[string]any{
			"nbf": now.Add(3 * time.Minute).Unix(),
		}), challenge: invalidToken, reason: "token not valid before"},
		{name: "nbf as a string beyond our 1m", header: "Bearer " + iss.Token(t, "alice", map[string]any{
			"nbf": strconv.FormatInt(now.Add(3*time.Minute).Unix(), 10),
		}), challenge: invalidToken, reason: "token not valid before"},
		{name: "wrong issuer", header: "Bearer " + iss.Token(t, "alice", map[string]any{"iss": "https://evil.example"}),
			challenge: invalidToken, reason: "issued by a different provider"},
		{name: "wrong audience", header: "Bearer " + iss.Token(t, "alice", map[string]any{"aud": "someone-else"}),
			challenge: invalidToken, reason: "expected audience"},
		{name: "no audience", header: "Bearer " + iss.Token(t, "alice", map[string]any{"aud": nil}),
			challenge: invalidToken, reason: "expected audience"},
		{name: "alg none", header: "Bearer " + hxtest.UnsignedJWT(t, iss.KeyID(), iss.Claims("alice")),
			challenge: invalidToken, reason: "malformed jwt"},
		{name: "HS256 signed with the public key", header: "Bearer " + hxtest.SignJWT(t, jose.HS256, iss.PublicKeyPEM(t), iss.KeyID(), iss.Claims("alice")),
			challenge: invalidToken, reason: "malformed jwt"},
		{name: "unknown kid", header: "Bearer " + hxtest.SignJWT(t, jose.RS256, hxtest.NewRSAKey(t), "rogue", iss.Claims("alice")),
			challenge: invalidToken, reason: "failed to verify signature"},
		{name: "known kid, other key", header: "Bearer " + hxtest.SignJWT(t, jose.RS256, hxtest.NewRSAKey(t), iss.KeyID(), iss.Claims("alice")),
			challenge: invalidToken, reason: "failed to verify signature"},
		{name: "tampered payload", header: "Bearer " + tampered, challenge: invalidToken, reason: "failed to verify signature"},
		{name: "no subject", header: "Bearer " + iss.Token(t, "", nil), challenge: invalidToken, reason: "no sub claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.header != "" {
				hdr["Authorization"] = tt.header
			}
			resp, body := ob.do(t, request{method: "GET", path: "/runs/r1", header: hdr})
			requireUnauthorized(t, resp, body, tt.challenge)
			lines := ob.logs.matching(`"msg":"authentication failed"`, resp.Header.Get("X-Request-ID"))
			require.Len(t, lines, 1)
			require.Contains(t, lines[0], tt.reason)
			require.Contains(t, lines[0], `"operation":"getRun"`)
			require.Contains(t, lines[0], `"run_id":"r1"`)
			if tok := strings.TrimSpace(strings.TrimPrefix(tt.header, "Bearer ")); len(tok) > 8 {
				for _, l := range ob.logs.matching(resp.Header.Get("X-Request-ID")) {
					require.NotContains(t, l, tok, "the token is never logged")
				}
			}
		})
	}

	// The metrics and the access log know the operation of a 401.
	resp, body := ob.do(t, request{method: "GET", path: "/metrics", header: bearer(valid)})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `hxd_http_requests_total{method="GET",operation="getRun",status="401"}`)

	// Two Authorization headers are refused too.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ob.srv.URL+"/runs/r1", nil)
	require.NoError(t, err)
	req.Header.Add("Authorization", "Bearer "+valid)
	req.Header.Add("Authorization", "Bearer "+valid)
	resp2, err := ob.srv.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, resp2.Body.Close())
	require.Equal(t, http.StatusUnauthorized, resp2.StatusCode)

	// The valid token passes; the scheme is case-insensitive.
	resp, body = ob.do(t, request{method: "GET", path: "/runs/r1", header: map[string]string{"Authorization": "bearer " + valid}})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "oidc:"+iss.URL+"|alice", ob.lastPrincipal(t).ID)
}

// TestOIDCBeforeBodyLimit: a request without a valid token is a 401 with
// its challenge whatever its body; with one, the body limit applies.
func TestOIDCBeforeBodyLimit(t *testing.T) {
	t.Parallel()
	ob := setupOIDC(t, nil)
	big := `{"agent":{"name":"demo","version":"v1"},"metadata":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}`
	resp, body := ob.do(t, request{method: "POST", path: "/sessions", body: big})
	requireUnauthorized(t, resp, body, `Bearer realm="hxd"`)
	resp, body = ob.do(t, request{method: "POST", path: "/sessions", body: big, header: bearer(ob.iss.Token(t, "alice", nil))})
	requireProblem(t, resp, body, http.StatusRequestEntityTooLarge, "payload_too_large")
}

// TestOIDCKeyRotation: the JWKS is cached; a token with a new kid makes
// the verifier fetch it again, without a restart, and the removed key no
// longer verifies. (The first refetch is immediate; later ones are
// throttled: TestOIDCJWKSRefetchThrottle.)
func TestOIDCKeyRotation(t *testing.T) {
	t.Parallel()
	ob := setupOIDC(t, nil)
	iss := ob.iss
	oldToken := iss.Token(t, "alice", nil)
	for range 3 {
		resp, body := ob.do(t, request{method: "GET", path: "/runs/r1", header: bearer(oldToken)})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	// One fetch at start-up (the check), one at the first token: cached since.
	require.Equal(t, 2, iss.JWKSFetches())

	oldKid := iss.KeyID()
	newKid := iss.Rotate(t)
	require.NotEqual(t, oldKid, newKid)
	newToken := iss.Token(t, "alice", nil)
	resp, body := ob.do(t, request{method: "GET", path: "/runs/r1", header: bearer(newToken)})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, 3, iss.JWKSFetches())

	resp, body = ob.do(t, request{method: "GET", path: "/runs/r1", header: bearer(oldToken)})
	requireUnauthorized(t, resp, body, invalidToken)
	resp, body = ob.do(t, request{method: "GET", path: "/runs/r1", header: bearer(newToken)})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
}

// fakeClock is an OIDCConfig.NowFunc the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// jwksTransport is the transport of the OIDC under test: it counts the
// JWKS requests hxd attempts, can make them fail, and can hold them until
// released.
type jwksTransport struct {
	base     *http.Transport
	attempts atomic.Int32
	fail     atomic.Bool
	mu       sync.Mutex
	gate     chan struct{} // non-nil: JWKS requests wait until it is closed
}

func newJWKSTransport(t *testing.T) *jwksTransport {
	tr := &jwksTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(tr.base.CloseIdleConnections)
	return tr
}

func (tr *jwksTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/keys" {
		tr.attempts.Add(1)
		tr.mu.Lock()
		gate := tr.gate
		tr.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
		if tr.fail.Load() {
			return nil, errors.New("jwks unreachable")
		}
	}
	return tr.base.RoundTrip(r)
}

// TestOIDCJWKSRefetchThrottle: tokens no cached key verifies (an unknown
// kid, a forged signature under the real kid), which anyone can send, make
// hxd fetch the JWKS again at most once per interval, however many and
// however concurrent they are; a rotated key is picked up once the
// interval has passed; a failing fetch keeps the cached keys and counts
// for the interval.
func TestOIDCJWKSRefetchThrottle(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Now()}
	tr := newJWKSTransport(t)
	ob := setupOIDC(t, func(c *hxhttp.OIDCConfig) {
		c.NowFunc = clock.Now
		c.HTTPClient = &http.Client{Timeout: 5 * time.Second, Transport: tr}
	})
	iss := ob.iss
	interval := hxhttp.DefaultJWKSRefetchInterval
	// get answers GET /runs/r1 with token; safe in goroutines.
	get := func(token string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ob.srv.URL+"/runs/r1", nil)
		if !assert.NoError(t, err) {
			return 0
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := ob.srv.Client().Do(req)
		if !assert.NoError(t, err) {
			return 0
		}
		assert.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}

	oldToken := iss.Token(t, "alice", nil)
	require.Equal(t, http.StatusOK, get(oldToken))
	require.Equal(t, 2, iss.JWKSFetches(), "the start-up check and the first token")

	rogue := hxtest.NewRSAKey(t)
	var bad []string
	for i := range 20 {
		bad = append(bad, hxtest.SignJWT(t, jose.RS256, rogue, "rogue-"+strconv.Itoa(i), iss.Claims("mallory")))
	}
	for range 10 {
		bad = append(bad, hxtest.SignJWT(t, jose.RS256, rogue, iss.KeyID(), iss.Claims("mallory")))
	}

	// Concurrent unverifiable tokens share one refetch: hold it until
	// they have piled up.
	gate := make(chan struct{})
	tr.mu.Lock()
	tr.gate = gate
	tr.mu.Unlock()
	before := tr.attempts.Load()
	var wg sync.WaitGroup
	for _, tok := range bad {
		wg.Go(func() { assert.Equal(t, http.StatusUnauthorized, get(tok)) })
	}
	require.Eventually(t, func() bool { return tr.attempts.Load() > before }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	tr.mu.Lock()
	tr.gate = nil
	tr.mu.Unlock()
	close(gate)
	wg.Wait()
	require.Equal(t, before+1, tr.attempts.Load(), "one refetch for all of them")
	require.Equal(t, 3, iss.JWKSFetches())

	// Within the interval, more of them fetch nothing; the valid token
	// still passes.
	clock.Advance(interval - time.Second)
	for _, tok := range bad {
		require.Equal(t, http.StatusUnauthorized, get(tok))
	}
	require.Equal(t, http.StatusOK, get(oldToken))
	require.Equal(t, 3, iss.JWKSFetches(), "no refetch within the interval")
	require.NotEmpty(t, ob.logs.matching(`"msg":"authentication failed"`, "fetched less than"))

	// A key rotated in within the interval waits for its end (the refetch
	// was spent); then one fetch picks it up and the old key is gone.
	iss.Rotate(t)
	newToken := iss.Token(t, "alice", nil)
	require.Equal(t, http.StatusUnauthorized, get(newToken))
	require.Equal(t, 3, iss.JWKSFetches())
	clock.Advance(time.Second)
	require.Equal(t, http.StatusOK, get(newToken))
	require.Equal(t, 4, iss.JWKSFetches())
	require.Equal(t, http.StatusUnauthorized, get(oldToken))
	for _, tok := range bad {
		require.Equal(t, http.StatusUnauthorized, get(tok))
	}
	require.Equal(t, http.StatusOK, get(newToken))
	require.Equal(t, 4, iss.JWKSFetches(), "the rotation cost one fetch")

	// A failing refetch keeps the cached keys and counts for the interval.
	clock.Advance(interval)
	tr.fail.Store(true)
	before = tr.attempts.Load()
	require.Equal(t, http.StatusUnauthorized, get(bad[0]))
	require.Equal(t, before+1, tr.attempts.Load())
	require.Equal(t, http.StatusOK, get(newToken), "the cached keys survive")
	for _, tok := range bad[:5] {
		require.Equal(t, http.StatusUnauthorized, get(tok))
	}
	require.Equal(t, before+1, tr.attempts.Load(), "a failed refetch counts for the interval")
	tr.fail.Store(false)
	clock.Advance(interval)
	require.Equal(t, http.StatusUnauthorized, get(bad[0]))
	require.Equal(t, 5, iss.JWKSFetches())
}

// TestOIDCPrincipal: principal = issuer + subject (+ tenant), unambiguous
// whatever the claims hold; roles from the configured claim.
func TestOIDCPrincipal(t *testing.T) {
	t.Parallel()
	t.Run("issuer and subject, roles array", func(t *testing.T) {
		t.Parallel()
		ob := setupOIDC(t, nil)
		tok := ob.iss.Token(t, "auth0|123", map[string]any{"roles": []any{"export:payloads", 7, "reader"}})
		resp, body := ob.do(t, request{method: "GET", path: "/runs/r1", header: bearer(tok)})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		p := ob.lastPrincipal(t)
		require.Equal(t, "oidc:"+ob.iss.URL+"|auth0%7C123", p.ID, "a | in the subject cannot fake a tenant")
		require.Equal(t, ob.iss.URL, p.Issuer)
		require.Equal(t, "auth0|123", p.Subject)
		require.Empty(t, p.Tenant)
		require.Equal(t, []string{"export:payloads", "reader"}, p.Roles)
		require.True(t, p.HasRole(hxhttp.RoleExportPayloads))
	})
	t.Run("tenant claim", func(t *testing.T) {
		t.Parallel()
		ob := setupOIDC(t, func(c *hxhttp.OIDCConfig) { c.TenantClaim = "tid" })
		tok := ob.iss.Token(t, "alice", map[string]any{"tid": "acme"})
		resp, body := ob.do(t, request{method: "GET", path: "/runs/r1", header: bearer(tok)})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		p := ob.lastPrincipal(t)
		require.Equal(t, "oidc:"+ob.iss.URL+"|alice|acme", p.ID)
		require.Equal(t, "acme", p.Tenant)
		require.Empty(t, p.Roles)

		// Without the tenant claim the token is refused.
		resp, body = ob.do(t, request{method: "GET", path: "/runs/r1", header: bearer(ob.iss.Token(t, "alice", nil))})
		requireUnauthorized(t, resp, body, invalidToken)
		require.Len(t, ob.logs.matching(`"msg":"authentication failed"`, `(tenant) claim`), 1)
	})
	t.Run("space-separated scope as roles", func(t *testing.T) {
		t.Parallel()
		ob := setupOIDC(t, func(c *hxhttp.OIDCConfig) { c.RolesClaim = "scope" })
		tok := ob.iss.Token(t, "svc", map[string]any{"scope": "openid export:payloads"})
		resp, body := ob.do(t, request{method: "GET", path: "/runs/r1", header: bearer(tok)})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, []string{"openid", "export:payloads"}, ob.lastPrincipal(t).Roles)
	})
	t.Run("nested roles claim", func(t *testing.T) {
		t.Parallel()
		ob := setupOIDC(t, func(c *hxhttp.OIDCConfig) { c.RolesClaim = "realm_access.roles" })
		tok := ob.iss.Token(t, "kc", map[string]any{"realm_access": map[string]any{"roles": []string{"export:payloads"}}})
		resp, body := ob.do(t, request{method: "GET", path: "/runs/r1", header: bearer(tok)})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, []string{"export:payloads"}, ob.lastPrincipal(t).Roles)
	})
}

// TestOIDCPublicOperations: health, readiness, the contract and the
// bundle keys need no token; everything else does, /metrics and unknown paths included.
func TestOIDCPublicOperations(t *testing.T) {
	t.Parallel()
	ob := setupOIDC(t, nil)
	ob.svc.ReadyFunc = func(ctx context.Context) error {
		require.Equal(t, "anonymous", hxruntime.PrincipalFrom(ctx), "public operations own nothing")
		return nil
	}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.yaml", "/.well-known/hxd-bundle-keys"} {
		resp, body := ob.do(t, request{method: "GET", path: path})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	}
	// A bad token on a public operation is ignored.
	resp, _ := ob.do(t, request{method: "GET", path: "/healthz", header: bearer("x.y.z")})
	require.Equal(t, http.StatusOK, resp.StatusCode)

	for _, path := range []string{"/metrics", "/agents", "/sessions", "/nope"} {
		resp, body := ob.do(t, request{method: "GET", path: path})
		requireUnauthorized(t, resp, body, `Bearer realm="hxd"`)
	}
}

// TestContractSecurity: the contract declares the bearer scheme globally,
// exactly the four public operations opt out, and every other operation
// documents its 401 (exportRun its 403).
func TestContractSecurity(t *testing.T) {
	t.Parallel()
	spec, err := api.GetSwagger()
	require.NoError(t, err)
	require.Contains(t, spec.Components.SecuritySchemes, "bearerAuth")
	scheme := spec.Components.SecuritySchemes["bearerAuth"].Value
	require.Equal(t, "http", scheme.Type)
	require.Equal(t, "bearer", scheme.Scheme)
	require.Len(t, spec.Security, 1)
	require.Contains(t, spec.Security[0], "bearerAuth")

	var public []string
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if op.Security != nil && len(*op.Security) == 0 {
				public = append(public, op.OperationID)
				require.Nil(t, op.Responses.Value("401"), name)
				continue
			}
			require.Nil(t, op.Security, "%s: only the global requirement", name)
			require.NotNil(t, op.Responses.Value("401"), "%s documents 401", name)
			require.Equal(t, op.OperationID == "ExportRun", op.Responses.Value("403") != nil, "%s: 403", name)
		}
	}
	slices.Sort(public)
	require.Equal(t, []string{"GetBundleKeys", "GetHealth", "GetOpenAPI", "GetReady"}, public)
}

// TestExportPayloadsRole: include_payloads needs export:payloads (403
// before the runtime is asked, for any run id); metadata-only export
// needs none; --auth=none's local principal holds every role.
func TestExportPayloadsRole(t *testing.T) {
	t.Parallel()
	ob := setupOIDC(t, nil)
	var calls []string
	var mu sync.Mutex
	ob.svc.ExportFunc = func(ctx context.Context, runID string, _ func(*hxruntime.Incident) error) error {
		mu.Lock()
		calls = append(calls, hxruntime.PrincipalFrom(ctx)+" "+runID)
		mu.Unlock()
		return hxruntime.ErrNotFound
	}
	plain := ob.iss.Token(t, "bob", nil)
	exporter := ob.iss.Token(t, "carol", map[string]any{"roles": []string{hxhttp.RoleExportPayloads}})

	resp, body := ob.do(t, request{method: "POST", path: "/runs/r1/export", body: `{"include_payloads":true}`, header: bearer(plain)})
	p := requireProblem(t, resp, body, http.StatusForbidden, "forbidden")
	require.Nil(t, p.Detail)
	resp, body = ob.do(t, request{method: "POST", path: "/runs/unknown/export", body: `{"include_payloads":true,"include_artifacts":true}`, header: bearer(plain)})
	requireProblem(t, resp, body, http.StatusForbidden, "forbidden")
	require.Empty(t, calls, "the runtime is not asked")
	lines := ob.logs.matching(`"msg":"authorization denied"`, `"operation":"exportRun"`, `"run_id":"r1"`, `"role":"export:payloads"`, `|bob"`)
	require.Len(t, lines, 1)

	// Metadata only: ownership decides (the runtime's 404 here).
	resp, body = ob.do(t, request{method: "POST", path: "/runs/r1/export", body: `{"include_payloads":false}`, header: bearer(plain)})
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	resp, body = ob.do(t, request{method: "POST", path: "/runs/r1/export", header: bearer(plain)})
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	// With the role the request reaches the runtime.
	resp, body = ob.do(t, request{method: "POST", path: "/runs/r1/export", body: `{"include_payloads":true}`, header: bearer(exporter)})
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	bob, carol := "oidc:"+ob.iss.URL+"|bob", "oidc:"+ob.iss.URL+"|carol"
	require.Equal(t, []string{bob + " r1", bob + " r1", carol + " r1"}, calls)
	// Each 404 is an audit line with the principal, operation and resource.
	require.Len(t, ob.logs.matching(`"msg":"access denied or not found"`, `"operation":"exportRun"`, `"run_id":"r1"`, `"principal":"`+carol+`"`), 1)
	// Every export attempt is an audit line with the principal too.
	require.Len(t, ob.logs.matching(`"msg":"run export failed"`, `"operation":"exportRun"`, `"run_id":"r1"`, `"principal":"`+carol+`"`), 1)

	t.Run("auth none", func(t *testing.T) {
		t.Parallel()
		tb := setup(t)
		called := false
		tb.svc.ExportFunc = func(ctx context.Context, _ string, _ func(*hxruntime.Incident) error) error {
			called = true
			require.NoError(t, hxhttp.RequireRole(ctx, hxhttp.RoleExportPayloads))
			return hxruntime.ErrNotFound
		}
		resp, body := tb.do(t, request{method: "POST", path: "/runs/r1/export", body: `{"include_payloads":true}`})
		requireProblem(t, resp, body, http.StatusNotFound, "not_found")
		require.True(t, called)
	})
}

// TestRequireRole outside a request: no principal, no role.
func TestRequireRole(t *testing.T) {
	t.Parallel()
	err := hxhttp.RequireRole(context.Background(), hxhttp.RoleExportPayloads)
	require.ErrorIs(t, err, hxhttp.ErrForbidden)
	_, ok := hxhttp.PrincipalFrom(context.Background())
	require.False(t, ok)
}

// TestNewOIDC: incomplete configuration and unreachable or inconsistent
// providers fail at start-up with a message naming the issuer.
func TestNewOIDC(t *testing.T) {
	t.Parallel()
	iss := hxtest.NewIssuer(t)
	// Port 1 on loopback: nothing listens there, and unlike a port taken
	// and closed by the test, no parallel test's server can be handed it.
	closed := "http://127.0.0.1:1"
	// A provider whose keys are served over plain http from elsewhere.
	var remoteKeys *httptest.Server
	remoteKeys = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": remoteKeys.URL, "jwks_uri": "http://jwks.remote.example/keys"})
	}))
	t.Cleanup(remoteKeys.Close)

	tests := []struct {
		name string
		cfg  hxhttp.OIDCConfig
		want []string
	}{
		{name: "nothing", cfg: hxhttp.OIDCConfig{}, want: []string{"issuer is required", "audience is required"}},
		{name: "no audience", cfg: hxhttp.OIDCConfig{Issuer: iss.URL}, want: []string{"audience is required"}},
		{name: "HMAC algorithm", cfg: hxhttp.OIDCConfig{Issuer: iss.URL, Audience: "hxd", Algorithms: []string{"RS256", "HS256"}},
			want: []string{`algorithm "HS256" is not allowed`}},
		{name: "none algorithm", cfg: hxhttp.OIDCConfig{Issuer: iss.URL, Audience: "hxd", Algorithms: []string{"none"}},
			want: []string{`algorithm "none" is not allowed`}},
		{name: "unreachable", cfg: hxhttp.OIDCConfig{Issuer: closed, Audience: "hxd"},
			want: []string{`oidc discovery of issuer "` + closed + `"`, "connection refused"}},
		{name: "issuer mismatch", cfg: hxhttp.OIDCConfig{Issuer: iss.URL + "/", Audience: "hxd"},
			want: []string{`oidc discovery of issuer "` + iss.URL + `/"`, "did not match"}},
		{name: "plain-http keys on a remote host", cfg: hxhttp.OIDCConfig{Issuer: remoteKeys.URL, Audience: "hxd"},
			want: []string{`jwks_uri "http://jwks.remote.example/keys" must use https`}},
		{name: "not a provider", cfg: hxhttp.OIDCConfig{Issuer: iss.URL + "/elsewhere", Audience: "hxd"},
			want: []string{`oidc discovery of issuer "` + iss.URL + `/elsewhere"`, "404"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			start := time.Now()
			_, err := hxhttp.NewOIDC(ctx, tt.cfg)
			require.Error(t, err)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
			require.Less(t, time.Since(start), 3*time.Second, "fails fast")
		})
	}
}
