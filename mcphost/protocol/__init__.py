"""The pure wire layer: JSON-RPC framing, error codes, protocol revisions.

Nothing in here knows about Quart, Hypercorn, stdio or plugins.
"""
