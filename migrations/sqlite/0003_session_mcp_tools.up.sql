-- Issue 21: the MCP tools pinned at session creation (a JSON array of
-- mcp.PinnedTool; [] for a session without MCP servers).
ALTER TABLE sessions ADD COLUMN mcp_tools TEXT NOT NULL DEFAULT '[]';
