"""The kernel as its method handlers see it: :class:`KernelView`.

Handlers cannot import :class:`mcphost.kernel.dispatcher.Kernel` (the dispatcher imports them),
so they name this Protocol instead; the Kernel satisfies it. It widens the scopes' view
(:class:`mcphost.kernel.services.ScopeKernel`) with what only handlers use: tasks, parked runs,
listen streams, the thread pool. A module of its own, so that the modules it names (tasks,
continuations) can name the scopes' view without an import cycle.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from mcphost.kernel.services import ScopeKernel

if TYPE_CHECKING:
    from mcphost.budgets import FairPool
    from mcphost.catalog import Catalog
    from mcphost.kernel.continuation import Continuations
    from mcphost.kernel.listen import Listener
    from mcphost.kernel.tasks import TaskManager
    from mcphost.kernel.views import Views
    from mcphost.request import RequestInfo
    from mcphost.sessions.session import Session


class KernelView(ScopeKernel, Protocol):
    """The kernel as its handlers (and the search endpoint's tools) use it."""

    tasks: TaskManager
    continuations: Continuations
    listeners: set[Listener]
    closing: asyncio.Event
    catalog: Catalog
    views: Views

    @property
    def sync_pool(self) -> FairPool: ...

    def server_info(self, session: Session) -> dict[str, Any]: ...

    async def redispatch(self, request: RequestInfo) -> dict[str, Any]: ...
