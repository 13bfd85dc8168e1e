-- Issue 24: a run keeps the W3C traceparent of the OpenTelemetry span of
-- its latest attempt (invoke_agent), so that a run resumed after a crash,
-- whose first span was never exported, links its new span to it. NULL:
-- none (tracing was off, or the run predates this version). Adding a
-- nullable column without a default rewrites nothing.
--
-- Never edit this file once released: hxd checks its SHA-256 at start-up.
ALTER TABLE runs ADD COLUMN trace_context text;
