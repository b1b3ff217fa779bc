"""mcphost: a kernel-style plugin host for the Model Context Protocol.

Plugin authors need only this module: the decorators that build records, the ``Context``
handlers receive, content helpers, the errors to raise, and ``hookimpl`` to implement hooks.
"""

from typing import TYPE_CHECKING, Any

from mcphost.content import (
    Completion,
    ToolResult,
    audio,
    embedded_resource,
    image,
    message,
    resource_contents,
    resource_link,
    text,
)
from mcphost.context import Context, Deferred, ElicitResult
from mcphost.errors import (
    ClientRequestError,
    ConfigError,
    Forbidden,
    InsufficientScope,
    McpError,
    PluginError,
    Refused,
    ToolError,
    Unauthorized,
)
from mcphost.hookspecs import Host, hookimpl
from mcphost.protocol.auth import bearer_challenge, bearer_token, scope_satisfied
from mcphost.records import (
    Middleware,
    Prompt,
    Provenance,
    Resource,
    ResourceTemplate,
    Tool,
    Unready,
    middleware,
    prompt,
    resource,
    resource_template,
    tool,
)
from mcphost.redaction import REDACTED, redact, redact_text
from mcphost.sessions.session import Connection, Principal, Session

__version__ = "0.1.0"

__all__ = [
    "REDACTED",
    "ClientRequestError", "Completion", "ConfigError", "Connection", "Context", "Deferred", "ElicitResult",
    "Forbidden", "InsufficientScope", "McpError", "Middleware", "PluginError", "Principal", "Prompt",
    "Provenance", "Refused", "Resource", "ResourceTemplate", "Session", "Tool", "ToolError", "ToolResult",
    "Unauthorized", "Unready", "__version__", "audio", "bearer_challenge", "bearer_token", "embedded_resource",
    "hookimpl", "image", "message", "middleware", "prompt", "redact", "redact_text", "resource", "resource_contents",
    "resource_link", "resource_template", "scope_satisfied", "text", "tool",
]
#: The plugin API of the host: typed settings, and the Host protocol hooks receive.
__all__ += ["Config", "EnvStr", "Host", "PluginSettings", "ServerSettings", "bind_settings"]

if TYPE_CHECKING:
    from mcphost.config import Config, ServerSettings
    from mcphost.settings import EnvStr, PluginSettings, bind_settings


def __getattr__(name: str) -> Any:
    # Loaded when first asked for, so that importing mcphost (every command line run does) stays
    # quick: the configuration types bring the file machinery (jsonschema, platformdirs), the
    # settings base builds a pydantic model.
    if name in ("Config", "ServerSettings"):
        from mcphost import config

        return getattr(config, name)
    if name in ("EnvStr", "PluginSettings", "bind_settings"):
        from mcphost import settings

        return getattr(settings, name)
    raise AttributeError(f"module 'mcphost' has no attribute {name!r}")
