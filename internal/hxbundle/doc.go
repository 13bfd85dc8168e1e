// Package hxbundle reads and writes flight-recorder bundles (.hx archives,
// format v1): streaming export with redaction and limits, verification
// with the reference's checks and messages, and playback.
//
// It works on io.Reader, io.ReaderAt and io.Writer values and journal
// records only: it never opens a store, never calls a model or a tool and
// never touches the network. It must import nothing of hxd but journal.
package hxbundle
