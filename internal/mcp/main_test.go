package mcp

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"hxd/internal/hxtest"
)

// serverModeEnv makes the test binary an MCP server over its stdio (the
// stdio child of the tests): "test" serves newTestServer, "demo" the demo
// server, "exit" exits at once.
const serverModeEnv = "HXD_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(serverModeEnv); mode != "" {
		os.Exit(runChildServer(mode))
	}
	// The in-process test servers (go-sdk) keep the session of a client
	// that was cut off mid-reply (TestReplyOverLimit) until it times out;
	// its reader is the server's, not the client's under test.
	hxtest.WrapTestMainIgnoring(m, []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/modelcontextprotocol/go-sdk/mcp.(*streamableServerConn).Read"),
	})
}

// runChildServer serves mode over stdin and stdout.
func runChildServer(mode string) int {
	ctx := context.Background()
	var err error
	switch mode {
	case "test":
		err = newTestServer(nil).Run(ctx, stdioTransport())
	case "demo":
		err = RunDemoServer(ctx, os.Stdin, os.Stdout)
	case "exit":
		fmt.Fprintln(os.Stderr, "exiting at once")
		return 3
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	return 0
}
