package agent

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/model"
)

// def returns a valid definition name@version.
func def(name, version string) *Definition {
	return &Definition{Name: name, Version: version, Model: model.Config{Provider: model.ProviderOpenAI, Model: "m"}}
}

func TestRegistry(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		reg *Registry
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{reg: NewRegistry()}
	}

	t.Run("register and get", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.reg.Register(def("a", "v1")))
		d, err := b.reg.Get(Ref{Name: "a", Version: "v1"})
		require.NoError(t, err)
		require.Equal(t, DefaultMaxIterations, d.MaxIterations, "stored with defaults")
	})

	t.Run("duplicate", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.reg.Register(def("a", "v1")))
		require.NoError(t, b.reg.Register(def("a", "v2")))
		err := b.reg.Register(def("a", "v1"))
		require.ErrorIs(t, err, ErrDuplicateAgent)
		require.EqualError(t, err, "agent already registered: a@v1")
	})

	t.Run("unknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.reg.Get(Ref{Name: "nope", Version: "v1"})
		require.ErrorIs(t, err, ErrUnknownAgent)
		require.EqualError(t, err, "unknown agent: nope@v1")
	})

	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.ErrorIs(t, b.reg.Register(def("a", "")), ErrInvalidDefinition)
		require.ErrorIs(t, b.reg.Register(nil), ErrInvalidDefinition)
		require.Empty(t, b.reg.List())
	})

	t.Run("list sorted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, r := range []Ref{{"b", "v1"}, {"a", "v2"}, {"a", "v1"}, {"c", "v0"}} {
			require.NoError(t, b.reg.Register(def(r.Name, r.Version)))
		}
		var got []string
		for _, d := range b.reg.List() {
			got = append(got, d.Ref().String())
		}
		require.Equal(t, []string{"a@v1", "a@v2", "b@v1", "c@v0"}, got)
	})

	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				_ = b.reg.Register(def(fmt.Sprintf("a%d", i%10), "v1"))
				_ = b.reg.List()
				_, _ = b.reg.Get(Ref{Name: "a0", Version: "v1"})
			})
		}
		wg.Wait()
		require.Len(t, b.reg.List(), 10)
	})
}
