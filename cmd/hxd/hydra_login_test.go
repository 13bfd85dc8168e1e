package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
)

// loginRig is the login and consent app of a Hydra started by
// startHydraWith (URLS_LOGIN, URLS_CONSENT): it accepts every login as
// the subject the test chose last (setSubject) through Hydra's admin API,
// and grants every consent the scope and audience asked for. No password,
// no page: Hydra's redirects go straight through.
type loginRig struct {
	srv *httptest.Server

	mu      sync.Mutex
	admin   string // Hydra's admin URL, set once Hydra runs
	subject string
	logins  []string // the subjects accepted, in order
}

// newLoginRig starts the rig on 127.0.0.1; the test sets its admin URL
// with setAdmin once Hydra runs.
func newLoginRig(t *testing.T) *loginRig {
	t.Helper()
	rig := &loginRig{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", rig.login)
	mux.HandleFunc("GET /consent", rig.consent)
	rig.srv = httptest.NewServer(mux)
	t.Cleanup(rig.srv.Close)
	return rig
}

// env is Hydra's configuration pointing at the rig.
func (rig *loginRig) env() []string {
	return []string{"URLS_LOGIN=" + rig.srv.URL + "/login", "URLS_CONSENT=" + rig.srv.URL + "/consent"}
}

func (rig *loginRig) setAdmin(admin string) {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	rig.admin = admin
}

// setSubject makes the next logins sign in as subject.
func (rig *loginRig) setSubject(subject string) {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	rig.subject = subject
}

func (rig *loginRig) acceptedLogins() []string {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	return append([]string(nil), rig.logins...)
}

func (rig *loginRig) login(w http.ResponseWriter, r *http.Request) {
	rig.mu.Lock()
	admin, subject := rig.admin, rig.subject
	if subject != "" {
		rig.logins = append(rig.logins, subject)
	}
	rig.mu.Unlock()
	if subject == "" {
		http.Error(w, "the test chose no subject", http.StatusForbidden)
		return
	}
	challenge := r.URL.Query().Get("login_challenge")
	rig.accept(w, r, admin+"/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(challenge),
		map[string]any{"subject": subject, "remember": false})
}

func (rig *loginRig) consent(w http.ResponseWriter, r *http.Request) {
	rig.mu.Lock()
	admin := rig.admin
	rig.mu.Unlock()
	challenge := r.URL.Query().Get("consent_challenge")
	resp, err := http.Get(admin + "/admin/oauth2/auth/requests/consent?consent_challenge=" + url.QueryEscape(challenge))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	var req struct {
		Scope    []string `json:"requested_scope"`
		Audience []string `json:"requested_access_token_audience"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&req) != nil {
		http.Error(w, "consent request: "+resp.Status, http.StatusBadGateway)
		return
	}
	rig.accept(w, r, admin+"/admin/oauth2/auth/requests/consent/accept?consent_challenge="+url.QueryEscape(challenge),
		map[string]any{"grant_scope": req.Scope, "grant_access_token_audience": req.Audience, "remember": false})
}

// accept PUTs an acceptance to Hydra's admin API and redirects the
// browser where Hydra says.
func (rig *loginRig) accept(w http.ResponseWriter, r *http.Request, endpoint string, body any) {
	raw, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPut, endpoint, bytes.NewReader(raw))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		RedirectTo string `json:"redirect_to"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil || out.RedirectTo == "" {
		http.Error(w, "accept: "+resp.Status, http.StatusBadGateway)
		return
	}
	http.Redirect(w, r, out.RedirectTo, http.StatusFound)
}

// createPublicClient registers, through Hydra's admin API, a public
// client (no secret, PKCE) of the Authorization Code flow issuing JWT
// access tokens for audience, with redirect URI redirect.
func (h *hydra) createPublicClient(t *testing.T, redirect, audience string) string {
	t.Helper()
	raw, err := json.Marshal(map[string]any{
		"client_name":                "hxd console (test)",
		"grant_types":                []string{"authorization_code"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
		"redirect_uris":              []string{redirect},
		"audience":                   []string{audience},
		"scope":                      "openid",
		"access_token_strategy":      "jwt",
	})
	require.NoError(t, err)
	resp, err := http.Post(h.admin+"/admin/clients", "application/json", bytes.NewReader(raw))
	require.NoError(t, err)
	defer hxtest.Close(t, resp.Body)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	var c struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	require.NoError(t, json.Unmarshal(body, &c))
	require.NotEmpty(t, c.ID)
	require.Empty(t, c.Secret, "a public client has no secret")
	return c.ID
}

// codeFlowToken runs the Authorization Code flow with PKCE as a browser
// would, without one: the rig logs subject in, and the code that Hydra
// sends to redirect is exchanged for the access token (a JWT).
func (h *hydra) codeFlowToken(t *testing.T, rig *loginRig, clientID, redirect, audience, subject string) string {
	t.Helper()
	rig.setSubject(subject)
	verifier := make([]byte, 32)
	_, err := rand.Read(verifier)
	require.NoError(t, err)
	v := base64.RawURLEncoding.EncodeToString(verifier)
	sum := sha256.Sum256([]byte(v))
	state := base64.RawURLEncoding.EncodeToString(sum[:8])
	q := url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect}, "scope": {"openid"},
		"state": {state}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"}, "audience": {audience},
	}
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	var code string
	client := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirect) {
			require.Equal(t, state, req.URL.Query().Get("state"))
			code = req.URL.Query().Get("code")
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := client.Get(h.public + "/oauth2/auth?" + q.Encode())
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.NotEmpty(t, code, "no code sent to %s: %s %s", redirect, resp.Status, body)

	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect},
		"client_id": {clientID}, "code_verifier": {v}}
	resp, err = http.PostForm(h.public+"/oauth2/token", form)
	require.NoError(t, err)
	defer hxtest.Close(t, resp.Body)
	body, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	require.NoError(t, json.Unmarshal(body, &tok))
	require.Len(t, strings.Split(tok.AccessToken, "."), 3, "a JWT access token")
	return tok.AccessToken
}
