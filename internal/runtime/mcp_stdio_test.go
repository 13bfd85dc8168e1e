package runtime_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"hxd/internal/mcp"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/tool"
)

// mcpChildArg makes this test binary an MCP stdio server (TestMain).
const mcpChildArg = "hxd-runtime-test-mcp-child"

// runMCPChild serves the stdio test server and exits. Its tool hang, on
// its first call (no marker file yet), creates the marker, writes its
// process id to the fifo and blocks; later calls answer "second call".
func runMCPChild() {
	s := sdk.NewServer(&sdk.Implementation{Name: "hxd-runtime-child", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"fifo":{"type":"string"},"marker":{"type":"string"}}}`)
	s.AddTool(&sdk.Tool{Name: "hang", Description: "Block on the first call.", InputSchema: schema},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var a struct{ Fifo, Marker string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			if _, err := os.Stat(a.Marker); err == nil {
				return mcpText("second call", false), nil
			}
			if err := os.WriteFile(a.Marker, nil, 0o600); err != nil {
				return mcpText(err.Error(), true), nil
			}
			if f, err := os.OpenFile(a.Fifo, os.O_WRONLY, 0); err == nil {
				_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
				_ = f.Close()
			}
			<-ctx.Done()
			return mcpText("cancelled", true), nil
		})
	err := s.Run(context.Background(), &sdk.StdioTransport{})
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		fmt.Fprintln(os.Stderr, "mcp child:", err)
	}
	os.Exit(0)
}

// killChildMidCall runs an agent whose one MCP tool (stdio child, replay
// policy policy) blocks on its first call, kills the child with SIGKILL
// once the call is in flight, and returns the bundle and the settled run.
func killChildMidCall(t *testing.T, policy string) (*testBundle, *hxruntime.RunResult) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	fifo, marker := filepath.Join(dir, "fifo"), filepath.Join(dir, "marker")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	input, err := json.Marshal(map[string]string{"fifo": fifo, "marker": marker})
	require.NoError(t, err)
	cfg := mcp.ServerConfig{Name: "kid", Command: []string{exe, mcpChildArg}, Permission: "allow", ReplayPolicy: policy}
	if policy != tool.PolicyManual {
		cfg.Retry = &tool.Retry{Attempts: 3}
	}
	def := mcpAgent("mcp-kill-"+policy, cfg, model.ToolCall{ID: "c1", Name: "kid_hang", Input: input})
	tb := setupMCP(t, def)
	ctx := context.Background()
	sess, err := tb.rt.CreateSession(ctx, hxruntime.CreateSessionParams{Agent: def.Ref(), Recording: recording(true)})
	require.NoError(t, err)
	run, _, err := tb.rt.SubmitRun(ctx, hxruntime.SubmitParams{SessionID: sess.ID, Message: jsonString("go")})
	require.NoError(t, err)

	f, err := os.Open(fifo) // blocks until the child is in the call
	require.NoError(t, err)
	line, err := bufio.NewReader(f).ReadString('\n')
	require.NoError(t, err)
	require.NoError(t, f.Close())
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	return tb, waitRun(t, tb, run.RunID)
}

// TestMCPStdioChildKilledManual: a manual MCP call whose child dies
// mid-call may have run: the run awaits a decision (uncertain).
func TestMCPStdioChildKilledManual(t *testing.T) {
	t.Parallel()
	_, res := killChildMidCall(t, tool.PolicyManual)
	require.Equal(t, hxruntime.StatusAwaitingInput, res.Status)
	require.Len(t, res.Pending, 1)
	require.Equal(t, hxruntime.ToolUncertain, res.Pending[0].Status)
}

// TestMCPStdioChildKilledSafe: a safe MCP call whose child dies mid-call
// is retried once, on a restarted child, and the run completes.
func TestMCPStdioChildKilledSafe(t *testing.T) {
	t.Parallel()
	tb, res := killChildMidCall(t, tool.PolicySafe)
	require.Equal(t, hxruntime.StatusCompleted, res.Status)
	out := toolReturned(t, journalOf(t, tb, res.RunID), "c1")
	require.False(t, out.IsError)
	require.Contains(t, string(out.Content), "second call")
}
