package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"hxd/internal/agent"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/tool"
)

// mcpDemoServerCmd is the subcommand serving hxd's tiny MCP demo server
// over stdio (the server of the mcp-demo agent of --demo).
const mcpDemoServerCmd = "mcp-demo-server"

// mcpDemoServer runs `hxd mcp-demo-server`: the demo MCP server on stdin
// and stdout until the client disconnects.
func mcpDemoServer(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return &exitError{code: 2, err: fmt.Errorf("%s takes no arguments, got %q", mcpDemoServerCmd, args)}
	}
	return mcp.RunDemoServer(ctx, os.Stdin, os.Stdout)
}

// mcpDemoAgent is the third demo agent of --demo (local engine): its one
// MCP server is this very binary run as `hxd mcp-demo-server` (stdio), and
// its scripted model calls the bridged upper tool, then answers. (upper
// answers text; word_count's structured result would be JSON content,
// which a recorded run's tool_result event cannot carry for the reference
// reader.)
func mcpDemoAgent(exe string) *agent.Definition {
	return &agent.Definition{
		Name: "mcp-demo", Version: "v1",
		SystemPrompt: "You shout a text with the upper tool of the demo MCP server.",
		Model: model.Config{Provider: model.ProviderScripted, Script: []model.ScriptStep{
			{ToolCalls: []model.ToolCall{{ID: "shout", Name: "demo_upper", Input: json.RawMessage(`{"text":"hello from an MCP server"}`)}}},
			{Text: "The MCP server answered: HELLO FROM AN MCP SERVER"},
		}},
		MCPServers: []mcp.ServerConfig{{
			Name: "demo", Command: []string{exe, mcpDemoServerCmd},
			Permission: tool.PermissionAllow, ReplayPolicy: tool.PolicySafe, TimeoutSeconds: 30,
		}},
	}
}

// registerMCPDemo registers the mcp-demo agent (serve --demo, local
// engine) and returns how many agents it added.
func registerMCPDemo(registry *agent.Registry) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("mcp demo agent: locate the hxd binary: %w", err)
	}
	if err := registry.Register(mcpDemoAgent(exe)); err != nil {
		return 0, fmt.Errorf("register agents: %w", err)
	}
	return 1, nil
}
