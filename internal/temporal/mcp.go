package temporal

// MCP tools on the Temporal engine (issue 21, item 5). The engine
// discovers each declared server's tools when a session is created and
// pins them in the workflow input (SessionInput.MCPTools), so that the
// workflow, its replays and its continuations never list tools again;
// each bridged call runs as a tool activity whose input carries the pinned
// entry (ToolInput.MCPTool), with the run's execution key in the call's
// _meta, through the worker's own mcp.Manager.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"hxd/internal/agent"
	"hxd/internal/mcp"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// discoverMCP pins the MCP tools of a new session of def (nil when def
// declares no server), as the local engine does: runtime.PinMCPTools over
// the engine's Manager.
func (e *Engine) discoverMCP(ctx context.Context, def *agent.Definition) ([]mcp.PinnedTool, error) {
	return runtime.PinMCPTools(ctx, e.cfg.MCP, def)
}

// addPinned makes the pinned tools of the session the workflow's tools
// after the agent's own: their specs reach every model request, and their
// configs (the server's permission, replay policy, retry and timeout) and
// pinned schemas gate, prepare and validate their calls, in workflow code.
func (w *sessionWorkflow) addPinned(pinned []mcp.PinnedTool) error {
	if len(pinned) == 0 {
		return nil
	}
	w.pinned = make(map[string]*mcp.PinnedTool, len(pinned))
	for i := range pinned {
		p := &pinned[i]
		si := slices.IndexFunc(w.def.MCPServers, func(c mcp.ServerConfig) bool { return c.Name == p.Server })
		if si < 0 {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("pinned MCP tool %q names no server of the agent", p.Name), ErrTypeInvalidRequest, nil)
		}
		t, err := mcp.DescribeTool(w.def.MCPServers[si], *p)
		if err != nil {
			return temporal.NewNonRetryableApplicationError("invalid pinned MCP tool: "+err.Error(), ErrTypeInvalidRequest, nil)
		}
		if _, dup := w.tools[p.Name]; dup {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("pinned MCP tool %q clashes with another tool", p.Name), ErrTypeInvalidRequest, nil)
		}
		w.tools[p.Name] = agent.ToolDef{Config: t.Config()}
		w.validators[p.Name] = t
		w.specs = append(w.specs, t.Spec())
		w.pinned[p.Name] = p
	}
	return nil
}

// mcpTool returns the tool of a bridged call: the pinned entry of the
// workflow input, over the worker's Manager and the server declaration of
// the bound (hash-checked) definition. No tool is listed.
func (a *Activities) mcpTool(b *binding, p mcp.PinnedTool) (tool.Tool, error) {
	i := slices.IndexFunc(b.def.MCPServers, func(c mcp.ServerConfig) bool { return c.Name == p.Server })
	if i < 0 {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("bind MCP tool %s: the agent declares no server %q", p.Name, p.Server), "ConfigurationError", nil)
	}
	t, err := mcp.NewTool(a.mcp, b.def.Ref().String(), b.def.MCPServers[i], p)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("bind MCP tool "+p.Name+": "+err.Error(), "ConfigurationError", nil)
	}
	return t, nil
}

// transientResult reports a failed attempt that still returned a result
// (an MCP result the reference's transient rule flags): with no retry
// left, the result itself is handed to the model, as the reference does,
// rather than a generic error text.
func transientResult(out tool.Outcome, f *tool.Failure, action runtime.FailureAction) bool {
	return f.Transient && action == runtime.FailErrorResult && len(strings.TrimSpace(string(out.Result.Content))) > 0
}

// Close closes the activities' MCP connections (the worker's Manager),
// waiting for stdio children to exit. NewWorker's worker calls it when it
// stops; a caller of Register calls it once the activities stopped.
func (a *Activities) Close() error {
	return a.mcp.Close()
}
