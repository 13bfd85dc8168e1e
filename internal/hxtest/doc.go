// Package hxtest holds test-only helpers: goleak-wrapped TestMain, slog
// routed to t.Log, a fake OpenID provider (Issuer) minting signed tokens,
// the test Redis address (RedisAddr), a real Temporal dev server
// (StartTemporal, the pinned CLI of scripts/build-temporal.sh), a headless
// Chromium driven by chromedp (NewBrowser, SaveScreenshot) and
// DependencyMissing, which skips a test whose external peer is missing, or
// fails it under CI=true. Subpackage s3test starts a real S3-compatible
// server. Import it only from _test.go files; it imports nothing of hxd.
package hxtest
