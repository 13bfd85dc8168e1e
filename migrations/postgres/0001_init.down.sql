-- Drops everything 0001_init.up.sql created (the triggers go with their
-- tables). Destroys all data. Leaves the schema itself, golang-migrate's
-- schema_migrations and hxd's schema_checksums alone.
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
DROP FUNCTION IF EXISTS hxd_append_only();
