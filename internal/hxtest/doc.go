// Package hxtest holds test-only helpers: goleak-wrapped TestMain and slog
// routed to t.Log. Import it only from _test.go files; it imports nothing
// of hxd.
package hxtest
