"""MCP semantics, independent of any transport: the one entry, dispatch, method handlers, the request scope.

Transports hand every message to :meth:`Kernel.serve` with an exchange (connection facts and a way
to answer, see :mod:`mcphost.kernel.services`): the kernel rules on the era once, runs a 2026-07-28
request's whole lifecycle itself, and sends session-era messages back through the transport's
session to :meth:`Kernel.receive`. Replies come back as messages, and anything else the server
says (progress, logs, server-to-client requests) goes out through ``session.outlet``. The kernel
never imports Quart, Hypercorn or stdio code, and never names the host: it is given
:class:`~mcphost.kernel.services.Services`.
"""

from mcphost.kernel.dispatcher import Kernel
from mcphost.request import RequestInfo

__all__ = ["Kernel", "RequestInfo"]
