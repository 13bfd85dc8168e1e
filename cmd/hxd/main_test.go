package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"

	"hxd/internal/hxtest"
)

// Re-exec hook: the crash tests (crash_test.go) run hxd as a child process
// by starting this test binary again with HXD_TEST_RUN_MAIN=1; the child
// then runs main() with the arguments of HXD_TEST_ARGS (a JSON array of
// strings, without the program name), or its command line when that is
// unset, instead of the tests. With HXD_TEST_NOFILE=n the child first
// lowers its open-file limit to n.
const (
	envRunMain = "HXD_TEST_RUN_MAIN"
	envArgs    = "HXD_TEST_ARGS"
	envNoFile  = "HXD_TEST_NOFILE"
)

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		runMainForTest()
		return
	}
	// The mcp-demo agent of --demo runs its server as os.Executable() (this
	// test binary) with mcp-demo-server, in a child environment holding
	// only PATH and HOME.
	if len(os.Args) == 2 && os.Args[1] == mcpDemoServerCmd {
		os.Args = []string{"hxd", mcpDemoServerCmd}
		main()
		os.Exit(0)
	}
	hxtest.WrapTestMain(m)
}

// runMainForTest runs hxd's main() as the child of a crash test and exits.
// Without HXD_TEST_ARGS in the environment the arguments are the process's
// own: the README test's bin/hxd execs this binary with hxd's arguments.
func runMainForTest() {
	args := os.Args[1:]
	if raw, ok := os.LookupEnv(envArgs); ok {
		args = nil
		if raw != "" {
			if err := json.Unmarshal([]byte(raw), &args); err != nil {
				fmt.Fprintf(os.Stderr, "hxd test child: %s is not a JSON array of strings: %v\n", envArgs, err)
				os.Exit(3)
			}
		}
	}
	if raw := os.Getenv(envNoFile); raw != "" {
		n, err := strconv.ParseUint(raw, 10, 64)
		if err == nil {
			err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n})
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "hxd test child: %s=%s: %v\n", envNoFile, raw, err)
			os.Exit(3)
		}
	}
	os.Args = append([]string{"hxd"}, args...)
	main() // exits non-zero itself on error (42 from HXD_CRASH_AFTER)
	os.Exit(0)
}
