-- Issue 23: retention. gc deletes a finished session with its runs,
-- steps, events, journal, snapshot, approvals and tool rows in one
-- transaction, and leaves a tombstone per deleted session and run so that
-- neither its id nor a request id of it is ever answered again with the
-- old result.
--
-- The append-only guards of journal, events, ids and artifacts stay in
-- force for everything but gc: a row may be deleted only while its run is
-- listed in gc_deleting, which gc fills and empties inside its own
-- transaction (the table is empty whenever no transaction is open). An
-- artifact may be deleted only by the artifact sweep (run_seq 0 listed)
-- and never while a session references it.
--
-- Never edit this file once released: hxd checks its SHA-256 at start-up.
CREATE TABLE tombstones (
    kind       TEXT NOT NULL CHECK (kind IN ('session', 'run')),
    id         TEXT NOT NULL,
    session_id TEXT NOT NULL,
    principal  TEXT NOT NULL,
    request_id TEXT NOT NULL DEFAULT '',              -- runs only
    deleted_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    PRIMARY KEY (kind, id)
) WITHOUT ROWID;

CREATE INDEX tombstones_request ON tombstones (session_id, request_id);

CREATE INDEX tombstones_expiry ON tombstones (expires_at);

CREATE TABLE gc_deleting (
    run_seq INTEGER PRIMARY KEY,                      -- runs.seq; 0 for the artifact sweep
    run_id  TEXT    NOT NULL UNIQUE
);

CREATE INDEX runs_finished ON runs (updated_at) WHERE status IN ('completed', 'cancelled');

DROP TRIGGER journal_no_delete;

CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
WHEN NOT EXISTS (SELECT 1 FROM gc_deleting WHERE run_id = OLD.run_id)
BEGIN
    SELECT RAISE(ABORT, 'journal is append-only');
END;

DROP TRIGGER events_no_delete;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM gc_deleting WHERE run_id = OLD.run_id)
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

DROP TRIGGER ids_no_delete;

CREATE TRIGGER ids_no_delete BEFORE DELETE ON ids
WHEN NOT EXISTS (SELECT 1 FROM gc_deleting WHERE run_seq = (OLD.k >> 32))
BEGIN
    SELECT RAISE(ABORT, 'ids are append-only');
END;

DROP TRIGGER artifacts_no_delete;

CREATE TRIGGER artifacts_no_delete BEFORE DELETE ON artifacts
WHEN NOT EXISTS (SELECT 1 FROM gc_deleting WHERE run_seq = 0)
  OR EXISTS (SELECT 1 FROM artifact_refs WHERE sha256 = OLD.id)
BEGIN
    SELECT RAISE(ABORT, 'artifacts are append-only while referenced');
END;
