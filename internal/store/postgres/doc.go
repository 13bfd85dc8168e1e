// Package postgres implements rtstore.Store on PostgreSQL with jackc/pgx/v5:
// the shared backend that lets several hxd processes serve one database.
//
// It owns the PostgreSQL side of storage:
//
//   - the connection pool (pgxpool) with search_path pinned to the
//     configured schema on every connection, so SQL names no schema and any
//     legal schema name (quotes, spaces, '?', '%') works except "$user"
//     and the reserved "pg_…" (refused by Open); values always
//     travel as bind parameters, into statements planned once
//     (plan_cache_mode=force_generic_plan unless the URL sets it);
//   - golang-migrate migrations from hxd/migrations (directory "postgres"),
//     serialised across processes by a session advisory lock, with hxd's own
//     SHA-256 record of every applied file (schema_checksums) and a
//     validate-only mode that changes nothing;
//   - session leases with fencing (REFERENCE §4.6): a claim bumps the
//     session's generation on the database clock, every write transaction
//     re-checks owner, generation and expiry while holding the session row
//     lock, so a superseded writer can never commit;
//   - liveness: a session-level advisory lock per Store on a connection of
//     its own, named by every owner token it writes, so that the sessions
//     of a process that died (PostgreSQL released its lock) are claimable
//     at once, the lease remaining the fallback for partitions; the lock
//     is checked every 250ms and re-taken when its connection breaks;
//   - boundary commits in one statement when the lease's cached seqs
//     allow: a call of hxd_commit (migration 0002), a PL/pgSQL function
//     sent on its own (an implicit transaction) that fences the sessions,
//     writes every row and reads the control flags, every check failing
//     it on the server (SQLSTATE HX001, or a unique violation of an
//     append); else, and after such a miss, in a transaction of two round
//     trips (reads first, pgx batches); with group commit: concurrent
//     Commits of different sessions share one call (or transaction) and
//     one WAL flush, each keeping its own outcome (BenchmarkGroupCommit
//     measures it against plain per-boundary transactions and
//     commit_delay);
//   - the session's control flag read by each leased commit and reused by
//     SessionControlGet for 250ms, sparing the runtime's per-step query;
//   - event wake-ups: after a commit that appended events, the run id is
//     NOTIFYed on a per-schema channel (outside the commit, which a NOTIFY
//     would serialise);
//   - the translation of driver errors into the rtstore sentinels (no pgx
//     type leaves the package; passwords never appear in an error or log).
//
// Hooks for the runtime beyond rtstore.Store: Lease.Renew (the heartbeat
// renews every LeaseDuration/3, on LeaseConns connections reserved for
// leases so that a busy pool never delays it), (*Store).LeaseDuration, (*Store).ExpiredRuns
// (the reaper's work list), (*Store).ProcessGone (wakes the reaper when
// another process dies), (*Store).ListenEvents (LISTEN/NOTIFY wake-ups for
// event streams; every commit that appends events notifies),
// (*Store).GroupCommitStats (metrics) and Migrate (the explicit
// `hxd migrate`).
//
// Besides the errors each method names, every method may return an error
// wrapping rtstore.ErrUnavailable when the database cannot be reached, is
// out of resources (disk full, too many connections: SQLSTATE class 53),
// shuts down or takes no writes, a serialization failure or deadlock
// persists after 3 attempts, or the Store is closed, and context errors.
//
// It may import rtstore, journal and migrations plus pgx and golang-migrate.
// It must not import internal/http, internal/store/sqlite, internal/temporal
// or the runtime root package.
package postgres
