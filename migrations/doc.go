// Package migrations holds the SQL schema of every storage backend as
// golang-migrate files, embedded into the binary: one glob embed.FS per
// dialect, with the same NNNN_name.{up,down}.sql version numbers in each.
//
// Files are immutable once released: a store records the SHA-256 of every
// up-migration it applies (see Checksums) and refuses to open a database
// whose applied files changed. Fix a released migration with a new one.
//
// SQLite files must not contain BEGIN/COMMIT: golang-migrate's sqlite driver
// runs each file inside its own transaction. PostgreSQL files must not
// contain them either (golang-migrate sends a file as one multi-statement
// query, which PostgreSQL runs as one transaction), and must not qualify
// names with a schema: the store runs them with search_path set to its
// configured schema.
//
// This package imports nothing of hxd.
package migrations
