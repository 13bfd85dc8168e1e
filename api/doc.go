// Package api holds hxd's HTTP contract, api/openapi.yaml, as the bytes
// committed in this directory (go:embed): GET /openapi.yaml serves them
// unchanged and the server validates requests against them.
//
// The code generated from the contract lives in internal/http/api; this
// package only carries the file. It imports nothing of hxd.
package api
