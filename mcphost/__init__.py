"""mcphost: a kernel-style plugin host for the Model Context Protocol.

Plugin authors need only this module: the decorators that build records, the ``Context``
handlers receive, content helpers, the errors to raise, and ``hookimpl`` to implement hooks.
"""

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
from mcphost.hookspecs import hookimpl
from mcphost.protocol.auth import bearer_challenge, bearer_token, scope_satisfied
from mcphost.records import (
    Middleware,
    Prompt,
    Provenance,
    Resource,
    ResourceTemplate,
    Tool,
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
    "Unauthorized", "__version__", "audio", "bearer_challenge", "bearer_token", "embedded_resource", "hookimpl",
    "image", "message", "middleware", "prompt", "redact", "redact_text", "resource", "resource_contents",
    "resource_link", "resource_template", "scope_satisfied", "text", "tool",
]
