-- Issue 22: every event carries created_at, the time the store appended
-- it (formatted as runs.created_at). Events stored before this version
-- get their run's created_at: the only time known for them. events is
-- append-only, so the update runs with its guard lifted and put back.
--
-- Never edit this file once released: hxd checks its SHA-256 at start-up.
ALTER TABLE events ADD COLUMN created_at TEXT NOT NULL DEFAULT '';

DROP TRIGGER events_no_update;

UPDATE events SET created_at = (SELECT r.created_at FROM runs r WHERE r.id = events.run_id);

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;
