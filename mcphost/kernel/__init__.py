"""MCP semantics, independent of any transport: dispatch, method handlers, the request scope.

The kernel takes a decoded message and a :class:`~mcphost.sessions.session.Session`; replies
come back as messages, and anything else the server says (progress, logs, server-to-client
requests) goes out through ``session.outlet``. It never imports Quart, Hypercorn or stdio code.
"""

from mcphost.kernel.dispatcher import Kernel, RequestInfo

__all__ = ["Kernel", "RequestInfo"]
