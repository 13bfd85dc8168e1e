package postgres_test

import (
	"testing"

	"hxd/internal/hxtest"
)

func TestMain(m *testing.M) {
	hxtest.WrapTestMain(m)
}
