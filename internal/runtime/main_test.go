package runtime_test

import (
	"os"
	"testing"

	"hxd/internal/hxtest"
)

func TestMain(m *testing.M) {
	// The MCP stdio tests (mcp_stdio_test.go) run this binary as their
	// server's child process.
	if len(os.Args) == 2 && os.Args[1] == mcpChildArg {
		runMCPChild()
		return
	}
	hxtest.WrapTestMain(m)
}
