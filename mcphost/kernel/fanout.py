"""The kernel's cross-process fan-out: notifications for every session and listen stream, and
what other processes forward to this one on a shared backend.

One process (or none) holds each session; a notification goes to every process through the
cluster's broadcast, and each delivers it to the sessions and listen streams it holds (and the
store keeps it for a stored session no process holds). A cancellation or a deferred reply for a
request running elsewhere arrives here through the cluster's session handlers.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from mcphost.kernel.tasks import detailed_view
from mcphost.protocol import jsonrpc
from mcphost.protocol.errors import INTERNAL_ERROR, McpError
from mcphost.protocol.jsonrpc import Message, RequestId

if TYPE_CHECKING:
    from mcphost.catalog import Catalog
    from mcphost.context import Deferred
    from mcphost.kernel.listen import Listener
    from mcphost.kernel.views import Views
    from mcphost.kernel.visibility import Visibility
    from mcphost.sessions.cluster import Cluster
    from mcphost.sessions.manager import SessionManager
    from mcphost.sessions.session import Principal, Session

log = logging.getLogger("mcphost.kernel")


class FanOutKernel(Protocol):
    """What the fan-out reads of the kernel (the Kernel satisfies it)."""

    catalog: Catalog
    sessions: SessionManager
    listeners: set[Listener]
    views: Views
    cluster: Cluster | None

    def visibility(self, session: Session, principal: Principal | None = None) -> Visibility: ...


class FanOut:
    """Notifications to every session and listen stream of every process, and what other
    processes ask of this one (cancel a request running here, answer a deferred one)."""

    def __init__(self, kernel: FanOutKernel, deferred: dict[tuple[str, RequestId], Deferred]) -> None:
        self.kernel = kernel
        #: The kernel's deferred requests waiting in this process, by session id and request id.
        self.deferred = deferred

    def join(self, cluster: Cluster) -> None:
        """Act on what other processes forward here through ``cluster``."""
        cluster.session_handlers.update({"cancel": self._cancel_here, "respond": self._respond_here})
        cluster.broadcast_handlers.update({
            "resource-updated": self._resource_updated_here,
            "list-changed": self._list_changed_here,
            "task": self._task_here,
        })

    # Handlers return True when they acted here: the cluster then acknowledges the message, and
    # its sender stops re-sending it.

    def _cancel_here(self, session: Session, message: dict[str, Any]) -> bool:
        request_id = message.get("id")
        task = session.inflight.get(request_id) if jsonrpc.valid_id(request_id) else None
        if task is not None:
            task.cancel()
        return task is not None

    def _respond_here(self, session: Session, message: dict[str, Any]) -> bool:
        deferred = self.deferred.get((session.id, message.get("id")))  # type: ignore[arg-type]  # any other id finds nothing
        if deferred is None:
            return False
        error = message.get("error")
        if isinstance(error, dict):
            deferred.reject(McpError(int(error.get("code", INTERNAL_ERROR)), str(error.get("message", "")),
                                     error.get("data")))
        else:
            deferred.resolve(message.get("value"))
        return True

    async def _first_delivery(self, message: dict[str, Any], session: Session) -> bool:
        """On a shared backend a session may be loaded in several processes: one of them delivers."""
        cluster = self.kernel.cluster
        return cluster is None or await cluster.first_delivery(str(message.get("n")), session.id)

    async def _resource_updated_here(self, message: dict[str, Any]) -> None:
        uri = message.get("uri")
        note = jsonrpc.notification("notifications/resources/updated", {"uri": uri})
        # No update reaches a caller who could not read the resource (its scopes, its allow-lists).
        found = self.kernel.catalog.find_resource(uri) if isinstance(uri, str) else None
        record = found[0] if found is not None else None
        for session in list(self.kernel.sessions.sessions.values()):
            if uri in session.subscriptions and session.outlet is not None and not session.closed:
                if record is not None and not self.kernel.visibility(session).sees(record):
                    continue
                if await self._first_delivery(message, session):
                    await _deliver(session, note)
        for listener in list(self.kernel.listeners):
            if uri in listener.uris:
                if record is not None and not self.kernel.visibility(listener.session).sees(record):
                    continue
                await listener.send("notifications/resources/updated", {"uri": uri})

    async def _list_changed_here(self, message: dict[str, Any]) -> None:
        kind = str(message.get("kind"))
        note = jsonrpc.notification(f"notifications/{kind}/list_changed")
        for session in list(self.kernel.sessions.sessions.values()):
            if session.initialized and session.outlet is not None and not session.closed:
                if not _view_changed(message, session.endpoint):
                    continue
                if await self._first_delivery(message, session):
                    await _deliver(session, note)
        for listener in list(self.kernel.listeners):
            if kind in listener.kinds and _view_changed(message, listener.session.endpoint):
                await listener.send(f"notifications/{kind}/list_changed", {})

    async def _task_here(self, message: dict[str, Any]) -> None:
        task = message.get("task")
        if not isinstance(task, dict):
            return
        for listener in list(self.kernel.listeners):
            if task.get("taskId") in listener.task_ids:
                await listener.send("notifications/tasks", task)

    async def notify_resource_updated(self, uri: str) -> None:
        await self.notify({"t": "resource-updated", "uri": uri}, self._resource_updated_here,
                           _stored_resource_updated)

    async def notify_list_changed(self, kind: str) -> None:
        """Tell every initialized session and listen stream that a list changed (tools, prompts, resources).

        A session of an ``[endpoints.NAME]`` endpoint is told only when that endpoint's view changed.
        """
        event: dict[str, Any] = {"t": "list-changed", "kind": kind}
        if self.kernel.views:
            event["views"] = await self.kernel.views.changed_async(kind)
        if kind == "tools":
            self.kernel.views.schedule_index()
        await self.notify(event, self._list_changed_here, _stored_list_changed)

    async def notify_task(self, record: dict[str, Any]) -> None:
        """Tell listen streams that asked for this task (``notifications.taskIds``) its new state."""
        await self.notify({"t": "task", "task": detailed_view(record)}, self._task_here)

    async def notify(self, event: dict[str, Any], here: Callable[[dict[str, Any]], Awaitable[None]],
                      stored: Callable[[dict[str, Any], dict[str, Any]], Message | None] | None = None) -> None:
        if self.kernel.cluster is not None:
            # Every process, this one included, delivers it to the sessions it holds; ``stored``
            # picks the stored sessions no process holds, whose stream log keeps it for their next GET.
            await self.kernel.cluster.broadcast(event, stored)
        else:
            await here(event)


def _stored_resource_updated(event: dict[str, Any], state: dict[str, Any]) -> Message | None:
    """The notification a stored session (its JSON state) gets for ``event``, if any."""
    uri = event.get("uri")
    if uri not in (state.get("subscriptions") or ()):
        return None
    return jsonrpc.notification("notifications/resources/updated", {"uri": uri})


def _view_changed(event: dict[str, Any], endpoint: str | None) -> bool:
    """Whether a list-changed ``event`` concerns a session of ``endpoint`` (None: the whole catalog)."""
    views = event.get("views")
    return endpoint is None or views is None or endpoint in views


def _stored_list_changed(event: dict[str, Any], state: dict[str, Any]) -> Message | None:
    if not state.get("initialized") or not _view_changed(event, state.get("endpoint")):
        return None
    return jsonrpc.notification(f"notifications/{event.get('kind')}/list_changed")



async def _deliver(session: Session, message: Message) -> None:
    try:
        await session.outlet(message, None)  # type: ignore[misc]  # no outlet: logged below like any failed delivery
    except Exception:
        log.warning("could not deliver %s to session %s", message.get("method"), session.id[:8], exc_info=True)
