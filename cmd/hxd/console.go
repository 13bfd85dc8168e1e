package main

import (
	"fmt"

	"hxd/internal/ui"
)

// consolePath is where `hxd serve` serves the web console.
const consolePath = "/ui/"

// consoleConfig is the web console's configuration for cfg: with
// --auth=oidc, how it signs in (the provider, the public client of
// --oidc-console-client-id, the audience and scope it asks for; without a
// client id, it only takes a pasted token).
func consoleConfig(cfg *serveConfig) ui.Config {
	if cfg.Auth != authOIDC {
		return ui.Config{}
	}
	return ui.Config{OIDC: &ui.OIDCConfig{
		Issuer:   cfg.OIDC.Issuer,
		ClientID: cfg.OIDC.ConsoleClientID,
		Audience: cfg.OIDC.Audience,
		Scope:    cfg.OIDC.ConsoleScope,
	}}
}

// consoleURL is the console's address on a server listening on addr.
func consoleURL(addr string) string {
	return fmt.Sprintf("http://%s%s", addr, consolePath)
}
