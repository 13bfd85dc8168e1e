package sqlite_test

import (
	"os"
	"testing"

	"hxd/internal/hxtest"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envDescriptorsChild); dir != "" {
		os.Exit(descriptorsChild(dir))
	}
	hxtest.WrapTestMain(m)
}
