// Package s3test starts a real S3-compatible server (the pinned versitygw
// of scripts/build-versitygw.sh, posix backend) for tests. It is separate
// from hxtest so that only the tests that need an S3 client link one.
// Import it only from _test.go files; it imports nothing of hxd but hxtest.
package s3test
