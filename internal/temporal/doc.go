// Package temporal is hxd's Temporal engine: one workflow per session
// (HarnessAgentSessionV1), activities for every model and tool call, the
// worker that registers them (REFERENCE §9), and Engine, the client side
// that serves hxd's HTTP API through Temporal updates and queries.
//
// Temporal is an ENGINE here, not a runtime.Store: run state lives only in
// workflow data, nothing is journaled, and recording is refused. The pure
// tables and steps of internal/runtime drive the loop, so both engines make
// the same decisions. Provisional public events go to Redis Streams
// (subpackage events) and large payloads to an S3-compatible bucket
// (subpackage artifacts).
//
// This package tree is the only importer of go.temporal.io/sdk.
package temporal
