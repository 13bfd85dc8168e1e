package mcp

import (
	"context"
	"errors"

	"hxd/internal/tool"
)

// errDescribeOnly is the cause of a call of a DescribeTool tool.
var errDescribeOnly = errors.New("mcp: a described tool is never called")

// DescribeTool returns a tool of a pinned tool of cfg's server that only
// describes and validates: its Config, Spec and ValidateInput are
// NewTool's, but it holds no Manager and its Call fails without running.
// The Temporal workflow uses it to gate, prepare and validate bridged
// calls in workflow code (pure, deterministic); the calls themselves run
// in activities, through NewTool over the worker's Manager.
func DescribeTool(cfg ServerConfig, pinned PinnedTool) (tool.Tool, error) {
	t, err := NewTool(nil, "", cfg, pinned)
	if err != nil {
		return nil, err
	}
	return describedTool{t}, nil
}

// describedTool is a pinned tool without a connection.
type describedTool struct{ tool.Tool }

// Call fails: a described tool has no connection.
func (describedTool) Call(context.Context, tool.Invocation) (tool.Outcome, error) {
	return tool.Outcome{}, &tool.Failure{Type: "MCPError", Message: "MCP tool has no connection", Cause: errDescribeOnly}
}
