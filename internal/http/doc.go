// Package http serves hxd's HTTP/JSON API, whose exact contract is
// api/openapi.yaml.
//
// It owns the hand-written strict-server handlers (one file per resource),
// the one error → problem+json table (problem.go), request validation
// against the embedded contract (validate.go) and the middleware chain
// (request id, access log and metrics, panic recovery, body limit,
// principal). Handlers only call Service (service.go) and convert types;
// they hold no SQL and no state-machine decisions.
//
// It may import internal/http/api (generated), runtime, hxbundle and agent
// (plus model for the ToolResult of a resolution and journal for the
// records a bundle is built from). It must never import
// store/*, temporal or a database driver.
package http
