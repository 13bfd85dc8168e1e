package http

import (
	"hxd/internal/agent"
	"hxd/internal/http/api"
	"hxd/internal/mcp"
)

// mcpServersOut is the public view of an agent's MCP servers (nil when
// none): name, transport, permission, replay policy, timeout and the
// allow-list. Commands, environment values, header variables and URLs
// are never shown.
func mcpServersOut(d *agent.Definition) *[]api.AgentMCPServer {
	if len(d.MCPServers) == 0 {
		return nil
	}
	out := make([]api.AgentMCPServer, 0, len(d.MCPServers))
	for _, s := range d.MCPServers {
		c := s.WithDefaults()
		srv := api.AgentMCPServer{
			Name:           c.Name,
			Transport:      api.AgentMCPServerTransport(c.Transport()),
			Permission:     api.AgentMCPServerPermission(c.Permission),
			ReplayPolicy:   api.ReplayPolicy(c.ReplayPolicy),
			TimeoutSeconds: float32(c.TimeoutSeconds),
		}
		if len(c.Tools) > 0 {
			tools := append([]string(nil), c.Tools...)
			srv.Tools = &tools
		}
		out = append(out, srv)
	}
	return &out
}

// mcpToolsOut is a session's pinned MCP tools ([] when none).
func mcpToolsOut(pinned []mcp.PinnedTool) []api.MCPTool {
	out := make([]api.MCPTool, 0, len(pinned))
	for _, p := range pinned {
		out = append(out, api.MCPTool{
			Name: p.Name, ToolName: p.ToolName, Description: p.Description, InputSchema: jsonObject(p.InputSchema),
			Server: p.Server, Transport: api.MCPToolTransport(p.Transport),
		})
	}
	return out
}
