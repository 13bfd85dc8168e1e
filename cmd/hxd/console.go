package main

import (
	"fmt"

	"hxd/internal/ui"
)

// consolePath is where `hxd serve` serves the web console.
const consolePath = "/ui/"

// consoleConfig is the web console's configuration for cfg.
func consoleConfig(cfg *serveConfig) ui.Config {
	_ = cfg
	return ui.Config{}
}

// consoleURL is the console's address on a server listening on addr.
func consoleURL(addr string) string {
	return fmt.Sprintf("http://%s%s", addr, consolePath)
}
