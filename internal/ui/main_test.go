package ui

import (
	"testing"

	"hxd/internal/hxtest"
)

func TestMain(m *testing.M) { hxtest.WrapTestMain(m) }
