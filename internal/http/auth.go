package http

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	jose "github.com/go-jose/go-jose/v4"

	"hxd/internal/http/api"
	hxruntime "hxd/internal/runtime"
)

// RoleExportPayloads is the role exportRun needs to export payloads
// (include_payloads: true); a metadata-only export needs ownership only.
const RoleExportPayloads = "export:payloads"

// Errors of authentication and authorization. Their text never reaches the
// client: problem.go answers ErrUnauthorized as 401 `unauthorized` and
// ErrForbidden as 403 `forbidden`.
var (
	// ErrUnauthorized is a missing or invalid bearer token.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden is an authenticated caller lacking a role the
	// operation needs.
	ErrForbidden = errors.New("forbidden")
)

// Principal is the authenticated caller of a request.
type Principal struct {
	// ID is the runtime principal that owns sessions:
	// runtime.LocalPrincipal with --auth=none, else
	// "oidc:<iss>|<sub>" or "oidc:<iss>|<sub>|<tenant>", each part with
	// "%" and "|" percent-encoded so that no two callers share an ID.
	ID string
	// Issuer, Subject and Tenant are the verified claims the ID is built
	// from (empty with --auth=none; Tenant empty unless a tenant claim is
	// configured).
	Issuer, Subject, Tenant string
	// Roles are the values of the configured roles claim.
	Roles []string
	// allRoles: the single local principal of --auth=none holds every role.
	allRoles bool
}

// anonymous is the principal of the public operations (health, readiness,
// contract) when authentication is on: it owns nothing and collides with
// no real principal (those start with "oidc:").
var anonymous = &Principal{ID: "anonymous"}

// localPrincipal is every caller with --auth=none.
var localPrincipal = &Principal{ID: hxruntime.LocalPrincipal, allRoles: true}

// HasRole reports whether the principal holds role.
func (p *Principal) HasRole(role string) bool {
	return p != nil && (p.allRoles || slices.Contains(p.Roles, role))
}

type principalKey struct{}

// withPrincipal returns ctx carrying p, for this package (PrincipalFrom)
// and for the runtime (runtime.PrincipalFrom: ownership).
func withPrincipal(ctx context.Context, p *Principal) context.Context {
	return hxruntime.WithPrincipal(context.WithValue(ctx, principalKey{}, p), p.ID)
}

// PrincipalFrom returns the caller the server's authentication middleware
// put into ctx; false outside a request.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// RequireRole returns nil when the caller in ctx holds role, else an error
// matching ErrForbidden (403 `forbidden`).
func RequireRole(ctx context.Context, role string) error {
	if p, ok := PrincipalFrom(ctx); ok && p.HasRole(role) {
		return nil
	}
	return fmt.Errorf("%w: role %q required", ErrForbidden, role)
}

// Authenticator verifies bearer tokens; *OIDC implements it.
type Authenticator interface {
	// Authenticate returns the principal of a valid token. Any error means
	// the token is not acceptable (401): its text is logged, never sent to
	// the client. Safe for concurrent use.
	Authenticate(ctx context.Context, token string) (*Principal, error)
}

// maxTokenBytes bounds a bearer token; a longer one is malformed.
const maxTokenBytes = 16 << 10

// WWW-Authenticate challenges (RFC 6750 §3): without an error when no
// token was sent, invalid_token for any token that is not accepted.
const (
	challengeMissing = `Bearer realm="hxd"`
	challengeInvalid = `Bearer error="invalid_token"`
)

// resourceParams are the path parameters that name a resource, logged
// with every denial.
var resourceParams = []string{"session_id", "run_id", "execution_key", "sha256", "name", "version"}

// publicOperations are the operations the contract declares public with
// an explicit empty `security: []` (health, readiness, the contract
// itself), keyed "METHOD /path". Every other operation, and any request
// matching none, needs a bearer token: a contract that forgets the global
// requirement does not open the API.
func publicOperations(spec *openapi3.T) map[string]bool {
	public := map[string]bool{}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Security != nil && len(*op.Security) == 0 {
				public[method+" "+path] = true
			}
		}
	}
	return public
}

