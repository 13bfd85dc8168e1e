-- Issue 22: every event carries created_at, the time the store appended
-- it: the column's default, now() (the inserting transaction's start), so
-- every insert of events writes it, hxd_commit's (0002) and the careful
-- path's alike, without naming it. Events stored before this version get
-- their run's created_at: the only time known for them. events is
-- append-only, so the update runs with its guard lifted and put back.
--
-- Never edit this file once released: hxd checks its SHA-256 at start-up.
ALTER TABLE events ADD COLUMN created_at timestamptz;

ALTER TABLE events DISABLE TRIGGER events_append_only;

UPDATE events e SET created_at = r.created_at FROM runs r WHERE r.id = e.run_id;
UPDATE events SET created_at = now() WHERE created_at IS NULL;

ALTER TABLE events ENABLE TRIGGER events_append_only;

ALTER TABLE events ALTER COLUMN created_at SET DEFAULT now();
ALTER TABLE events ALTER COLUMN created_at SET NOT NULL;
