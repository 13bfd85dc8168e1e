package storekit_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
)

func TestNewMigrations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sums map[uint]string
		head uint
	}{
		{"none", nil, 0},
		{"one", map[uint]string{1: "a"}, 1},
		{"several", map[uint]string{3: "c", 1: "a", 2: "b"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := storekit.NewMigrations(tt.sums)
			require.Equal(t, tt.head, m.Head)
			require.Equal(t, tt.sums, m.Sums)
		})
	}
}

func TestCheckSchema(t *testing.T) {
	t.Parallel()
	errDirty := errors.New("dirty")
	errForeign := errors.New("foreign tables")
	m := storekit.NewMigrations(map[uint]string{1: "a", 2: "b"})
	target := storekit.SchemaTarget{
		Name:        "database /x.db",
		VersionNoun: "schema version",
		Files:       "migrations/test",
		Missing:     "no schema",
		Dirty:       func(uint) error { return errDirty },
	}
	foreign := target
	foreign.Unversioned = func() error { return errForeign }
	clean := target
	clean.Unversioned = func() error { return nil }
	state := func(versioned bool, v uint, sums map[uint]string) storekit.SchemaState {
		return storekit.SchemaState{Versioned: versioned, Version: v, Sums: sums}
	}
	current := map[uint]string{1: "a", 2: "b"}
	tests := []struct {
		name    string
		st      storekit.SchemaState
		target  storekit.SchemaTarget
		pending bool
		want    string // "" for no error; else a part of the message
		is      error  // the error wrapped besides ErrSchema, if any
	}{
		{"current", state(true, 2, current), target, false, "", nil},
		{"current, pending allowed", state(true, 2, current), target, true, "", nil},
		{"dirty", storekit.SchemaState{Versioned: true, Version: 2, Dirty: true, Sums: current}, target, true, "dirty", errDirty},
		{"newer", state(true, 3, current), target, true, "database /x.db has schema version 3 but this hxd knows versions up to 2", nil},
		{"unknown version", state(true, 0, map[uint]string{}), target, true, "has schema version 0, which is not a migration of this hxd", nil},
		{"checksum of an unknown migration", state(true, 2, map[uint]string{1: "a", 2: "b", 7: "g"}), target, true,
			"database /x.db records a checksum for migration 7, which this hxd does not have", nil},
		{"changed file", state(true, 2, map[uint]string{1: "a", 2: "B"}), target, true,
			"migration 2 changed after it was applied to database /x.db (recorded sha256 B, this binary has b): " +
				"run the hxd release that applied it or restore the original migrations/test file", nil},
		{"no schema, pending allowed", state(false, 0, map[uint]string{}), target, true, "", nil},
		{"no schema", state(false, 0, map[uint]string{}), target, false, "database /x.db has no schema: run `hxd migrate`", nil},
		{"foreign tables", state(false, 0, map[uint]string{}), foreign, true, "foreign tables", errForeign},
		{"foreign check passes", state(false, 0, map[uint]string{}), clean, true, "", nil},
		{"versioned skips the foreign check", state(true, 2, current), foreign, false, "", nil},
		{"old, pending allowed", state(true, 1, map[uint]string{1: "a"}), target, true, "", nil},
		{"old", state(true, 1, map[uint]string{1: "a"}), target, false, "database /x.db has schema version 1, this hxd needs 2", nil},
		{"checksum missing, pending allowed", state(true, 2, map[uint]string{1: "a"}), target, true, "", nil},
		{"checksum missing", state(true, 2, map[uint]string{2: "b"}), target, false,
			"no checksum recorded for applied migration 1 in database /x.db: run `hxd migrate` to record it", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := storekit.CheckSchema(tt.st, m, tt.pending, tt.target)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
				return
			}
			require.ErrorIs(t, err, rtstore.ErrSchema)
		})
	}
}
