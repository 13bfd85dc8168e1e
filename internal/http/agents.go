package http

import (
	"context"

	"hxd/internal/agent"
	"hxd/internal/http/api"
)

// ListAgents lists the registered agents (without secrets).
func (s *Server) ListAgents(_ context.Context, _ api.ListAgentsRequestObject) (api.ListAgentsResponseObject, error) {
	defs := s.svc.Agents()
	items := make([]api.Agent, 0, len(defs))
	for _, d := range defs {
		items = append(items, agentOut(d))
	}
	return api.ListAgents200JSONResponse{Items: items}, nil
}

// GetAgent returns one registered agent.
func (s *Server) GetAgent(_ context.Context, req api.GetAgentRequestObject) (api.GetAgentResponseObject, error) {
	d, err := s.svc.Agent(req.Name, req.Version)
	if err != nil {
		return nil, err
	}
	return api.GetAgent200JSONResponse(agentOut(d)), nil
}

// agentOut is the public view of a definition: no API-key env names, base
// URLs, webhook URLs, scripts or middleware.
func agentOut(d *agent.Definition) api.Agent {
	a := api.Agent{
		Name:    d.Name,
		Version: d.Version,
		Model:   api.AgentModel{Provider: d.Model.Provider, Model: optString(d.Model.Model)},
		Tools:   make([]api.AgentTool, 0, len(d.Tools)),
	}
	if len(d.Model.Fallback) > 0 {
		fb := make([]api.AgentFallbackModel, 0, len(d.Model.Fallback))
		for _, m := range d.Model.Fallback {
			fb = append(fb, api.AgentFallbackModel{Provider: m.Provider, Model: optString(m.Model)})
		}
		a.Model.Fallback = &fb
	}
	a.SystemPrompt = optString(d.SystemPrompt)
	a.McpServers = mcpServersOut(d)
	for _, t := range d.Tools {
		c := t.WithDefaults()
		a.Tools = append(a.Tools, api.AgentTool{
			Name:         c.Name,
			Description:  optString(c.Description),
			Kind:         api.AgentToolKind(c.Kind),
			ReplayPolicy: api.ReplayPolicy(c.ReplayPolicy),
			Permission:   api.AgentToolPermission(c.Permission),
		})
	}
	return a
}

// optString is nil for "", else &s.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
