-- Drops everything 0001_init.up.sql created. Destroys all data.
DROP TRIGGER IF EXISTS artifacts_no_delete;
DROP TRIGGER IF EXISTS artifacts_no_update;
DROP TRIGGER IF EXISTS events_no_delete;
DROP TRIGGER IF EXISTS events_no_update;
DROP TRIGGER IF EXISTS journal_no_delete;
DROP TRIGGER IF EXISTS journal_no_update;
DROP TABLE IF EXISTS journal;
DROP TABLE IF EXISTS artifact_refs;
DROP TABLE IF EXISTS artifacts;
DROP TABLE IF EXISTS snapshots;
DROP TABLE IF EXISTS events;
DROP TABLE IF EXISTS tool_outcomes;
DROP TABLE IF EXISTS approvals;
DROP TABLE IF EXISTS steps;
DROP TABLE IF EXISTS runs;
DROP TABLE IF EXISTS sessions;
