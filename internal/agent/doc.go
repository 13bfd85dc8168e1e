// Package agent owns agent definitions: the YAML (or JSON) agent file
// format of DESIGN §5, its strict loading and validation, defaults, the
// response/result text middleware, the AgentRef registry and the two demo
// agents (invoice-analyst@v1, crash-recovery@v1).
//
// It describes agents; it runs nothing. Package agent never imports
// runtime, store, temporal or internal/http.
package agent
