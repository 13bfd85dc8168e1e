package mcp

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"hxd/internal/tool"
)

// ErrNameClash is wrapped when a bridged tool's registered name is taken
// by one of the agent's own tools or by a tool of another of its servers.
var ErrNameClash = errors.New("mcp tool name clashes with another tool")

// ErrUnknownScriptedTool is wrapped when a scripted model (the agent's or
// a fallback entry's script) calls a name that looks bridged (see
// MayBeBridged) but that no server listed.
var ErrUnknownScriptedTool = errors.New("scripted model names an mcp tool that was not discovered")

// SessionCheck is what PinSession checks the discovered tools against.
type SessionCheck struct {
	// OwnTools are the names of the agent's own tools.
	OwnTools []string
	// ScriptedCalls are the tool names a scripted model calls (every step
	// of every script of the agent's model chain).
	ScriptedCalls []string
}

// PinSession discovers every server of cfgs for agent (each bounded by
// its own timeout, in order) and returns the pinned tools of them all,
// the first server's first. Errors: an *UnavailableError (ErrUnavailable)
// for a server that cannot be reached; ErrUnknownTool (allow-list),
// ErrBadTool (schema), ErrNameClash (a registered name taken by an own
// tool or another server's) and ErrUnknownScriptedTool. Both engines
// call it at session creation.
func PinSession(ctx context.Context, m *Manager, agent string, cfgs []ServerConfig, check SessionCheck) ([]PinnedTool, error) {
	if len(cfgs) == 0 {
		return nil, nil
	}
	if m == nil {
		return nil, fmt.Errorf("%w: MCP servers are not enabled in this process", ErrClosed)
	}
	own := make(map[string]bool, len(check.OwnTools))
	for _, n := range check.OwnTools {
		own[n] = true
	}
	from := map[string]string{} // registered name → server
	var all []PinnedTool
	for _, cfg := range cfgs {
		pinned, err := m.Discover(ctx, agent, cfg)
		if err != nil {
			return nil, err
		}
		for _, p := range pinned {
			if own[p.Name] {
				return nil, fmt.Errorf("%w: tool %q of MCP server %q has the name of one of the agent's tools", ErrNameClash, p.ToolName, cfg.Name)
			}
			if other, ok := from[p.Name]; ok {
				return nil, fmt.Errorf("%w: MCP servers %q and %q both give a tool named %q", ErrNameClash, other, cfg.Name, p.Name)
			}
			from[p.Name] = cfg.Name
			all = append(all, p)
		}
	}
	var missing []string
	for _, n := range check.ScriptedCalls {
		if own[n] || from[n] != "" || !MayBeBridged(n, cfgs) {
			continue
		}
		missing = append(missing, n)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("%w: %q", ErrUnknownScriptedTool, missing)
	}
	return all, nil
}

// SessionTools returns the tool.Tool of every pinned tool, rebuilt from
// the pinned list alone (no listing): the servers' current configuration
// comes from cfgs, by name. A pinned tool whose server is no longer
// declared is an ErrBadTool.
func SessionTools(m *Manager, agent string, cfgs []ServerConfig, pinned []PinnedTool) ([]tool.Tool, error) {
	if len(pinned) == 0 {
		return nil, nil
	}
	byName := make(map[string]ServerConfig, len(cfgs))
	for _, c := range cfgs {
		byName[c.Name] = c
	}
	out := make([]tool.Tool, 0, len(pinned))
	for _, p := range pinned {
		cfg, ok := byName[p.Server]
		if !ok {
			return nil, fmt.Errorf("%w: MCP tool %q: the agent declares no server %q", ErrBadTool, p.Name, p.Server)
		}
		t, err := NewTool(m, agent, cfg, p)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