// authenticate decides who the caller is; it runs before routing. With no
// Authenticator every request acts as runtime.LocalPrincipal (holding
// every role). Otherwise every request except the public operations needs
// `Authorization: Bearer <token>`: a missing, malformed or rejected token
// is a 401 `unauthorized` with a WWW-Authenticate challenge and nothing
// else about the reason (the log says why; the token is never logged).
// A 404 answered to an authenticated caller (an unknown or foreign id: the
// runtime tells them apart for no one) is logged as an audit event.
func (s *Server) authenticate(mux *chi.Mux, routes *routeIndex, public map[string]bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if s.auth == nil {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), localPrincipal)))
			})
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			// Find the operation the router will pick, without touching the
			// request's own route context (routing fills it later).
			found := chi.NewRouteContext()
			pattern := mux.Find(found, routeMethod(r), routingPath(r))
			if public[routeMethod(r)+" "+pattern] {
				next.ServeHTTP(w, r.WithContext(withPrincipal(ctx, anonymous)))
				return
			}
			token, reason := bearerToken(r.Header)
			var p *Principal
			if reason == "" {
				var err error
				switch p, err = s.auth.Authenticate(ctx, token); {
				case err != nil:
					reason = err.Error()
				case p == nil || p.ID == "":
					reason = "authenticator returned no principal"
				}
			}
			if reason != "" {
				// Routing will not run: expose the matched route to the
				// outer middleware (access log, metrics) and writeProblem.
				if rctx := chi.RouteContext(ctx); rctx != nil && pattern != "" {
					rctx.RoutePatterns = append(rctx.RoutePatterns[:0], pattern)
					rctx.URLParams = found.URLParams
				}
				challenge := challengeInvalid
				if reason == reasonMissing {
					challenge = challengeMissing
				}
				s.log.InfoContext(ctx, "authentication failed", append([]any{
					"request_id", requestIDFrom(ctx),
					"operation", routes.operationID(routeMethod(r), pattern),
					"reason", reason,
					"remote_addr", r.RemoteAddr,
				}, resourceAttrs(found)...)...)
				w.Header().Set("WWW-Authenticate", challenge)
				s.writeProblem(w, r, fmt.Errorf("%w: %s", ErrUnauthorized, reason))
				return
			}
			next.ServeHTTP(w, r.WithContext(withPrincipal(ctx, p)))
			if responseStatus(w) == http.StatusNotFound {
				rctx := chi.RouteContext(ctx)
				if rctx == nil || routes.route(routeMethod(r), rctx.RoutePattern()) == nil {
					return // no operation: nothing was looked up
				}
				s.log.InfoContext(ctx, "access denied or not found", append([]any{
					"request_id", requestIDFrom(ctx),
					"principal", p.ID,
					"operation", routes.operationID(routeMethod(r), rctx.RoutePattern()),
					"http_status", http.StatusNotFound,
				}, resourceAttrs(rctx)...)...)
			}
		})
	}
}

// routeMethod is the method a request is routed by: a HEAD request is
// served by the GET operation of its path (chi's middleware.GetHead; the
// contract declares no HEAD operation), as net/http leaves out the body.
func routeMethod(r *http.Request) string {
	if r.Method == http.MethodHead {
		return http.MethodGet
	}
	return r.Method
}

// routingPath is the path chi routes on.
func routingPath(r *http.Request) string {
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	if r.URL.Path == "" {
		return "/"
	}
	return r.URL.Path
}

// resourceAttrs are the log attributes of the resource ids in a route's
// parameters.
func resourceAttrs(rctx *chi.Context) []any {
	var attrs []any
	for _, name := range resourceParams {
		if v := rctx.URLParam(name); v != "" {
			attrs = append(attrs, name, truncate(v, 200))
		}
	}
	return attrs
}

// responseStatus is the status written so far on w, as the access-log
// recorder saw it (0 when unknown).
func responseStatus(w http.ResponseWriter) int {
	for {
		switch t := w.(type) {
		case *statusRecorder:
			return t.status
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return 0
		}
	}
}

const reasonMissing = "no Authorization header"

// bearerToken extracts the token of `Authorization: Bearer <token>`
// (RFC 6750 §2.1: one header, scheme case-insensitive, b64token syntax);
// reason says what is wrong otherwise.
func bearerToken(h http.Header) (token, reason string) {
	values := h.Values("Authorization")
	switch len(values) {
	case 0:
		return "", reasonMissing
	case 1:
	default:
		return "", "more than one Authorization header"
	}
	scheme, tok, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", "Authorization header is not a Bearer credential"
	}
	if tok == "" || len(tok) > maxTokenBytes || !isB64Token(tok) {
		return "", "malformed bearer token"
	}
	return tok, ""
}

