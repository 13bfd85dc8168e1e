-- hxd schema v1 (SQLite). Logical tables of REFERENCE §4.7.
-- JSON columns are TEXT; timestamps are UTC text
-- "YYYY-MM-DDTHH:MM:SS.ffffffZ" (fixed width, sorts as time).
-- No BEGIN/COMMIT: golang-migrate wraps this file in a transaction.
-- Never edit this file once released: hxd checks its SHA-256 at start-up.

CREATE TABLE sessions (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,  -- list order
    id            TEXT    NOT NULL UNIQUE,
    principal     TEXT    NOT NULL,
    agent_name    TEXT    NOT NULL DEFAULT '',
    agent_version TEXT    NOT NULL DEFAULT '',
    agent_config  TEXT    NOT NULL DEFAULT 'null',    -- JSON
    recording     INTEGER NOT NULL DEFAULT 0 CHECK (recording IN (0, 1)),
    metadata      TEXT    NOT NULL DEFAULT '{}',      -- JSON object
    control       TEXT    NOT NULL DEFAULT '',        -- '' | paused | cancelled
    created_at    TEXT    NOT NULL,
    last_run_id   TEXT                                -- latest run, NULL when none
);

CREATE INDEX sessions_principal ON sessions (principal, seq);

CREATE TABLE runs (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT, -- list order
    id             TEXT NOT NULL UNIQUE,
    session_id     TEXT NOT NULL REFERENCES sessions (id),
    request_id     TEXT NOT NULL,
    message_digest TEXT NOT NULL,
    status         TEXT NOT NULL,
    phase          TEXT NOT NULL,
    payload        TEXT NOT NULL,                     -- JSON run state
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    UNIQUE (session_id, request_id)
);

CREATE INDEX runs_session ON runs (session_id, seq);

CREATE INDEX runs_status ON runs (status, seq);

CREATE TABLE steps (
    run_id  TEXT NOT NULL REFERENCES runs (id),
    id      TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;

CREATE TABLE approvals (
    run_id  TEXT NOT NULL REFERENCES runs (id),
    id      TEXT NOT NULL,                            -- execution key
    payload TEXT NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;

CREATE TABLE tool_outcomes (
    run_id  TEXT NOT NULL REFERENCES runs (id),
    id      TEXT NOT NULL,                            -- execution key
    payload TEXT NOT NULL,
    PRIMARY KEY (run_id, id)
) WITHOUT ROWID;

-- events and journal are rowid tables keyed by k = (runs.seq << 32) + seq:
-- a run's rows are contiguous and in seq order, an append writes at the end
-- of the run's range, and interior pages hold only integers (a WITHOUT
-- ROWID table keeps whole rows, payload included, in its interior pages,
-- which multiplies the pages a commit writes). k makes (run_id, seq) unique.
-- Their ids are unique through the shared table ids (below).
CREATE TABLE events (
    k        INTEGER PRIMARY KEY,                     -- (runs.seq << 32) + seq
    run_id   TEXT    NOT NULL REFERENCES runs (id),
    seq      INTEGER NOT NULL CHECK (seq BETWEEN 1 AND 4294967295), -- the event cursor
    event_id TEXT    NOT NULL,                        -- unique: ids (tag 1)
    payload  TEXT    NOT NULL,                        -- JSON RunEvent with cursor
    CHECK ((k & 4294967295) = seq)
);

CREATE TABLE snapshots (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id),
    payload    TEXT NOT NULL                          -- latest run state of the session
);

CREATE TABLE artifacts (
    id      TEXT PRIMARY KEY CHECK (length(id) = 64), -- lowercase hex SHA-256
    content BLOB NOT NULL
);

CREATE TABLE artifact_refs (
    sha256     TEXT NOT NULL REFERENCES artifacts (id),
    session_id TEXT NOT NULL REFERENCES sessions (id),
    PRIMARY KEY (sha256, session_id)
) WITHOUT ROWID;

CREATE TABLE journal (
    k       INTEGER PRIMARY KEY,                      -- (runs.seq << 32) + seq
    run_id  TEXT    NOT NULL REFERENCES runs (id),
    seq     INTEGER NOT NULL CHECK (seq BETWEEN 1 AND 4294967295), -- per run, contiguous from 1
    id      TEXT    NOT NULL,                         -- unique: ids (tag 0)
    payload TEXT    NOT NULL,                         -- the whole record JSON (11 fields)
    CHECK ((k & 4294967295) = seq)
);

-- ids makes journal record ids (tag 0) and event ids (tag 1) unique and
-- finds their rows. One index for both: a commit's new ids (time-ordered
-- UUIDv7 from the runtime) land on one right-edge page instead of one per
-- table. The store inserts a journal or events row's ids row in the same
-- transaction, with one multi-row INSERT per commit (an AFTER INSERT
-- trigger per row costs more than the row); a known id fails that INSERT
-- with a PRIMARY KEY violation and the transaction rolls back.
CREATE TABLE ids (
    id  TEXT    NOT NULL,
    tag INTEGER NOT NULL CHECK (tag IN (0, 1)),       -- 0 journal, 1 events
    k   INTEGER NOT NULL,                             -- the row's k
    PRIMARY KEY (id, tag)
) WITHOUT ROWID;

-- The flight recorder, the event stream and artifacts are append-only.
CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
BEGIN
    SELECT RAISE(ABORT, 'journal is append-only');
END;

CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
BEGIN
    SELECT RAISE(ABORT, 'journal is append-only');
END;

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

CREATE TRIGGER ids_no_update BEFORE UPDATE ON ids
BEGIN
    SELECT RAISE(ABORT, 'ids are append-only');
END;

CREATE TRIGGER ids_no_delete BEFORE DELETE ON ids
BEGIN
    SELECT RAISE(ABORT, 'ids are append-only');
END;

CREATE TRIGGER artifacts_no_update BEFORE UPDATE ON artifacts
BEGIN
    SELECT RAISE(ABORT, 'artifacts are append-only');
END;

CREATE TRIGGER artifacts_no_delete BEFORE DELETE ON artifacts
BEGIN
    SELECT RAISE(ABORT, 'artifacts are append-only');
END;
