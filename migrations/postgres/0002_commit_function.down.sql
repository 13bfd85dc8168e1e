-- Drops what 0002_commit_function.up.sql created.
DROP FUNCTION IF EXISTS hxd_commit;
