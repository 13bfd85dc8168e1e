// Package mcp bridges Model Context Protocol servers into hxd tools
// (issue 21): the `mcp_servers:` declaration of an agent file and its
// validation, the connections to the servers (stdio children and HTTP
// endpoints, through the official go-sdk client), tool discovery into a
// pinned list (data, stored with a session), and a tool.Tool per pinned
// tool whose calls follow the webhook failure semantics.
//
// It imports tool, model and journal; it never imports runtime, store/*,
// temporal or internal/http. Wiring (sessions, journal, HTTP API, Temporal)
// belongs to the callers.
package mcp
