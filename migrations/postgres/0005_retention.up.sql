-- Issue 23: retention. gc deletes a finished session with its runs,
-- steps, events, journal, snapshot, approvals and tool rows in one
-- transaction, and leaves a tombstone per deleted session and run so that
-- neither its id nor a request id of it is ever answered again with the
-- old result.
--
-- The append-only guards of journal, events and artifacts stay in force
-- for everything but gc: a DELETE passes only in a transaction that set
-- hxd.gc to 'on' (set_config(..., true): transaction-local), and an
-- artifact never while a session references it (its FOREIGN KEY from
-- artifact_refs refuses that too). UPDATE and TRUNCATE stay forbidden.
--
-- Never edit this file once released: hxd checks its SHA-256 at start-up.
CREATE TABLE tombstones (
    kind       text        NOT NULL CHECK (kind IN ('session', 'run')),
    id         text        NOT NULL,
    session_id text        NOT NULL,
    principal  text        NOT NULL,
    request_id text        NOT NULL DEFAULT '',               -- runs only
    deleted_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (kind, id)
);

CREATE INDEX tombstones_request ON tombstones (session_id, request_id);

CREATE INDEX tombstones_expiry ON tombstones (expires_at);

CREATE INDEX runs_finished ON runs (updated_at) WHERE status IN ('completed', 'cancelled');

CREATE FUNCTION hxd_append_only_unless_gc() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('hxd.gc', true) = 'on' THEN
        IF TG_TABLE_NAME = 'artifacts' THEN
            -- A nested IF: OLD.id exists only for artifacts.
            IF EXISTS (SELECT 1 FROM artifact_refs WHERE sha256 = OLD.id) THEN
                RAISE EXCEPTION 'artifact is referenced' USING ERRCODE = 'restrict_violation';
            END IF;
        END IF;
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'restrict_violation';
END
$$;

DROP TRIGGER journal_append_only ON journal;

CREATE TRIGGER journal_append_only BEFORE UPDATE OR DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION hxd_append_only_unless_gc('journal is append-only');

DROP TRIGGER events_append_only ON events;

CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION hxd_append_only_unless_gc('events are append-only');

DROP TRIGGER artifacts_append_only ON artifacts;

CREATE TRIGGER artifacts_append_only BEFORE UPDATE OR DELETE ON artifacts
    FOR EACH ROW EXECUTE FUNCTION hxd_append_only_unless_gc('artifacts are append-only');
