// Package events carries the Temporal engine's provisional public events
// (runtime.RunEvent) in Redis Streams: one stream per run,
// "harness:events:<run_id>" with the event's JSON in field "event", and a
// dedupe set "<stream key>:ids" of the event IDs already published. One
// atomic Lua script skips seen IDs, appends, records the IDs and refreshes
// both keys' TTL (REFERENCE §9 RedisEvents).
//
// Redis is not authoritative: durable run state lives in Temporal workflow
// data. Publish is bounded by a short timeout and its errors are meant to be
// logged and ignored; Read errors (ErrUnavailable) and gaps (expired or
// trimmed history) become a public "gap" event. Cursor maps a stream entry
// ID "<ms>-<seq>" to the int64 cursor of the HTTP API and back.
//
// It imports runtime (for RunEvent) and go-redis only; it must never import
// internal/http, store/* or the Temporal SDK.
package events
