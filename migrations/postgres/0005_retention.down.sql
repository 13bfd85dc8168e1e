DROP TRIGGER artifacts_append_only ON artifacts;

CREATE TRIGGER artifacts_append_only BEFORE UPDATE OR DELETE ON artifacts
    FOR EACH ROW EXECUTE FUNCTION hxd_append_only('artifacts are append-only');

DROP TRIGGER events_append_only ON events;

CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION hxd_append_only('events are append-only');

DROP TRIGGER journal_append_only ON journal;

CREATE TRIGGER journal_append_only BEFORE UPDATE OR DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION hxd_append_only('journal is append-only');

DROP FUNCTION hxd_append_only_unless_gc();

DROP INDEX runs_finished;

DROP TABLE tombstones;
