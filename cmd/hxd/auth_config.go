package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
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
}

func (c *oidcConfig) register(fs *flag.FlagSet, envOr func(name, def string) string) {
	fs.StringVar(&c.Issuer, "oidc-issuer", envOr("HXD_OIDC_ISSUER", ""), "OpenID provider issuer URL, exactly as in its tokens' iss (HXD_OIDC_ISSUER)")
	fs.StringVar(&c.Audience, "oidc-audience", envOr("HXD_OIDC_AUDIENCE", ""), "audience every token's aud must hold (HXD_OIDC_AUDIENCE)")
	fs.StringVar(&c.TenantClaim, "oidc-tenant-claim", envOr("HXD_OIDC_TENANT_CLAIM", ""), "claim naming the caller's tenant, part of the principal; tokens without it are refused (HXD_OIDC_TENANT_CLAIM)")
	fs.StringVar(&c.RolesClaim, "oidc-roles-claim", envOr("HXD_OIDC_ROLES_CLAIM", hxhttp.DefaultRolesClaim), "claim holding the caller's roles: an array, or a space-separated string such as scope (HXD_OIDC_ROLES_CLAIM)")
}

// validateAuth checks the authentication mode and its options.
func validateAuth(mode string, c oidcConfig) []error {
	var errs []error
	switch mode {
	case authNone:
		if c.Issuer != "" || c.Audience != "" || c.TenantClaim != "" || c.RolesClaim != hxhttp.DefaultRolesClaim {
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
	default:
		errs = append(errs, fmt.Errorf("--auth must be none or oidc, not %q", mode))
	}
	return errs
}

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
