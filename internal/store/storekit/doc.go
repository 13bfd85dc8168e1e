// Package storekit holds the store-neutral logic that store/sqlite and
// store/postgres share: the schema check against the embedded migrations
// and their checksums (CheckSchema), the per-run sequence cache of a lease
// (SeqCache), the public event cursor (FormatCursor), which errors a store
// passes through with their chain (IsOurs) and golang-migrate's logger
// (MigrateLogger).
//
// It knows no SQL dialect and no driver: each store reads its schema state
// with its own queries and hands it over.
//
// It may import runtime/rtstore, journal, migrations and the standard
// library only. It must not import a store, a driver, internal/http or the
// runtime root package; both stores may import it.
package storekit
