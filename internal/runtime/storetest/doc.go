// Package storetest is the conformance suite every rtstore.Store passes:
// Exercise runs the same cases (sessions, runs, boundary commits, journal
// and event sequencing, idempotent re-sends, artifacts, session locks and
// fencing) against SQLite and PostgreSQL, so the backends cannot quietly
// diverge. Each case runs in parallel on a fresh store. CountingStore
// counts a store's boundary commits for the throughput benchmarks.
//
// It imports only rtstore, journal, runtime (for its session keys) and
// test libraries, never a store implementation. Import it only from _test.go files (depguard, deps_test).
package storetest
