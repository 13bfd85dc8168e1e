ALTER TABLE runs DROP COLUMN trace_context;
