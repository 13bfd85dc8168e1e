package storekit

import (
	"fmt"
	"maps"
	"slices"

	"hxd/internal/runtime/rtstore"
)

// SchemaState is what a database says about its hxd schema.
type SchemaState struct {
	Versioned bool            // golang-migrate recorded a version
	Version   uint            // the applied version when Versioned
	Dirty     bool            // a migration failed part-way
	Sums      map[uint]string // schema_checksums rows by version
}

// Migrations is what a binary knows of its migrations: the SHA-256 of each
// up file by version (migrations.Checksums) and the highest version.
type Migrations struct {
	Sums map[uint]string
	Head uint
}

// NewMigrations returns the Migrations of sums.
func NewMigrations(sums map[uint]string) Migrations {
	m := Migrations{Sums: sums}
	for v := range sums {
		m.Head = max(m.Head, v)
	}
	return m
}

// SchemaTarget says, for CheckSchema's messages, what is checked and how
// its store repairs what only it knows about.
type SchemaTarget struct {
	// Name names what holds the schema in messages: "database /x/hxd.db",
	// `schema "hxd"`.
	Name string
	// VersionNoun is what Name has a number of: "schema version" for a
	// database, "version" for a schema.
	VersionNoun string
	// Files is the folder of the migration files, for the advice on a
	// changed one: "migrations/sqlite".
	Files string
	// Missing is what a target without a version lacks: "no schema",
	// "no hxd tables".
	Missing string
	// Dirty returns the error for a schema left dirty at version: what
	// happened and how to repair it differ by database. Required.
	Dirty func(version uint) error
	// Unversioned, when set, is asked about a schema without a version
	// before anything is migrated (say, tables hxd did not create); a
	// non-nil error is returned as it is.
	Unversioned func() error
}

// SchemaErr wraps rtstore.ErrSchema with what is wrong and what to do.
func SchemaErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", rtstore.ErrSchema, fmt.Sprintf(format, args...))
}

// CheckSchema compares st with m. With allowPending, a missing or old
// schema and missing checksums of applied versions are acceptable (the
// caller migrates and records them); everything else returns an error
// wrapping rtstore.ErrSchema that says what is wrong and what to do: a
// dirty schema, a version newer than m or not in it, a checksum of a
// version m lacks or of a file that changed, and, without allowPending, no
// schema, an old one or an applied version without its checksum.
func CheckSchema(st SchemaState, m Migrations, allowPending bool, t SchemaTarget) error {
	if st.Dirty {
		return t.Dirty(st.Version)
	}
	if st.Versioned && st.Version > m.Head {
		return SchemaErr("%s has %s %d but this hxd knows versions up to %d: "+
			"run the hxd release that migrated it (or a newer one)", t.Name, t.VersionNoun, st.Version, m.Head)
	}
	if st.Versioned {
		if _, ok := m.Sums[st.Version]; !ok {
			return SchemaErr("%s has %s %d, which is not a migration of this hxd: "+
				"run the hxd release that migrated it", t.Name, t.VersionNoun, st.Version)
		}
	}
	for _, v := range slices.Sorted(maps.Keys(st.Sums)) {
		want, ok := m.Sums[v]
		if !ok {
			return SchemaErr("%s records a checksum for migration %d, which this hxd does not have: "+
				"run the hxd release that migrated it", t.Name, v)
		}
		if st.Sums[v] != want {
			return SchemaErr("migration %d changed after it was applied to %s (recorded sha256 %s, this binary has %s): "+
				"run the hxd release that applied it or restore the original %s file; "+
				"never edit an applied migration, add a new one", v, t.Name, st.Sums[v], want, t.Files)
		}
	}
	if !st.Versioned && t.Unversioned != nil {
		if err := t.Unversioned(); err != nil {
			return err
		}
	}
	if allowPending {
		return nil
	}
	if !st.Versioned {
		return SchemaErr("%s has %s: run `hxd migrate` or start with --auto-migrate", t.Name, t.Missing)
	}
	if st.Version < m.Head {
		return SchemaErr("%s has %s %d, this hxd needs %d: run `hxd migrate` or start with --auto-migrate",
			t.Name, t.VersionNoun, st.Version, m.Head)
	}
	for _, v := range slices.Sorted(maps.Keys(m.Sums)) {
		if _, ok := st.Sums[v]; !ok && v <= st.Version {
			return SchemaErr("no checksum recorded for applied migration %d in %s: run `hxd migrate` to record it",
				v, t.Name)
		}
	}
	return nil
}
