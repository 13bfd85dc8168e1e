package hxtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// IssuerAudience is the audience of the tokens an Issuer mints by default.
const IssuerAudience = "hxd"

// Issuer is a fake OpenID provider: an httptest server serving
// /.well-known/openid-configuration and a JWKS of RSA keys generated in
// the test, and minting RS256 tokens. Rotate replaces the signing key
// (the old one leaves the JWKS). It is safe for concurrent use and stops
// with the test.
type Issuer struct {
	// URL is the issuer (the server's base URL, no trailing slash).
	URL string

	mu      sync.Mutex
	key     *rsa.PrivateKey
	kid     string
	n       int // keys generated so far
	fetches int // JWKS requests served
}

// NewIssuer starts an Issuer with one signing key.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	iss := &Issuer{}
	iss.Rotate(t)
	srv := httptest.NewServer(http.HandlerFunc(iss.serveHTTP))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	iss.URL = srv.URL
	return iss
}

func (iss *Issuer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		writeJSON(w, map[string]any{
			"issuer":                                iss.URL,
			"authorization_endpoint":                iss.URL + "/auth",
			"token_endpoint":                        iss.URL + "/token",
			"jwks_uri":                              iss.URL + "/keys",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	case "/keys":
		iss.mu.Lock()
		iss.fetches++
		set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
			Key: iss.key.Public(), KeyID: iss.kid, Algorithm: string(jose.RS256), Use: "sig",
		}}}
		iss.mu.Unlock()
		writeJSON(w, set)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Rotate generates a new signing key, the only one the JWKS serves from
// now on, and returns its key id.
func (iss *Issuer) Rotate(t testing.TB) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("hxtest: generate RSA key: %v", err)
	}
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.n++
	iss.key, iss.kid = key, "key-"+strconv.Itoa(iss.n)
	return iss.kid
}

// KeyID is the current signing key's id.
func (iss *Issuer) KeyID() string {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.kid
}

// Key is the current signing key.
func (iss *Issuer) Key() *rsa.PrivateKey {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.key
}

// PublicKeyPEM is the current key's public half as PEM, the bytes an
// attacker would use as an HMAC secret.
func (iss *Issuer) PublicKeyPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(iss.Key().Public())
	if err != nil {
		t.Fatalf("hxtest: marshal public key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// JWKSFetches is how many times the JWKS was served.
func (iss *Issuer) JWKSFetches() int {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.fetches
}

// Claims are valid claims for sub: this issuer, audience IssuerAudience,
// issued now, valid for an hour.
func (iss *Issuer) Claims(sub string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": iss.URL,
		"sub": sub,
		"aud": IssuerAudience,
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
}

// Token is a valid RS256 token for sub signed with the current key; extra
// claims are added (a nil value removes the claim).
func (iss *Issuer) Token(t testing.TB, sub string, extra map[string]any) string {
	t.Helper()
	claims := iss.Claims(sub)
	maps.Copy(claims, extra)
	maps.DeleteFunc(claims, func(_ string, v any) bool { return v == nil })
	return iss.Sign(t, claims)
}

// Sign signs claims with the current key (RS256, its kid).
func (iss *Issuer) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	iss.mu.Lock()
	key, kid := iss.key, iss.kid
	iss.mu.Unlock()
	return SignJWT(t, jose.RS256, key, kid, claims)
}

// SignJWT signs claims with key under alg (any go-jose signing key: an
// *rsa.PrivateKey, or []byte for HS*) with the kid header.
func SignJWT(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatalf("hxtest: signer: %v", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatalf("hxtest: claims: %v", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatalf("hxtest: sign: %v", err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatalf("hxtest: serialize: %v", err)
	}
	return s
}

// UnsignedJWT is an `alg: none` token of claims with the kid header.
func UnsignedJWT(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]any{"alg": "none", "typ": "JWT", "kid": kid})
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatalf("hxtest: claims: %v", err)
	}
	return enc.EncodeToString(header) + "." + enc.EncodeToString(payload) + "."
}

// NewRSAKey generates a 2048-bit RSA key.
func NewRSAKey(t testing.TB) crypto.Signer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("hxtest: generate RSA key: %v", err)
	}
	return key
}
