// Package hxtest holds test-only helpers: goleak-wrapped TestMain, slog
// routed to t.Log and a fake OpenID provider (Issuer) minting signed
// tokens. Import it only from _test.go files; it imports nothing of hxd.
package hxtest