// isB64Token reports whether s matches RFC 6750's
// b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for _, c := range []byte(body) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("-._~+/", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// operationRoles are the roles an operation needs beyond authentication
// and ownership, by the generated operation name, given its decoded
// request ("" when this request needs none). The contract's security
// section says which operations need a token at all; roles that depend on
// the request body cannot be written there, so they live here.
var operationRoles = map[string]func(request any) string{
	"ExportRun": func(request any) string {
		if req, ok := request.(api.ExportRunRequestObject); ok && req.Body != nil && deref(req.Body.IncludePayloads) {
			return RoleExportPayloads
		}
		return ""
	},
}

// authorize is the strict middleware checking operationRoles. A denial is
// a 403 `forbidden`, answered before the handler runs, for any target id:
// it says nothing about whether the target exists.
func (s *Server) authorize(f api.StrictHandlerFunc, operationID string) api.StrictHandlerFunc {
	need, ok := operationRoles[operationID]
	if !ok {
		return f
	}
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
		role := need(request)
		if role == "" {
			return f(ctx, w, r, request)
		}
		if err := RequireRole(ctx, role); err != nil {
			p, _ := PrincipalFrom(ctx)
			attrs := []any{
				"request_id", requestIDFrom(ctx),
				"principal", principalID(p),
				"operation", strings.ToLower(operationID[:1]) + operationID[1:],
				"role", role,
				"http_status", http.StatusForbidden,
			}
			if rctx := chi.RouteContext(ctx); rctx != nil {
				attrs = append(attrs, resourceAttrs(rctx)...)
			}
			s.log.InfoContext(ctx, "authorization denied", attrs...)
			return nil, err
		}
		return f(ctx, w, r, request)
	}
}

func principalID(p *Principal) string {
	if p == nil {
		return ""
	}
	return p.ID
}

// DefaultAlgorithms are the signature algorithms OIDC accepts when
// OIDCConfig.Algorithms is empty: every asymmetric JOSE algorithm, never
// "none" nor an HMAC one (a shared secret cannot come from a JWKS).
var DefaultAlgorithms = []string{
	oidc.RS256, oidc.RS384, oidc.RS512,
	oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512,
	oidc.EdDSA,
}

// Defaults of OIDCConfig.
const (
	// DefaultRolesClaim is the claim holding the caller's roles.
	DefaultRolesClaim = "roles"
	// DefaultClockSkew is the leeway of the nbf check.
	DefaultClockSkew = time.Minute
	// DefaultOIDCTimeout bounds each discovery or JWKS request.
	DefaultOIDCTimeout = 10 * time.Second
	// DefaultJWKSRefetchInterval is the minimum time between two fetches
	// of the JWKS triggered by tokens the cached keys cannot verify: an
	// unknown kid or a bad signature is all an anonymous client needs to
	// send, so without it every such request would download the key set
	// again, until the provider rate-limits hxd and every login fails.
	DefaultJWKSRefetchInterval = 30 * time.Second
)

// OIDCConfig configures NewOIDC.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL, exactly as its discovery
	// document and its tokens' `iss` spell it (a trailing slash counts).
	// Required.
	Issuer string
	// Audience must be one of a token's `aud` values. Required.
	Audience string
	// TenantClaim, when set, names a string claim every token must carry;
	// its value becomes part of the principal. Optional, default: none.
	TenantClaim string
	// RolesClaim names the claim holding the caller's roles: a JSON array
	// of strings, or one string of space-separated values (as the OAuth
	// `scope` claim). A name with dots that is not a top-level claim is a
	// path into nested objects (e.g. realm_access.roles). Optional,
	// default: "roles".
	RolesClaim string
	// Algorithms are the accepted signature algorithms. Optional, default:
	// DefaultAlgorithms. "none" and HS* are refused.
	Algorithms []string
	// ClockSkew is the leeway of the `nbf` check (`exp` has none).
	// Optional, default: 1m.
	ClockSkew time.Duration
	// HTTPClient fetches the discovery document and the JWKS. Optional,
	// default: a client with a 10s timeout.
	HTTPClient *http.Client
	// JWKSRefetchInterval is the minimum time between two fetches of the
	// JWKS triggered by tokens the cached keys cannot verify (see
	// DefaultJWKSRefetchInterval). A key published by a rotation is picked
	// up at the latest this long after the previous fetch. Optional,
	// default: 30s.
	JWKSRefetchInterval time.Duration
	// NowFunc is the clock of the exp and nbf checks and of
	// JWKSRefetchInterval. Optional, default: time.Now.
	NowFunc func() time.Time
}

