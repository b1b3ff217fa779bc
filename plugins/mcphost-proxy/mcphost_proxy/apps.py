"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension, SEP-1865) through the proxy: ``ui://`` URIs.

Two upstreams commonly serve the same ``ui://`` path (``ui://dashboard/view.html``); mounted side by
side, one would shadow the other and a tool's ``_meta.ui.resourceUri`` would point at whichever won.
So the host serves upstream S's ``ui://PATH`` as ``ui://S/PATH`` (as agentgateway and Envoy rewrite
them per upstream), in every place a client meets it: resources/list and the templates, the
contents of resources/read, the tools' ``_meta.ui.resourceUri`` (and the legacy ``ui/resourceUri``)
and resource updates; a read or a subscription is sent upstream under the upstream's own URI
(:func:`upstream_uri`). Nothing else of ``_meta`` changes: the resource's CSP and permissions pass as
the upstream declared them. App-only tools (``_meta.ui.visibility`` without ``"model"``) are the
host's to keep out of lists and search (mcphost.records.app_only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

UI_SCHEME = "ui://"


def ui_uri(server: str, uri: str) -> str:
    """The host's URI of an upstream's MCP Apps resource: ``ui://PATH`` of server S is ``ui://S/PATH``
    (other URIs stay as they are)."""
    return f"{UI_SCHEME}{server}/{uri[len(UI_SCHEME):]}" if uri.startswith(UI_SCHEME) else uri


def tool_meta(server: str, given: Any) -> Mapping[str, Any] | None:
    """A tool's ``_meta`` with its UI resource URIs (``ui.resourceUri``, legacy ``ui/resourceUri``) as
    the host serves them (:func:`ui_uri`); anything else in it unchanged."""
    if not isinstance(given, dict):
        return None
    meta: dict[str, Any] = dict(given)
    ui, legacy = meta.get("ui"), meta.get("ui/resourceUri")
    if isinstance(ui, dict) and isinstance(ui.get("resourceUri"), str):
        meta["ui"] = {**ui, "resourceUri": ui_uri(server, ui["resourceUri"])}
    if isinstance(legacy, str):
        meta["ui/resourceUri"] = ui_uri(server, legacy)
    return meta


def upstream_uri(server: str, uri: str) -> str:
    """The upstream's own URI of a resource the host serves as ``uri`` (the inverse of :func:`ui_uri`)."""
    prefix = f"{UI_SCHEME}{server}/"
    return UI_SCHEME + uri[len(prefix):] if uri.startswith(prefix) else uri
