package hxbundle

import (
	"fmt"
	"os"
	"testing"

	"hxd/internal/hxtest"
)

func TestMain(m *testing.M) {
	// The benchmark bundles (~60 MiB each) live in one temporary folder
	// per process; remove it when the tests end.
	hxtest.WrapTestMain(m, func() {
		if dir, err := benchDir(); err == nil {
			if err := os.RemoveAll(dir); err != nil {
				fmt.Fprintln(os.Stderr, "remove the benchmark bundles:", err)
			}
		}
	})
}
