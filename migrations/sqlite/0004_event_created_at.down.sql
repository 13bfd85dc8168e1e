ALTER TABLE events DROP COLUMN created_at;
