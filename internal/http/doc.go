// Package http serves hxd's HTTP/JSON API, whose exact contract is
// api/openapi.yaml.
//
// It owns the hand-written strict-server handlers (one file per resource),
// the one error → problem+json table (problem.go), request validation
// against the embedded contract (validate.go) and the middleware chain
// (request id, access log and metrics, panic recovery, body limit,
// authentication: the caller's principal, OIDC bearer tokens with
// --auth=oidc, and per-operation role checks, auth.go). Handlers only call
// Service (service.go) and convert types; they hold no SQL and no
// state-machine decisions. Ownership is the runtime's: it answers
// runtime.ErrNotFound for anything the caller does not own. The web
// console's static files (Config.Console, a handler of internal/ui given
// by cmd/hxd) are mounted at /ui without authentication.
//
// It may import internal/http/api (generated), api (the contract's bytes),
// runtime, hxbundle and agent (plus model for the ToolResult of a
// resolution, journal for the records a bundle is built from, and go-oidc
// for token verification). It must never import store/*, temporal or a
// database driver.
package http
