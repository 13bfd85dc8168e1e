DROP TRIGGER artifacts_no_delete;

CREATE TRIGGER artifacts_no_delete BEFORE DELETE ON artifacts
BEGIN
    SELECT RAISE(ABORT, 'artifacts are append-only');
END;

DROP TRIGGER ids_no_delete;

CREATE TRIGGER ids_no_delete BEFORE DELETE ON ids
BEGIN
    SELECT RAISE(ABORT, 'ids are append-only');
END;

DROP TRIGGER events_no_delete;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

DROP TRIGGER journal_no_delete;

CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
BEGIN
    SELECT RAISE(ABORT, 'journal is append-only');
END;

DROP INDEX runs_finished;

DROP TABLE gc_deleting;

DROP TABLE tombstones;
