package sqlite_test

import (
	"os"
	"testing"

	"hxd/internal/hxtest"
)

// childMains are the roles the test binary plays, instead of running the
// tests, when started again by a test with the role's environment variable
// set (to the argument the role gets).
var childMains = map[string]func(arg string){}

func TestMain(m *testing.M) {
	for env, run := range childMains {
		if arg := os.Getenv(env); arg != "" {
			run(arg)
			os.Exit(0)
		}
	}
	hxtest.WrapTestMain(m)
}
