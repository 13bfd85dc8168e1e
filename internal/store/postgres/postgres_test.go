package postgres_test

import (
	"testing"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/runtime/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) rtstore.Store {
		return openStore(t, testConfig(t))
	})
}
