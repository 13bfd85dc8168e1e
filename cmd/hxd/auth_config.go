package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	hxhttp "hxd/internal/http"
)

// Authentication modes of --auth.
const (
	authNone = "none"
	authOIDC = "oidc"
)

// oidcDiscoveryTimeout bounds provider discovery (and the JWKS check) at
// start-up.
const oidcDiscoveryTimeout = 15 * time.Second

// oidcConfig is the --auth=oidc part of serveConfig.
type oidcConfig struct {
	// Issuer is the provider's issuer URL, exactly as its discovery
	// document and tokens spell it (a trailing slash counts); https, or
	// http on a loopback host. Required with --auth=oidc.
	Issuer string
	// Audience must be one of a token's `aud` values. Required with
	// --auth=oidc.
	Audience string
	// TenantClaim names a string claim every token must carry; its value
	// becomes part of the principal. Default: none.
	TenantClaim string
	// RolesClaim names the claim holding the caller's roles (an array of
	// strings or a space-separated string such as `scope`; a dotted name
	// that is not a top-level claim is a nested path). Default: roles.
	RolesClaim string
	// ConsoleClientID is the provider's public client (no secret) the web
	// console signs in with (Authorization Code flow with PKCE, redirect
	// URI <base>/ui/callback). Default: none (the console offers only a
	// pasted bearer token).
	ConsoleClientID string
	// ConsoleScope is the scope the console asks for when it signs in.
	// Default: openid.
	ConsoleScope string
}

// defaultConsoleScope is the default of --oidc-console-scope.
const defaultConsoleScope = "openid"

func (c *oidcConfig) register(fs *flag.FlagSet, envOr func(name, def string) string) {
	fs.StringVar(&c.Issuer, "oidc-issuer", envOr("HXD_OIDC_ISSUER", ""), "OpenID provider issuer URL, exactly as in its tokens' iss (HXD_OIDC_ISSUER)")
	fs.StringVar(&c.Audience, "oidc-audience", envOr("HXD_OIDC_AUDIENCE", ""), "audience every token's aud must hold (HXD_OIDC_AUDIENCE)")
	fs.StringVar(&c.TenantClaim, "oidc-tenant-claim", envOr("HXD_OIDC_TENANT_CLAIM", ""), "claim naming the caller's tenant, part of the principal; tokens without it are refused (HXD_OIDC_TENANT_CLAIM)")
	fs.StringVar(&c.ConsoleClientID, "oidc-console-client-id", envOr("HXD_OIDC_CONSOLE_CLIENT_ID", ""), "public client id (no secret) the web console signs in with, by the Authorization Code flow with PKCE and redirect URI <base>/ui/callback (HXD_OIDC_CONSOLE_CLIENT_ID)")
	fs.StringVar(&c.ConsoleScope, "oidc-console-scope", envOr("HXD_OIDC_CONSOLE_SCOPE", defaultConsoleScope), "space-separated scope the web console asks for, openid included (HXD_OIDC_CONSOLE_SCOPE)")
	fs.StringVar(&c.RolesClaim, "oidc-roles-claim", envOr("HXD_OIDC_ROLES_CLAIM", hxhttp.DefaultRolesClaim), "claim holding the caller's roles: an array, or a space-separated string such as scope (HXD_OIDC_ROLES_CLAIM)")
}

// validateAuth checks the authentication mode and its options.
func validateAuth(mode string, c oidcConfig) []error {
	var errs []error
	switch mode {
	case authNone:
		if c.Issuer != "" || c.Audience != "" || c.TenantClaim != "" || c.RolesClaim != hxhttp.DefaultRolesClaim ||
			c.ConsoleClientID != "" || c.ConsoleScope != defaultConsoleScope {
			errs = append(errs, errors.New("--oidc-* options need --auth=oidc (with --auth=none every caller is the local principal)"))
		}
	case authOIDC:
		if c.Issuer == "" {
			errs = append(errs, errors.New("--auth=oidc needs --oidc-issuer (HXD_OIDC_ISSUER), the provider's issuer URL"))
		} else if err := validateIssuerURL(c.Issuer); err != nil {
			errs = append(errs, fmt.Errorf("--oidc-issuer: %w", err))
		}
		if c.Audience == "" {
			errs = append(errs, errors.New("--auth=oidc needs --oidc-audience (HXD_OIDC_AUDIENCE), the audience hxd's tokens are issued for"))
		}
		if c.RolesClaim == "" {
			errs = append(errs, errors.New("--oidc-roles-claim must not be empty"))
		}
		errs = append(errs, validateConsoleClient(c)...)
	default:
		errs = append(errs, fmt.Errorf("--auth must be none or oidc, not %q", mode))
	}
	return errs
}

// maxConsoleOption bounds --oidc-console-client-id and --oidc-console-scope:
// both are written into every console page.
const maxConsoleOption = 1000

// validateConsoleClient checks the console's sign-in options: a client id
// of printable characters, and a scope that asks for openid (the console
// signs in with OpenID Connect) of scope tokens (RFC 6749 §3.3).
func validateConsoleClient(c oidcConfig) []error {
	var errs []error
	if len(c.ConsoleClientID) > maxConsoleOption || strings.IndexFunc(c.ConsoleClientID, notVisibleASCII) >= 0 {
		errs = append(errs, fmt.Errorf("--oidc-console-client-id must be at most %d printable ASCII characters without spaces", maxConsoleOption))
	}
	scope := strings.Fields(c.ConsoleScope)
	switch {
	case len(c.ConsoleScope) > maxConsoleOption || strings.ContainsFunc(c.ConsoleScope, func(r rune) bool { return r != ' ' && notVisibleASCII(r) }):
		errs = append(errs, fmt.Errorf("--oidc-console-scope must be at most %d printable ASCII characters, its scopes separated by spaces", maxConsoleOption))
	case !slices.Contains(scope, "openid"):
		errs = append(errs, fmt.Errorf("--oidc-console-scope %q must include openid", c.ConsoleScope))
	}
	return errs
}

// notVisibleASCII is true for a character outside %x21-7E, the characters
// of a client id and of a scope token (RFC 6749 appendix A).
func notVisibleASCII(r rune) bool { return r < 0x21 || r > 0x7e }

// validateIssuerURL accepts an absolute https URL, or http on a loopback
// host (a local provider): the JWKS that vouches for every token is
// fetched from it.
func validateIssuerURL(issuer string) error {
	u, err := url.Parse(issuer)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL", issuer)
	case u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return fmt.Errorf("%q must be an absolute https URL", issuer)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%q must not have a query, fragment or user info", issuer)
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		return fmt.Errorf("%q must use https (http only on a loopback host)", issuer)
	}
	return nil
}

// newAuthenticator is nil for --auth=none; for --auth=oidc it discovers
// the provider, failing fast (the error names the issuer).
func newAuthenticator(ctx context.Context, mode string, c oidcConfig, log *slog.Logger) (hxhttp.Authenticator, error) {
	if mode != authOIDC {
		return nil, nil
	}
	dctx, cancel := context.WithTimeout(ctx, oidcDiscoveryTimeout)
	defer cancel()
	auth, err := hxhttp.NewOIDC(dctx, hxhttp.OIDCConfig{
		Issuer: c.Issuer, Audience: c.Audience, TenantClaim: c.TenantClaim, RolesClaim: c.RolesClaim,
	})
	if err != nil {
		return nil, err
	}
	log.InfoContext(ctx, "oidc authentication", "issuer", c.Issuer, "audience", c.Audience,
		"tenant_claim", c.TenantClaim, "roles_claim", c.RolesClaim)
	return auth, nil
}
