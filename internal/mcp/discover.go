package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"hxd/internal/journal"
)

// maxTools bounds how many tools one server may list.
const maxTools = 1024

// ErrUnknownTool is wrapped when an allow-list names a tool the server
// does not have.
var ErrUnknownTool = errors.New("mcp server lacks an allow-listed tool")

// ErrBadTool is wrapped when a listed tool cannot be bridged: its input
// schema is unusable or its registered name collides with another of the
// same server's.
var ErrBadTool = errors.New("mcp tool cannot be bridged")

// MissingToolsError reports allow-listed tools a server lacks. It wraps
// ErrUnknownTool.
type MissingToolsError struct {
	Server string
	Tools  []string
}

// Error implements error.
func (e *MissingToolsError) Error() string {
	q := make([]string, len(e.Tools))
	for i, t := range e.Tools {
		q[i] = fmt.Sprintf("%q", t)
	}
	return fmt.Sprintf("MCP server %q has no tool %s (named in its tools allow-list)", e.Server, strings.Join(q, ", "))
}

// Unwrap returns ErrUnknownTool.
func (e *MissingToolsError) Unwrap() error { return ErrUnknownTool }

// PinnedTool is one bridged tool as discovered when a session was
// created: what the model sees for the whole session, whatever the server
// lists later. It is stored with the session and in the journal.
type PinnedTool struct {
	// Name is the registered name the model calls (RegisteredName).
	Name string `json:"name"`
	// ToolName is the tool's name on the server.
	ToolName string `json:"tool_name"`
	// Description as shown to the model: "[MCP:<server>] <description>"
	// (the server's description, or its tool name), as the reference.
	Description string `json:"description"`
	// InputSchema is the server's input schema, with "type":"object" and
	// "properties":{} added when missing (as the reference).
	InputSchema json.RawMessage `json:"input_schema"`
	// Server is the server's name in the agent file.
	Server string `json:"server"`
	// Transport is stdio | streamable_http | sse.
	Transport string `json:"transport"`
}

// Discover connects to cfg's server for agent (reusing the agent's
// connection), lists every tool (all pages) and returns the pinned tools
// the allow-list keeps, in the server's order. An unreachable server is an
// *UnavailableError (ErrUnavailable); an allow-list naming a tool the
// server lacks a *MissingToolsError (ErrUnknownTool).
func (m *Manager) Discover(ctx context.Context, agent string, cfg ServerConfig) ([]PinnedTool, error) {
	c, err := m.conn(agent, cfg)
	if err != nil {
		return nil, err
	}
	timeout := secondsDuration(c.cfg.TimeoutSeconds)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	var listed []*sdk.Tool
	for t, err := range l.session.Tools(ctx, nil) {
		if err != nil {
			if l.broken() || !isProtocolError(err) {
				c.drop(l)
			}
			if cut := l.cutReason(); cut != nil {
				err = cut
			}
			return nil, c.unavailable("listing tools failed", err)
		}
		if len(listed) == maxTools {
			return nil, c.unavailable(fmt.Sprintf("lists more than %d tools", maxTools), nil)
		}
		listed = append(listed, t)
	}
	return pin(c.cfg, l.transport, listed)
}

// pin turns listed tools into pinned tools, applying the allow-list.
func pin(cfg ServerConfig, transport string, listed []*sdk.Tool) ([]PinnedTool, error) {
	have := make(map[string]bool, len(listed))
	for _, t := range listed {
		have[t.Name] = true
	}
	var missing []string
	for _, name := range cfg.Tools {
		if !have[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, &MissingToolsError{Server: cfg.Name, Tools: missing}
	}
	out := make([]PinnedTool, 0, len(listed))
	names := map[string]string{}
	for _, t := range listed {
		if len(cfg.Tools) > 0 && !slices.Contains(cfg.Tools, t.Name) {
			continue
		}
		schema, err := pinSchema(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("%w: MCP server %q tool %q: input schema: %w", ErrBadTool, cfg.Name, t.Name, err)
		}
		name := RegisteredName(cfg.Name, t.Name)
		if name == "" {
			return nil, fmt.Errorf("%w: MCP server %q tool %q: no usable name", ErrBadTool, cfg.Name, t.Name)
		}
		if prev, dup := names[name]; dup {
			return nil, fmt.Errorf("%w: MCP server %q tools %q and %q both register as %q", ErrBadTool, cfg.Name, prev, t.Name, name)
		}
		names[name] = t.Name
		desc := t.Description
		if desc == "" {
			desc = t.Name
		}
		p := PinnedTool{
			Name: name, ToolName: t.Name, Description: "[MCP:" + cfg.Name + "] " + desc,
			InputSchema: schema, Server: cfg.Name, Transport: transport,
		}
		if _, err := newSchemaTool(p); err != nil {
			return nil, fmt.Errorf("%w: MCP server %q tool %q: %w", ErrBadTool, cfg.Name, t.Name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// pinSchema normalizes a listed input schema: a JSON object with "type"
// and "properties" (added when missing, as the reference), in a form the
// journal can store canonically.
func pinSchema(raw any) (json.RawMessage, error) {
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, errors.New("is not JSON")
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		obj = map[string]any{}
	}
	if t, ok := obj["type"]; !ok || t == nil || t == "" {
		obj["type"] = "object"
	}
	if _, ok := obj["properties"]; !ok {
		obj["properties"] = map[string]any{}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, errors.New("is not JSON")
	}
	if journal.Deeper(out, journal.MaxInputDepth) {
		return nil, errors.New("is nested too deeply")
	}
	if err := journal.CheckCanonical(out); err != nil {
		return nil, errors.New("has no canonical JSON form")
	}
	return out, nil
}
