"""Tests that drive mcphost with real outside clients.

The official Python and TypeScript SDK clients, and the MCP conformance suite.
"""
