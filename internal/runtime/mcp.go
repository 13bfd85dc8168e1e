package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"hxd/internal/agent"
	"hxd/internal/journal"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/tool"
)

// ErrMCPTools: an agent's MCP servers were reached but their tools cannot
// be pinned for a session (an allow-list or a scripted model naming a tool
// the server lacks, a name clash, an unusable schema), or this process has
// no MCP manager. An unreachable server is reported with the mcp package's
// *mcp.UnavailableError instead (errors.Is mcp.ErrUnavailable).
var ErrMCPTools = errors.New("mcp tools cannot be pinned")

// pinMCP discovers the MCP servers of b's agent for a new session and
// returns the pinned tools as stored with the session ([] when the agent
// has none).
func (r *Runtime) pinMCP(ctx context.Context, b *binding) (json.RawMessage, error) {
	pinned, err := PinMCPTools(ctx, r.cfg.MCP, b.def)
	if err != nil {
		return nil, err
	}
	if pinned == nil {
		pinned = []mcp.PinnedTool{}
	}
	raw, err := json.Marshal(pinned)
	if err != nil {
		return nil, fmt.Errorf("encode pinned mcp tools: %w", err)
	}
	return raw, nil
}

// PinMCPTools discovers the MCP servers def declares (through m, keyed by
// def's ref) and returns the tools a new session pins, checked against
// def's own tools and the tool calls of its scripted models; nil when def
// declares none. Both engines call it at session creation. Errors are
// *PublicError values with a client-safe detail: an unreachable server
// wraps mcp.ErrUnavailable (its *mcp.UnavailableError names the server,
// never a header or env value); tools that cannot be pinned, or a nil m
// for an agent with servers, wrap ErrMCPTools.
func PinMCPTools(ctx context.Context, m *mcp.Manager, def *agent.Definition) ([]mcp.PinnedTool, error) {
	servers := def.MCPServers
	if len(servers) == 0 {
		return nil, nil
	}
	if m == nil {
		return nil, publicErr(ErrMCPTools, "this process does not run MCP servers (agent "+def.Ref().String()+" declares mcp_servers)")
	}
	check := mcp.SessionCheck{}
	for _, td := range def.Tools {
		check.OwnTools = append(check.OwnTools, td.Name)
	}
	for _, mc := range def.Model.Chain() {
		for _, step := range mc.Script {
			for _, c := range step.ToolCalls {
				check.ScriptedCalls = append(check.ScriptedCalls, c.Name)
			}
		}
	}
	pinned, err := mcp.PinSession(ctx, m, def.Ref().String(), servers, check)
	if err != nil {
		var ue *mcp.UnavailableError
		if errors.As(err, &ue) {
			// The detail names the server and a reason free of secrets.
			return nil, &PublicError{Err: err, Detail: ue.Error()}
		}
		if errors.Is(err, mcp.ErrUnavailable) {
			return nil, &PublicError{Err: err, Detail: "an MCP server of the agent is unavailable"}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, publicWrap(ErrMCPTools, "", err)
	}
	return pinned, nil
}

// pinnedTools decodes a session's stored pinned list (nil when none).
func pinnedTools(raw json.RawMessage) ([]mcp.PinnedTool, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var out []mcp.PinnedTool
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode pinned mcp tools: %w", err)
	}
	return out, nil
}

// withMCP returns b extended by the session's pinned MCP tools, rebuilt
// from the stored list (never listed again): what the model sees is the
// list pinned at creation for the whole session. b itself is returned for
// a session without them.
func (r *Runtime) withMCP(b *binding, sess *rtstore.SessionRow) (*binding, error) {
	pinned, err := pinnedTools(sess.MCPTools)
	if err != nil {
		return nil, err
	}
	if len(pinned) == 0 {
		return b, nil
	}
	if r.cfg.MCP == nil {
		return nil, publicErr(ErrMCPTools, "this process does not run MCP servers, which the session's tools need")
	}
	tools, err := mcp.SessionTools(r.cfg.MCP, b.def.Ref().String(), b.def.MCPServers, pinned)
	if err != nil {
		return nil, publicWrap(ErrAgentMismatch, "the session's pinned MCP tools do not fit the agent", err)
	}
	sb := *b
	sb.tools = make(map[string]tool.Tool, len(b.tools)+len(tools))
	for k, v := range b.tools {
		sb.tools[k] = v
	}
	sb.specs = append(make([]model.ToolSpec, 0, len(b.specs)+len(tools)), b.specs...)
	for _, t := range tools {
		sb.tools[t.Config().Name] = t
		sb.specs = append(sb.specs, t.Spec())
	}
	return &sb, nil
}

// startedMCP adds the session's pinned MCP tools to a run.started payload
// (key mcp_tools) when it has any.
func startedMCP(payload map[string]any, sess *rtstore.SessionRow) {
	if pinned, err := pinnedTools(sess.MCPTools); err == nil && len(pinned) > 0 {
		payload["mcp_tools"] = pinned
	}
}

// failedWithResult reports whether a failed call's own result is what the
// model sees: a failure that came with the tool's result (an MCP server's
// transient body, the reference's mcp_result_transient rule) and has no
// retry left. Its tool.failed is recorded here, as toolFailed would before
// an error result; the caller then takes the result in as a return.
// Failures without a result (every other tool's) are left to toolFailed.
func (d *driver) failedWithResult(e *ToolEntry, f *tool.Failure, out tool.Outcome) bool {
	if len(out.Result.Content) == 0 || ToolFailureAction(e, f) != FailErrorResult {
		return false
	}
	outcome := "unknown"
	if f.Transient && !f.MayHaveRun {
		outcome = "failed"
	}
	d.record(journal.KindToolFailed, map[string]any{"type": f.Type, "message": f.Message, "outcome": outcome}, e)
	return true
}
