// Package ui serves hxd's web console: the single-page app built from ui/
// (npm run build, make generate) into dist/ and embedded in the binary.
//
// It owns the console's static files and their serving rules (Handler):
// /ui/ and every extensionless /ui/<path> answer index.html, carrying the
// console's configuration (Config) as escaped JSON; /ui/assets/<file>
// answers a built asset; everything is sent with a strict
// Content-Security-Policy. The console talks to the public REST API only.
//
// It must not import anything of this module: internal/http mounts its
// Handler (hxhttp.Config.Console) and cmd/hxd configures it.
package ui
