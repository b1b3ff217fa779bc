"""Tests that speak MCP to mcphost over its transports (in-memory, stdio, HTTP) and eras."""
