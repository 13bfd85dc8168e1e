package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"hxd/internal/model"
	"hxd/internal/tool"
)

// MetaExecutionKey is the `_meta` key of a call carrying its execution
// key, so that an idempotent server can deduplicate repeats.
const MetaExecutionKey = "hxd/execution_key"

// mcpTool is a pinned MCP tool: its schema and description are the pinned
// ones, its calls go through the Manager's connection of (agent, server).
type mcpTool struct {
	m      *Manager
	agent  string
	server ServerConfig
	pinned PinnedTool
	cfg    tool.Config
	schema tool.Tool
}

// NewTool returns the tool.Tool of a pinned MCP tool of cfg's server for
// agent. Config() carries the server's permission, replay policy, retry
// and timeout; ValidateInput checks the pinned schema; Call connects
// lazily (so a session restored after a restart needs no listing).
func NewTool(m *Manager, agent string, cfg ServerConfig, pinned PinnedTool) (tool.Tool, error) {
	cfg = cfg.WithDefaults()
	schema, err := newSchemaTool(pinned)
	if err != nil {
		return nil, fmt.Errorf("%w: MCP tool %q: %w", ErrBadTool, pinned.Name, err)
	}
	retry := DefaultRetry
	if cfg.Retry != nil {
		retry = *cfg.Retry
	}
	tc := tool.Config{
		Name:           pinned.Name,
		Description:    pinned.Description,
		InputSchema:    pinned.InputSchema,
		Kind:           KindMCP,
		ReplayPolicy:   cfg.ReplayPolicy,
		Permission:     cfg.Permission,
		TimeoutSeconds: cfg.TimeoutSeconds,
		Retry:          &retry,
	}
	return &mcpTool{m: m, agent: agent, server: cfg, pinned: pinned, cfg: tc, schema: schema}, nil
}

// newSchemaTool compiles the pinned input schema with the tool package's
// validator (a client tool is the kind that runs nothing).
func newSchemaTool(p PinnedTool) (tool.Tool, error) {
	t, err := tool.New(tool.Config{Name: "mcp_tool", Kind: tool.KindClient, InputSchema: p.InputSchema}, tool.Options{})
	if err != nil {
		var fe *tool.FieldError
		if errors.As(err, &fe) {
			return nil, errors.New(fe.Problem)
		}
		return nil, errors.New("invalid input schema")
	}
	return t, nil
}

// Config returns the tool's configuration.
func (t *mcpTool) Config() tool.Config { return t.cfg }

// Spec describes the tool to the model.
func (t *mcpTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: t.cfg.Name, Description: t.cfg.Description, InputSchema: t.cfg.InputSchema}
}

// ValidateInput checks input against the pinned schema.
func (t *mcpTool) ValidateInput(input json.RawMessage) error { return t.schema.ValidateInput(input) }

// Call runs one attempt, bounded by the server's timeout, with the
// execution key in the call's _meta. Failures follow the webhook rules:
//   - the server cannot be reached: a transient ConnectionError that did
//     not run;
//   - the connection broke during the call (a child died, a stream was
//     cut): a transient ConnectionError that may have run;
//   - the timeout: a transient TimeoutError that may have run;
//   - a message over MaxReplyBytes: an MCPError that may have run (the
//     connection is cut off and reopened by the next call);
//   - a JSON-RPC error reply (unknown tool, invalid params): an error
//     result, as a webhook's 4xx;
//   - a result the reference's transient rule flags (mcp_result_transient,
//     see isTransientResult): a transient TransientToolError, returned
//     together with the Outcome holding the result, which a caller that has
//     no retry left hands to the model as the reference does.
func (t *mcpTool) Call(ctx context.Context, inv tool.Invocation) (tool.Outcome, error) {
	timeout := secondsDuration(t.server.TimeoutSeconds)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name := t.server.Name

	c, err := t.m.conn(t.agent, t.server)
	if err != nil {
		return tool.Outcome{}, &tool.Failure{Type: "MCPError", Message: "MCP connections are closed", Cause: err}
	}
	l, err := c.get(ctx)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return tool.Outcome{}, &tool.Failure{Type: "MCPError", Message: "MCP connections are closed", Cause: err}
		}
		if errors.Is(ctx.Err(), context.Canceled) {
			return tool.Outcome{}, &tool.Failure{Type: "CancelledError", Message: "tool call cancelled", Cause: context.Canceled}
		}
		// Nothing was sent: the call did not run.
		return tool.Outcome{}, &tool.Failure{Type: "ConnectionError", Message: fmt.Sprintf("MCP server %q is unavailable", name), Transient: true, Cause: err}
	}

	input := inv.Call.Input
	if b := bytes.TrimSpace(input); len(b) == 0 || string(b) == "null" {
		input = json.RawMessage(`{}`)
	}
	res, err := l.session.CallTool(ctx, &sdk.CallToolParams{
		Meta:      sdk.Meta{MetaExecutionKey: inv.ExecutionKey},
		Name:      t.pinned.ToolName,
		Arguments: input,
	})
	if err != nil {
		var we *jsonrpc.Error
		if !l.broken() && isProtocolError(err) && errors.As(err, &we) {
			// The server answered the call with an error, as a webhook's 4xx.
			msg := we.Message
			if len(msg) > 500 {
				msg = msg[:500] + "…"
			}
			return tool.Outcome{Result: tool.ErrorResult(inv.Call.ID, fmt.Sprintf("MCP server %q refused the call: JSON-RPC error %d: %s", name, we.Code, msg))}, nil
		}
		return tool.Outcome{}, t.callError(ctx, c, l, timeout, err)
	}
	out, text := mapResult(inv.Call.ID, res)
	if isTransientResult(text, res.IsError) {
		return out, &tool.Failure{Type: "TransientToolError", Message: fmt.Sprintf("MCP server %q reported a transient failure", name), Transient: true}
	}
	return out, nil
}

// callError classifies a failed call; a broken link is dropped so that
// the next call reconnects (restarting a stdio child).
func (t *mcpTool) callError(ctx context.Context, c *conn, l *link, timeout time.Duration, err error) error {
	name := t.server.Name
	if cut := l.cutReason(); cut != nil {
		c.drop(l)
		return &tool.Failure{Type: "MCPError", Message: fmt.Sprintf("MCP server %q sent a message over %d bytes; its connection was cut off", name, MaxReplyBytes), MayHaveRun: true, Cause: cut}
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &tool.Failure{Type: "TimeoutError", Message: fmt.Sprintf("tool call timed out after %s", timeout), Transient: true, MayHaveRun: true, Cause: context.DeadlineExceeded}
	case errors.Is(ctx.Err(), context.Canceled):
		return &tool.Failure{Type: "CancelledError", Message: "tool call cancelled", Cause: context.Canceled}
	}
	l.markBroken()
	c.drop(l)
	return &tool.Failure{Type: "ConnectionError", Message: fmt.Sprintf("MCP server %q connection broke during the call", name), Transient: true, MayHaveRun: true, Cause: errors.New(c.scrub(err))}
}

// isProtocolError reports a JSON-RPC error the server sent, as opposed to
// one the SDK makes up when the connection closes.
func isProtocolError(err error) bool {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return false
	}
	switch we.Code {
	case -32001, -32003, -32004: // unknown error, client closing, server closing
		return false
	}
	return true
}

// secondsDuration converts seconds to a Duration.
func secondsDuration(s float64) time.Duration {
	return time.Duration(s * float64(time.Second))
}
