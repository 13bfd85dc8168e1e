-- hxd schema v1 (PostgreSQL). The logical tables of REFERENCE §4.7, the same
-- as migrations/sqlite/0001_init.up.sql, plus the session lease columns.
--
-- Names are unqualified: hxd runs this file with search_path set to the
-- configured schema alone, so every object lands in that schema whatever its
-- name (quotes, spaces and all). The file creates no schema, role or database.
--
-- JSON columns are json, not jsonb: json keeps the exact text hxd wrote (key
-- order, number literals such as 300.0 or 1e2, escapes such as \u0000, which
-- jsonb rejects), so journal records and events read back byte for byte and
-- their canonical export and idempotent re-send comparison behave as on
-- SQLite; the server still checks that the text is JSON.
--
-- No BEGIN/COMMIT: golang-migrate sends the file as one multi-statement
-- query, which PostgreSQL runs as a single transaction.
-- Never edit this file once released: hxd checks its SHA-256 at start-up.

CREATE TABLE sessions (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- list order
    id            text        NOT NULL UNIQUE,
    principal     text        NOT NULL,
    agent_name    text        NOT NULL DEFAULT '',
    agent_version text        NOT NULL DEFAULT '',
    agent_config  json        NOT NULL DEFAULT 'null',
    recording     boolean     NOT NULL DEFAULT false,
    metadata      json        NOT NULL DEFAULT '{}',               -- JSON object
    control       text        NOT NULL DEFAULT ''
                  CHECK (control IN ('', 'paused', 'cancelled')),
    created_at    timestamptz NOT NULL,
    last_run_id   text,                                            -- latest run, NULL when none
    -- Lease (REFERENCE §4.6): owner token, fencing generation and expiry on
    -- the database clock. No owner means no expiry.
    owner         text,
    generation    bigint      NOT NULL DEFAULT 0,
    lease_until   timestamptz,
    CHECK ((owner IS NULL) = (lease_until IS NULL))
);

CREATE INDEX sessions_principal ON sessions (principal, seq);

CREATE TABLE runs (
    seq            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- list order
    id             text        NOT NULL UNIQUE,
    session_id     text        NOT NULL REFERENCES sessions (id),
    request_id     text        NOT NULL,
    message_digest text        NOT NULL,
    status         text        NOT NULL,
    phase          text        NOT NULL,
    payload        json        NOT NULL,                           -- run state
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    UNIQUE (session_id, request_id)
);

CREATE INDEX runs_session ON runs (session_id, seq);

CREATE INDEX runs_status ON runs (status, seq);

CREATE TABLE steps (
    run_id  text NOT NULL REFERENCES runs (id),
    id      text NOT NULL,
    payload json NOT NULL,
    PRIMARY KEY (run_id, id)
);

CREATE TABLE approvals (
    run_id  text NOT NULL REFERENCES runs (id),
    id      text NOT NULL,                                         -- execution key
    payload json NOT NULL,
    PRIMARY KEY (run_id, id)
);

CREATE TABLE tool_outcomes (
    run_id  text NOT NULL REFERENCES runs (id),
    id      text NOT NULL,                                         -- execution key
    payload json NOT NULL,
    PRIMARY KEY (run_id, id)
);

-- journal and events carry no FOREIGN KEY to runs on purpose: they are the
-- rows every boundary appends (some 7 of its 9), and the per-row RI check
-- (an index probe and a row lock on runs through SPI, about 9 us a row by
-- EXPLAIN ANALYZE) was about a third of their insert cost. Their run is guaranteed all the same: rows are
-- only ever inserted by hxd's committer, in the transaction that updates
-- that very run row under the session lease (fence) and fails unless the
-- update found it, and runs are never deleted (no DELETE path; the
-- append-only triggers below forbid removing these rows).
CREATE TABLE events (
    run_id   text   NOT NULL,                                      -- runs.id (no FK, see above)
    seq      bigint NOT NULL,                                      -- the event cursor
    event_id text   NOT NULL UNIQUE,
    payload  json   NOT NULL,                                      -- RunEvent with cursor
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE snapshots (
    session_id text PRIMARY KEY REFERENCES sessions (id),
    payload    json NOT NULL                                       -- latest run state of the session
);

CREATE TABLE artifacts (
    id      text  PRIMARY KEY CHECK (length(id) = 64),             -- lowercase hex SHA-256
    content bytea NOT NULL
);

CREATE TABLE artifact_refs (
    sha256     text NOT NULL REFERENCES artifacts (id),
    session_id text NOT NULL REFERENCES sessions (id),
    PRIMARY KEY (sha256, session_id)
);

CREATE TABLE journal (
    run_id  text   NOT NULL,                                       -- runs.id (no FK, see events)
    seq     bigint NOT NULL,                                       -- per run, contiguous from 1
    id      text   NOT NULL UNIQUE,
    payload json   NOT NULL,                                       -- the whole record (11 fields)
    PRIMARY KEY (run_id, seq)
);

-- The flight recorder, the event stream and artifacts are append-only:
-- UPDATE, DELETE and TRUNCATE fail with the message passed to the trigger.
CREATE FUNCTION hxd_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER journal_append_only BEFORE UPDATE OR DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION hxd_append_only('journal is append-only');

CREATE TRIGGER journal_no_truncate BEFORE TRUNCATE ON journal
    FOR EACH STATEMENT EXECUTE FUNCTION hxd_append_only('journal is append-only');

CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION hxd_append_only('events are append-only');

CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION hxd_append_only('events are append-only');

CREATE TRIGGER artifacts_append_only BEFORE UPDATE OR DELETE ON artifacts
    FOR EACH ROW EXECUTE FUNCTION hxd_append_only('artifacts are append-only');

CREATE TRIGGER artifacts_no_truncate BEFORE TRUNCATE ON artifacts
    FOR EACH STATEMENT EXECUTE FUNCTION hxd_append_only('artifacts are append-only');

COMMENT ON COLUMN journal.run_id IS
    'runs.id; no foreign key: only inserted by the committer in the transaction that updates the run under its lease';
COMMENT ON COLUMN events.run_id IS
    'runs.id; no foreign key: only inserted by the committer in the transaction that updates the run under its lease';
