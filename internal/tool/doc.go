// Package tool owns the tool kinds an agent can call: builtin (Go
// functions in process: echo, sleep and the demo tools overdue_balance and
// write_report), webhook (an HTTP POST per attempt, DESIGN §5) and client
// (the API client posts the result). It validates tool configs and call
// inputs (JSON schema) and classifies failures as *Failure data with a
// transient flag.
//
// It runs single attempts only: retries, timeouts of whole runs,
// permissions, approvals and result middleware belong to the runtime.
// Package tool never imports runtime, store, temporal or internal/http.
package tool
