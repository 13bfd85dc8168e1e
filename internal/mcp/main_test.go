package mcp

import (
	"context"
	"fmt"
	"os"
	"testing"

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
	hxtest.WrapTestMain(m)
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