// OIDC verifies JWT bearer tokens of one OpenID provider with go-oidc:
// signature against the provider's JWKS (fetched on first use, cached, and
// fetched again when no cached key verifies a token, so key rotation
// needs no restart, at most once per JWKSRefetchInterval: see jwksCache),
// allowed algorithms, `iss`, `aud`, `exp` and `nbf`. It is safe for
// concurrent use.
type OIDC struct {
	verifier    *oidc.IDTokenVerifier
	issuer      string
	tenantClaim string
	rolesClaim  string
	skew        time.Duration
	now         func() time.Time
}

var _ Authenticator = (*OIDC)(nil)

// NewOIDC discovers the provider (its /.well-known/openid-configuration,
// whose issuer must equal cfg.Issuer) and checks that its JWKS is
// reachable. ctx bounds discovery only. The error names the issuer and
// what failed.
func NewOIDC(ctx context.Context, cfg OIDCConfig) (*OIDC, error) {
	var problems []error
	if cfg.Issuer == "" {
		problems = append(problems, errors.New("issuer is required"))
	}
	if cfg.Audience == "" {
		problems = append(problems, errors.New("audience is required"))
	}
	algs := cfg.Algorithms
	if len(algs) == 0 {
		algs = DefaultAlgorithms
	}
	for _, a := range algs {
		if !slices.Contains(DefaultAlgorithms, a) {
			problems = append(problems, fmt.Errorf("algorithm %q is not allowed", a))
		}
	}
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("oidc: %w", err)
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: DefaultOIDCTimeout}
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, client), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc discovery of issuer %q: %w", cfg.Issuer, err)
	}
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&meta); err != nil || meta.JWKSURI == "" {
		return nil, fmt.Errorf("oidc discovery of issuer %q: the document has no jwks_uri", cfg.Issuer)
	}
	if err := checkKeysURL(meta.JWKSURI); err != nil {
		return nil, fmt.Errorf("oidc discovery of issuer %q: %w", cfg.Issuer, err)
	}
	if err := checkJWKS(ctx, client, meta.JWKSURI); err != nil {
		return nil, fmt.Errorf("oidc issuer %q: %w", cfg.Issuer, err)
	}
	o := &OIDC{
		issuer:      cfg.Issuer,
		tenantClaim: cfg.TenantClaim,
		rolesClaim:  cfg.RolesClaim,
		skew:        cfg.ClockSkew,
		now:         cfg.NowFunc,
	}
	if o.rolesClaim == "" {
		o.rolesClaim = DefaultRolesClaim
	}
	if o.skew <= 0 {
		o.skew = DefaultClockSkew
	}
	if o.now == nil {
		o.now = time.Now
	}
	keys := &jwksCache{
		url:      meta.JWKSURI,
		client:   client,
		interval: cfg.JWKSRefetchInterval,
		now:      o.now,
	}
	if keys.interval <= 0 {
		keys.interval = DefaultJWKSRefetchInterval
	}
	for _, a := range algs {
		keys.algs = append(keys.algs, jose.SignatureAlgorithm(a))
	}
	// The provider's issuer is cfg.Issuer: NewProvider checked it.
	o.verifier = oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{
		ClientID:             cfg.Audience,
		SupportedSigningAlgs: algs,
		Now:                  o.now,
	})
	return o, nil
}

// numericDate reads a JWT date claim as go-oidc does: a JSON number, or a
// string holding one.
func numericDate(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case string:
		f, err := strconv.ParseFloat(v, 64)
		return f, err == nil
	}
	return 0, false
}

// checkKeysURL accepts the jwks_uri of a provider when it is https, or
// http on a loopback host (a local provider), like the issuer itself: the
// keys fetched from it vouch for every token.
func checkKeysURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		return fmt.Errorf("jwks_uri %q is not an absolute URL", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("jwks_uri %q must use https (http only on a loopback host)", raw)
}

