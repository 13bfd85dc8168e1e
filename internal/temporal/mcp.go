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
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"hxd/internal/agent"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/runtime"
	"hxd/internal/tool"
)

// ErrMCPUnavailable is wrapped by the error of a session creation whose
// agent declares an MCP server that cannot be reached (or an engine
// without an MCP manager): 422 mcp_unavailable. It wraps
// mcp.ErrUnavailable; the error also wraps the *mcp.UnavailableError
// naming the server, and its client-safe detail (runtime.PublicError)
// never holds a header or env value.
var ErrMCPUnavailable = fmt.Errorf("temporal engine: %w", mcp.ErrUnavailable)

// ErrMCPTools is wrapped by the error of a session creation whose agent's
// MCP tools cannot be bridged: an allow-list names a tool the server lacks
// (also mcp.ErrUnknownTool), a listed tool is unusable (also
// mcp.ErrBadTool), a bridged name clashes with one of the agent's tools or
// another server's, or the scripted model names a bridged tool no server
// has. The error is a *runtime.PublicError with a client-safe detail.
var ErrMCPTools = errors.New("agent's MCP tools cannot be bridged")

// mcpUnavailable returns the client-safe error of an unreachable server.
func mcpUnavailable(server string, err error) error {
	var ue *mcp.UnavailableError
	if !errors.As(err, &ue) {
		ue = &mcp.UnavailableError{Server: server, Reason: "its connections are closed"}
	}
	return &runtime.PublicError{Err: fmt.Errorf("%w: %w", ErrMCPUnavailable, err), Detail: ue.Error()}
}

// mcpToolsError returns the client-safe error of tools that cannot be
// bridged; cause, when not nil, is wrapped too (its text is safe: it
// names servers and tools only).
func mcpToolsError(detail string, cause error) error {
	err := ErrMCPTools
	if cause != nil {
		err = fmt.Errorf("%w: %w", ErrMCPTools, cause)
	}
	return &runtime.PublicError{Err: err, Detail: detail}
}

// errNoMCPManager is why an engine without an MCP manager refuses agents
// that declare servers.
var errNoMCPManager = errors.New("no MCP manager configured")

// discoverMCP connects to every server def declares (in order), lists its
// tools and returns the pinned tools, checked (checkPinned); nil when def
// declares none. The connections are the engine's Manager's, keyed by the
// agent's ref.
func (e *Engine) discoverMCP(ctx context.Context, def *agent.Definition) ([]mcp.PinnedTool, error) {
	if len(def.MCPServers) == 0 {
		return nil, nil
	}
	if e.cfg.MCP == nil {
		s := def.MCPServers[0].Name
		return nil, &runtime.PublicError{
			Err:    fmt.Errorf("%w: %w", ErrMCPUnavailable, errNoMCPManager),
			Detail: (&mcp.UnavailableError{Server: s, Reason: "this hxd has no MCP client configured"}).Error(),
		}
	}
	var pinned []mcp.PinnedTool
	for _, cfg := range def.MCPServers {
		tools, err := e.cfg.MCP.Discover(ctx, def.Ref().String(), cfg)
		var missing *mcp.MissingToolsError
		switch {
		case err == nil:
		case errors.Is(err, mcp.ErrUnavailable), errors.Is(err, mcp.ErrClosed):
			return nil, mcpUnavailable(cfg.Name, err)
		case errors.As(err, &missing), errors.Is(err, mcp.ErrBadTool):
			return nil, mcpToolsError(err.Error(), err)
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			return nil, fmt.Errorf("discover MCP server %q: %w", cfg.Name, err)
		}
		pinned = append(pinned, tools...)
	}
	if err := checkPinned(def, pinned); err != nil {
		return nil, err
	}
	return pinned, nil
}

// checkPinned checks the pinned tools of def's servers: a bridged name
// must not be one of the agent's tools nor another server's, and every
// tool a scripted model of def's chain calls must be an agent tool or a
// bridged one.
func checkPinned(def *agent.Definition, pinned []mcp.PinnedTool) error {
	names := make(map[string]string, len(def.Tools)+len(pinned)) // name → owner
	for _, t := range def.Tools {
		names[t.Name] = "the agent's tools"
	}
	for _, p := range pinned {
		if owner, dup := names[p.Name]; dup {
			return mcpToolsError(fmt.Sprintf("MCP server %q tool %q registers as %q, which is already one of %s", p.Server, p.ToolName, p.Name, owner), nil)
		}
		names[p.Name] = fmt.Sprintf("MCP server %q's tools", p.Server)
	}
	for _, m := range def.Model.Chain() {
		if m.Provider != model.ProviderScripted {
			continue
		}
		for _, step := range m.Script {
			for _, c := range step.ToolCalls {
				if _, ok := names[c.Name]; !ok {
					return mcpToolsError(fmt.Sprintf("the scripted model calls %q, which no MCP server of the agent has", c.Name), nil)
				}
			}
		}
	}
	return nil
}

// SessionMCPTools returns the MCP tools pinned when the caller's session
// was created (empty when its agent declares no server), as get_session
// reports them; runtime.ErrNotFound for a session the caller does not own.
func (e *Engine) SessionMCPTools(ctx context.Context, sessionID string) ([]mcp.PinnedTool, error) {
	info, err := e.sessionInfo(ctx, sessionKey(ctx, sessionID))
	if err != nil {
		return nil, err
	}
	if info.MCPTools == nil {
		return []mcp.PinnedTool{}, nil
	}
	return info.MCPTools, nil
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
