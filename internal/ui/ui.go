package ui

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// dist is the built console (ui/build.mjs).
//
//go:embed dist
var dist embed.FS

// Config is the console's configuration, given to the browser in
// index.html.
type Config struct {
	// OIDC is the OpenID provider of --auth=oidc; nil without auth (the
	// console then calls the API without a token). An empty ClientID
	// (no --oidc-console-client-id) offers only the pasted-token sign-in.
	OIDC *OIDCConfig
}

// OIDCConfig is what the console needs for the Authorization Code flow
// with PKCE: the issuer, the console's public client id, and the
// audience and scope to ask tokens for.
type OIDCConfig struct {
	Issuer, ClientID, Audience, Scope string
}

// configElement is the index.html element whose text is the console's
// configuration; the built file holds {"oidc":null}.
const (
	configOpen        = `<script id="hxd-console-config" type="application/json">`
	configPlaceholder = configOpen + `{"oidc":null}</script>`
)

// Prefix is the path the console is served under.
const Prefix = "/ui"

// Handler serves the console under /ui: index.html (with cfg) for /ui/
// and every /ui/<path> whose last segment has no extension (deep links),
// the built assets at /ui/assets/<name>, 404 for anything else; GET and
// HEAD only. A malformed cfg.OIDC.Issuer (not an absolute http(s) URL)
// panics: it is a wiring bug, the flag is validated first.
func Handler(cfg Config) http.Handler {
	index, err := renderIndex(cfg)
	if err != nil {
		panic(err)
	}
	return &handler{index: index, csp: contentSecurityPolicy(cfg)}
}

type handler struct {
	index []byte
	csp   string
}

// configJSON is the shape of the configuration element.
type configJSON struct {
	OIDC *oidcJSON `json:"oidc"`
}

type oidcJSON struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"client_id"`
	Audience string `json:"audience,omitempty"`
	Scope    string `json:"scope,omitempty"`
}

// renderIndex is the built index.html with cfg as its configuration
// element. json.Marshal escapes <, > and & (\u003c…), so no value can
// close the script element.
func renderIndex(cfg Config) ([]byte, error) {
	raw, err := fs.ReadFile(dist, "dist/index.html")
	if err != nil {
		return nil, fmt.Errorf("ui: read index.html: %w", err)
	}
	var c configJSON
	if o := cfg.OIDC; o != nil {
		if _, err := issuerOrigin(o.Issuer); err != nil {
			return nil, err
		}
		c.OIDC = &oidcJSON{Issuer: o.Issuer, ClientID: o.ClientID, Audience: o.Audience, Scope: o.Scope}
	}
	js, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("ui: marshal config: %w", err)
	}
	if !bytes.Contains(raw, []byte(configPlaceholder)) {
		return nil, fmt.Errorf("ui: index.html lacks %s", configPlaceholder)
	}
	return bytes.Replace(raw, []byte(configPlaceholder), []byte(configOpen+string(js)+`</script>`), 1), nil
}

// issuerOrigin is scheme://host[:port] of an http(s) issuer URL.
func issuerOrigin(issuer string) (string, error) {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("ui: OIDC issuer %q is not an absolute http(s) URL", issuer)
	}
	return u.Scheme + "://" + u.Host, nil
}

// contentSecurityPolicy allows the console's own files and API, and the
// OpenID provider's origin for the token exchange.
func contentSecurityPolicy(cfg Config) string {
	connect := "'self'"
	if cfg.OIDC != nil {
		if o, err := issuerOrigin(cfg.OIDC.Issuer); err == nil {
			connect += " " + o
		}
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src " + connect +
		"; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", h.csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	if p == Prefix {
		http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
		return
	}
	rest, ok := strings.CutPrefix(p, Prefix+"/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if name, ok := strings.CutPrefix(rest, "assets/"); ok {
		h.serveAsset(w, r, name)
		return
	}
	if path.Ext(rest) != "" {
		http.NotFound(w, r)
		return
	}
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-cache")
	write(w, r, h.index)
}

// assetTypes are the content types of the built assets (fixed here, not
// read from the host's mime tables).
var assetTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".svg": "image/svg+xml",
	".png": "image/png",
}

// serveAsset answers dist/<name> for a built asset (index.html is served
// only with its configuration).
func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	if name == "" || name == "index.html" || strings.Contains(name, "/") || !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	raw, err := fs.ReadFile(dist, "dist/"+name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ctype, ok := assetTypes[path.Ext(name)]
	if !ok {
		ctype = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-cache")
	write(w, r, raw)
}

// write sends body with its length, or only the length for HEAD.
func write(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}