// isLoopbackHost reports whether host is localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// maxJWKSBytes bounds every read of the JWKS.
const maxJWKSBytes = 1 << 20

// checkJWKS fetches the key set once so that an unreachable or broken
// JWKS fails start-up rather than every request.
func checkJWKS(ctx context.Context, client *http.Client, jwksURL string) error {
	_, err := fetchJWKS(ctx, client, jwksURL)
	return err
}

// fetchJWKS downloads the key set at jwksURL (at most maxJWKSBytes) and
// returns its public signature keys. Keys for encryption ("use": "enc"),
// with an algorithm outside DefaultAlgorithms, of a type go-jose does not
// know, malformed or symmetric are skipped (RFC 7517 §5: ignore what is
// not understood); a set without any usable key is an error.
func fetchJWKS(ctx context.Context, client *http.Client, jwksURL string) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jwksURL, nil)
	if err != nil {
		return nil, fmt.Errorf("jwks_uri %q: %w", jwksURL, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end or given up: nothing to report
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch jwks %q: %s", jwksURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch jwks %q: %w", jwksURL, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("jwks %q is larger than %d bytes", jwksURL, maxJWKSBytes)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("decode jwks %q: %w", jwksURL, err)
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("jwks %q holds no keys", jwksURL)
	}
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for _, raw := range set.Keys {
		var meta struct {
			Alg string `json:"alg"`
			Use string `json:"use"`
		}
		if json.Unmarshal(raw, &meta) != nil ||
			meta.Use != "" && meta.Use != "sig" ||
			meta.Alg != "" && !slices.Contains(DefaultAlgorithms, meta.Alg) {
			continue
		}
		var key jose.JSONWebKey
		if json.Unmarshal(raw, &key) != nil {
			continue
		}
		if pub := key.Public(); pub.Valid() && pub.IsPublic() {
			keys = append(keys, pub)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("jwks %q holds no usable signature key", jwksURL)
	}
	return keys, nil
}

// jwksCache is the oidc.KeySet of an OIDC: the provider's JWKS, fetched
// when no cached key verifies a token. Unlike go-oidc's RemoteKeySet,
// which fetches again for every such token (coalescing only fetches that
// overlap), it bounds what unverifiable tokens, which anyone can send,
// cost the provider:
//
//   - The first fetch fills the empty cache (on the first token).
//   - After that, a fetch (a refetch) starts at most once per interval,
//     measured from the start of the previous refetch, whatever its
//     outcome. Within the interval a token no cached key verifies is
//     refused at once. The first refetch may follow the first fetch
//     immediately, so a key published before hxd's first token and
//     rotated in right after it is not delayed.
//   - A fetch that fails (also: fills the empty cache and fails) keeps
//     the cached keys, and counts for the interval.
//   - Concurrent callers share the fetch in flight. It runs detached from
//     the callers' cancellation, bounded by DefaultOIDCTimeout and the
//     HTTP client's own timeout; a caller whose context ends stops
//     waiting.
type jwksCache struct {
	url      string
	client   *http.Client
	algs     []jose.SignatureAlgorithm // accepted token algorithms
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	keys     []jose.JSONWebKey // the last set fetched; never modified
	loaded   bool              // keys holds a fetched set
	next     time.Time         // earliest start of the next fetch
	inflight *jwksFetch
}

// jwksFetch is a fetch in flight; its result is readable once done is
// closed.
type jwksFetch struct {
	done chan struct{}
	keys []jose.JSONWebKey
	err  error
}

var _ oidc.KeySet = (*jwksCache)(nil)

// VerifySignature implements oidc.KeySet: the payload of jwt when a key of
// the set (with the token's kid, if it has one, and its alg, if the key
// names one) verifies its signature. The verifier has already checked the
// token's algorithm; it is parsed again here (go-oidc keeps its parse for
// its own key set) with the same allow-list.
func (c *jwksCache) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, c.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("jwt has not exactly one signature")
	}
	c.mu.Lock()
	keys, loaded := c.keys, c.loaded
	c.mu.Unlock()
	if loaded {
		if payload, ok := verifyWith(jws, keys); ok {
			return payload, nil
		}
	}
	if keys, err = c.refetch(ctx); err != nil {
		return nil, err
	}
	if payload, ok := verifyWith(jws, keys); ok {
		return payload, nil
	}
	return nil, errors.New("no key of the provider's key set verifies the jwt")
}

