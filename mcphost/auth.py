"""The host as an OAuth 2.1 resource server: canonical URL, protected resource metadata, challenges.

Auth plugins decide who a caller is (``mcphost_authenticate``) and describe their
authorization servers (``mcphost_protected_resource_metadata``); this module owns what every
plugin relies on and must get right the same way:

- the canonical resource URL (``[server] resource_url``, else derived from the request);
- the RFC 9728 document, merged once at startup from the plugins' contributions;
- every ``WWW-Authenticate`` challenge the HTTP transport sends, completed with
  ``resource_metadata`` and ``scope`` and rewritten with escaped values.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcphost.errors import Refused
from mcphost.plugins import call_impl, impls
from mcphost.protocol.auth import (
    WELL_KNOWN_PRM,
    clean,
    compose_challenge,
    metadata_url,
    request_resource_url,
)

if TYPE_CHECKING:
    from mcphost.hookspecs import Host
    from mcphost.sessions.session import Connection

log = logging.getLogger("mcphost.auth")

#: Fields the host writes itself; a plugin's value for them is ignored.
_HOST_FIELDS = frozenset({"resource", "bearer_methods_supported"})
#: List fields merged as an ordered union across plugins.
_UNION_FIELDS = ("authorization_servers", "scopes_supported")
#: Never advertised as a baseline scope (it asks for refresh tokens, not access to anything here).
_NOT_BASELINE = frozenset({"offline_access"})


class ResourceServer:
    """What the host says about itself as a protected resource. One per host."""

    def __init__(self, host: Host, pm: Any, has_auth: Callable[[], bool]) -> None:
        self.host = host  # handed to mcphost_protected_resource_metadata
        self.pm = pm
        self._has_auth = has_auth
        self.configured_url = host.config.server.resource_url
        self.path = host.config.server.path
        #: The merged plugin contributions (without ``resource``), or None when no plugin contributes.
        self.fields: dict[str, Any] | None = None
        #: The scopes a 401 challenge asks for: ``scopes_supported`` of the metadata, space-separated.
        self.baseline_scope: str | None = None
        self._collected = False

    # -- startup ------------------------------------------------------------------------------

    async def collect(self) -> None:
        """Merge every plugin's metadata fields (once; at startup)."""
        if self._collected:
            return
        self._collected = True
        merged: dict[str, Any] = {}
        unions: dict[str, list[str]] = {name: [] for name in _UNION_FIELDS}
        contributors: list[str] = []
        for impl in impls(self.pm, "mcphost_protected_resource_metadata"):
            try:
                document = call_impl(impl, host=self.host)
                if inspect.isawaitable(document):
                    document = await document
            except Exception:
                log.exception("plugin %s: mcphost_protected_resource_metadata raised; its fields are left out",
                              impl.plugin_name)
                continue
            if document is None:
                continue
            problem = _check_fields(document)
            if problem:
                log.error("plugin %s: mcphost_protected_resource_metadata: %s; its fields are left out",
                          impl.plugin_name, problem)
                continue
            contributors.append(impl.plugin_name)
            for name, value in document.items():
                if name in _HOST_FIELDS:
                    if name == "resource" and value != self.configured_url:
                        log.warning("plugin %s: metadata field 'resource' is ignored; the host sets it from "
                                    "[server] resource_url", impl.plugin_name)
                    continue
                if name in unions:
                    unions[name].extend(v for v in value if v not in unions[name])
                else:
                    merged[name] = value
        if not contributors:
            return
        dropped = [scope for scope in unions["scopes_supported"] if scope in _NOT_BASELINE]
        if dropped:
            log.info("protected resource metadata: %s left out of scopes_supported (not a baseline scope)",
                     ", ".join(dropped))
        scopes = [scope for scope in unions["scopes_supported"] if scope not in _NOT_BASELINE]
        if not unions["authorization_servers"]:
            log.error("protected resource metadata from %s names no authorization_servers; it is not served "
                      "and challenges do not point to it", ", ".join(contributors))
            return
        merged["authorization_servers"] = unions["authorization_servers"]
        if scopes:
            merged["scopes_supported"] = scopes
            self.baseline_scope = " ".join(scopes)
        merged["bearer_methods_supported"] = ["header"]
        self.fields = merged

    def warn_unset_url(self) -> None:
        """Say once, at startup, that tokens' audience is checked against a guessed URL."""
        if self._has_auth() and self.configured_url is None:
            log.warning("[server] resource_url is not set: the canonical URL of this server is derived from each "
                        "request (scheme, Host, path), which is wrong behind a proxy and lets the Host header "
                        "choose the audience. Set it to the URL clients use, e.g. https://mcp.example.com%s",
                        self.path)

    # -- per request --------------------------------------------------------------------------

    def resource_url(self, scheme: str, host_header: str) -> str:
        """The canonical URL of the MCP endpoint: configured, or as this request reached it."""
        if self.configured_url is not None:
            return self.configured_url
        return request_resource_url(scheme, host_header, self.path)

    def resource_url_for(self, request: Connection) -> str:
        """The canonical URL for a request an auth hook sees: the audience its token must name."""
        return self.resource_url(request.scheme or "http", request.headers.get("host", ""))

    def metadata_paths(self) -> list[str]:
        """Request paths that serve the metadata document: path-suffixed forms and the root."""
        paths = [WELL_KNOWN_PRM + self.path.rstrip("/"), WELL_KNOWN_PRM]
        if self.configured_url is not None:
            configured = metadata_url(self.configured_url)
            suffix = configured[configured.index(WELL_KNOWN_PRM):]
            if suffix not in paths:
                paths.insert(1, suffix)
        return paths

    def metadata(self, scheme: str, host_header: str) -> dict[str, Any] | None:
        """The RFC 9728 document (a fresh dict), or None when no plugin contributes metadata."""
        if self.fields is None:
            return None
        return {"resource": self.resource_url(scheme, host_header), **self.fields}

    def response_headers(self, refusal: Refused, scheme: str, host_header: str) -> dict[str, str]:
        """The headers of a refusal's HTTP response: challenges completed, every value header-safe."""
        out: dict[str, str] = {}
        for name, value in refusal.headers.items():
            name = clean(str(name)).strip()
            if not name or any(ch in name for ch in ' :"(),/;<=>?@[\\]{}'):
                continue
            value = clean(str(value))
            if name.lower() == "www-authenticate":
                prm = metadata_url(self.resource_url(scheme, host_header)) if self.fields is not None else None
                value = compose_challenge(value, resource_metadata=prm, scope=self.baseline_scope)
            out[name] = value
        return out


def _check_fields(document: Any) -> str | None:
    if not isinstance(document, Mapping):
        return f"returned {type(document).__name__}, expected a dict"
    for name in _UNION_FIELDS:
        value = document.get(name)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) and v for v in value)):
            return f"{name} must be a list of non-empty strings"
    return None
