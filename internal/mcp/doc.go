// Package mcp bridges Model Context Protocol servers into hxd tools
// (issue 21): the `mcp_servers:` declaration of an agent file and its
// validation, the connections to the servers (stdio children and HTTP
// endpoints, through the official go-sdk client), tool discovery into a
// pinned list (data, stored with a session), and a tool.Tool per pinned
// tool whose calls follow the webhook failure semantics.
//
// The flow for a caller:
//
//	m := mcp.NewManager(mcp.Options{Logger: logger}) // one per process
//	defer m.Close()                                  // closes every connection, waits for children
//	// at session creation, per declared server:
//	pinned, err := m.Discover(ctx, ref.String(), cfg) // errors.Is(err, mcp.ErrUnavailable): 422 mcp_unavailable
//	// at session creation and whenever a session is loaded again:
//	tl, err := mcp.NewTool(m, ref.String(), cfg, pinned[i])
//
// The agent key passed to Discover and NewTool names the connection:
// sessions of the same agent share it, so it should identify the agent's
// version (an agent.Ref's String) since a changed declaration under the
// same key replaces the connection.
//
// It imports tool, model and journal; it never imports runtime, store/*,
// temporal or internal/http. Wiring (sessions, journal, HTTP API, Temporal)
// belongs to the callers.
package mcp