// verifyWith returns the payload of jws when one of keys verifies it.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey) ([]byte, bool) {
	header := jws.Signatures[0].Header
	for i := range keys {
		key := &keys[i]
		if header.KeyID != "" && key.KeyID != header.KeyID ||
			key.Algorithm != "" && key.Algorithm != header.Algorithm {
			continue
		}
		if payload, err := jws.Verify(key); err == nil {
			return payload, true
		}
	}
	return nil, false
}

// refetch returns the keys of a fetch of the JWKS: the one in flight, or a
// new one when the interval allows, else an error.
func (c *jwksCache) refetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	c.mu.Lock()
	f := c.inflight
	if f == nil {
		start := c.now()
		if start.Before(c.next) {
			c.mu.Unlock()
			return nil, fmt.Errorf("no cached key verifies the jwt and the key set was fetched less than %s ago", c.interval)
		}
		f = &jwksFetch{done: make(chan struct{})}
		c.inflight = f
		go c.fetch(context.WithoutCancel(ctx), f, start, !c.loaded)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.keys, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetch runs f, started at start; fill is whether the cache was empty.
func (c *jwksCache) fetch(ctx context.Context, f *jwksFetch, start time.Time, fill bool) {
	ctx, cancel := context.WithTimeout(ctx, DefaultOIDCTimeout)
	defer cancel()
	keys, err := fetchJWKS(ctx, c.client, c.url)
	c.mu.Lock()
	if err == nil {
		c.keys, c.loaded = keys, true
	}
	if err != nil || !fill {
		c.next = start.Add(c.interval)
	}
	c.inflight = nil
	c.mu.Unlock()
	f.keys, f.err = keys, err
	close(f.done)
}

// Authenticate implements Authenticator.
func (o *OIDC) Authenticate(ctx context.Context, token string) (*Principal, error) {
	tok, err := o.verifier.Verify(ctx, token)
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, fmt.Errorf("decode claims: %w", err)
	}
	// go-oidc allows 5 minutes of skew on nbf; ours is tighter. go-oidc
	// reads nbf as a number or a string holding one, and so does this.
	if nbf, ok := numericDate(claims["nbf"]); ok {
		if at := time.Unix(int64(nbf), 0); o.now().Add(o.skew).Before(at) {
			return nil, fmt.Errorf("token not valid before %s", at.UTC().Format(time.RFC3339))
		}
	}
	if tok.Subject == "" {
		return nil, errors.New("token has no sub claim")
	}
	p := &Principal{Issuer: tok.Issuer, Subject: tok.Subject}
	if o.tenantClaim != "" {
		tenant, _ := claims[o.tenantClaim].(string)
		if tenant == "" {
			return nil, fmt.Errorf("token has no string %q (tenant) claim", o.tenantClaim)
		}
		p.Tenant = tenant
	}
	p.Roles = roles(claimAt(claims, o.rolesClaim))
	p.ID = principalIDOf(p.Issuer, p.Subject, p.Tenant, o.tenantClaim != "")
	return p, nil
}

// principalIDOf is "oidc:<iss>|<sub>[|<tenant>]" with each part escaped.
func principalIDOf(iss, sub, tenant string, withTenant bool) string {
	id := "oidc:" + escapePart(iss) + "|" + escapePart(sub)
	if withTenant {
		id += "|" + escapePart(tenant)
	}
	return id
}

// escapePart percent-encodes "%" and "|", the separator of principal IDs.
func escapePart(s string) string {
	if !strings.ContainsAny(s, "%|") {
		return s
	}
	return strings.NewReplacer("%", "%25", "|", "%7C").Replace(s)
}

// claimAt is the claim named name, or, when there is none and name has
// dots, the value at that path of nested objects.
func claimAt(claims map[string]any, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// roles reads a roles claim: an array of strings (other items ignored) or
// a space-separated string.
func roles(v any) []string {
	switch t := v.(type) {
	case string:
		return strings.Fields(t)
	case []any:
		out := make([]string, 0, len(t))
		for _, item := range t {
			if s, ok := item.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
