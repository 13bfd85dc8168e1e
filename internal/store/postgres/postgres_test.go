package postgres_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/runtime/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) rtstore.Store {
		return openStore(t, testConfig(t))
	})
}

// TestGenericPlans: hxd's connections use generic plans unless the
// database URL chooses a plan_cache_mode.
func TestGenericPlans(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	st := openStore(t, cfg)
	pool, lease, err := st.Setting(testCtx(t), "plan_cache_mode")
	require.NoError(t, err)
	require.Equal(t, []string{"force_generic_plan", "force_generic_plan"}, []string{pool, lease})

	sep := "?"
	if strings.Contains(cfg.URL, "?") {
		sep = "&"
	}
	cfg.URL += sep + "plan_cache_mode=auto"
	st = openStore(t, cfg)
	pool, lease, err = st.Setting(testCtx(t), "plan_cache_mode")
	require.NoError(t, err)
	require.Equal(t, []string{"auto", "auto"}, []string{pool, lease})
}
