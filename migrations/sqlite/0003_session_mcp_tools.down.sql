ALTER TABLE sessions DROP COLUMN mcp_tools;
