"""mcphost-otel: OpenTelemetry traces and metrics for mcphost.

One SERVER span per MCP request, following the OpenTelemetry semantic conventions for MCP
(span ``{mcp.method.name} {target}``, ``mcp.*``, ``gen_ai.tool.name``, ``jsonrpc.request.id``,
``error.type``), parented from the W3C trace context a client puts in ``params._meta``
(``traceparent``, ``tracestate``, ``baggage``) or, failing that, in the HTTP headers. Metrics:
``mcp.server.operation.duration`` and ``mcp.server.session.duration`` histograms and the
``mcphost.server.active_sessions`` up-down counter, with the plugin that owns each tool, prompt
or resource as ``mcphost.plugin.name`` / ``mcphost.plugin.version``. Exporters come from the
standard ``OTEL_*`` variables (see :mod:`mcphost_otel.providers`); ``[plugins.otel]
prometheus = true`` adds a Prometheus scrape route. With neither (no ``OTEL_*`` exporter or
endpoint, no Prometheus, no provider installed by someone else) the plugin is dormant: listed as
"not configured" and never called, so it exports nowhere and costs nothing.

Metric attributes come from a closed set, so what a client sends cannot grow the metrics without
bound: a method that is not an MCP method, a tool or prompt name that the catalog does not hold,
all share the value ``_OTHER`` (spans, one per request, keep the names as sent).

The entry point names the class, so every Host gets its own instance; tests pass their own
providers (the SDK's in-memory exporter and reader) to the constructor.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

import mcphost
from mcphost.protocol.errors import INTERNAL_ERROR, McpError
from mcphost_otel import providers as setup

if TYPE_CHECKING:  # bound at run time by _load_api(), once the plugin is active
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode


def _load_api() -> None:
    """Bind the OpenTelemetry API names this module uses, once the plugin is active (its middleware is
    collected, before any request): a dormant plugin imports none of it at every command line."""
    global otel_context, propagate, trace, Link, SpanKind, Status, StatusCode
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode


#: ``(mcphost.kernel.modern.InputRequired,)``, set once the plugin is active (its middleware is
#: collected): importing the kernel for a dormant plugin would cost every command line.
_INPUT_REQUIRED: tuple[type[BaseException], ...] = ()

log = logging.getLogger("mcphost.otel")

__version__ = "0.1.0"
SCOPE = "mcphost_otel"

#: The bucket boundaries the semantic conventions advise for both MCP duration histograms.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
#: Methods whose ``params.uri`` is recorded as ``mcp.resource.uri`` on spans (never on metrics).
RESOURCE_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
#: The MCP request methods, both eras: metric values for ``mcp.method.name``; any other is ``_OTHER``.
KNOWN_METHODS = frozenset({
    "initialize", "ping", "logging/setLevel", "tools/list", "tools/call", "resources/list",
    "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/list",
    "prompts/get", "completion/complete", "server/discover", "subscriptions/listen", "tasks/get", "tasks/update",
    "tasks/cancel", "tasks/list", "tasks/result"})
#: The metric value standing for every name outside the closed set (OpenTelemetry's convention).
OTHER = "_OTHER"
#: Attributes naming a catalog record: on metrics, a name the catalog does not hold becomes OTHER.
_RECORD_NAMES = ("gen_ai.tool.name", "gen_ai.prompt.name")
#: The W3C keys read from ``params._meta`` and HTTP headers.
PROPAGATION_KEYS = ("traceparent", "tracestate", "baggage")
NETWORK_TRANSPORT = {"http": "tcp", "stdio": "pipe"}

OPERATION_DURATION = "mcp.server.operation.duration"
SESSION_DURATION = "mcp.server.session.duration"
ACTIVE_SESSIONS = "mcphost.server.active_sessions"
PLUGIN_NAME = "mcphost.plugin.name"
PLUGIN_VERSION = "mcphost.plugin.version"
END_REASON = "mcphost.session.end_reason"

class OtelSettings(mcphost.PluginSettings):
    """OpenTelemetry traces and metrics, and the Prometheus scrape route."""

    traces: Annotated[bool, Field(description="Record a server span per MCP request.")] = True
    metrics: Annotated[bool, Field(description=(
        "Record operation and session metrics (for the OTEL_METRICS_EXPORTER exporters and the Prometheus "
        "route)."))] = True
    prometheus: Annotated[bool, Field(description=(
        "Serve the metrics for Prometheus to scrape on prometheus_path."))] = False
    prometheus_path: Annotated[str, Field(pattern=r"^/[A-Za-z0-9._~/-]*$", description=(
        "Path of the Prometheus scrape route."))] = "/metrics"
    prometheus_interval: Annotated[float, Field(gt=0, le=60, description=(
        "With several workers: seconds between the snapshots each worker shares for the one /metrics that "
        "covers them all."))] = 1.0


class OtelPlugin:
    """The plugin object. Pass providers to record into them instead of configuring from the environment."""

    def __init__(self, *, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self._given_tracer_provider = tracer_provider
        self._given_meter_provider = meter_provider
        self.settings = OtelSettings()
        self.providers = setup.Providers()
        self.registry: Any = None  # the Prometheus registry behind the scrape route
        self.snapshots: Any = None  # with several workers: the shared snapshots (mcphost_otel.workers)
        self.tracer: Any = None
        self.operation_duration: Any = None
        self.session_duration: Any = None
        self.active_sessions: Any = None

    # -- hooks --------------------------------------------------------------------------------

    @mcphost.hookimpl
    def mcphost_settings(self) -> type[OtelSettings]:
        return OtelSettings

    @mcphost.hookimpl
    def mcphost_unconfigured(self, host: mcphost.Host) -> str | None:
        """Dormant until something says where telemetry goes (see :func:`providers.destination`)."""
        if self._given_tracer_provider is not None or self._given_meter_provider is not None:
            return None
        if host.settings(OtelSettings).prometheus or setup.destination() is not None:
            return None
        return "OTEL_EXPORTER_OTLP_ENDPOINT"  # or OTEL_*_EXPORTER, or [plugins.otel] prometheus = true

    @mcphost.hookimpl(tryfirst=True)
    def mcphost_middleware(self, host: mcphost.Host) -> list[mcphost.Middleware]:
        # Runs at startup collection (also for `mcphost plugins`): read settings only; exporters
        # and their threads start in mcphost_startup, when the host really serves.
        global _INPUT_REQUIRED
        from mcphost.kernel.modern import InputRequired

        _INPUT_REQUIRED = (InputRequired,)
        _load_api()
        self.settings = host.settings(OtelSettings)
        if "prometheus" in setup.metric_exporter_names():
            # The SDK's own Prometheus reader binds a port of its own (9464) in every process, which
            # a second worker cannot; the host's scrape route covers every worker on its own port.
            self.settings = self.settings.model_copy(update={"prometheus": True})
        if self.settings.prometheus and self.registry is None:
            from prometheus_client import CollectorRegistry
            self.registry = CollectorRegistry(auto_describe=True)
        return [mcphost.Middleware(name="otel", fn=self.middleware)]

    @mcphost.hookimpl
    def mcphost_startup(self, host: mcphost.Host) -> None:
        try:
            self._start(host)
        except Exception:
            # Telemetry that cannot be set up is no reason to refuse serving: serve without it.
            log.exception("mcphost-otel could not be set up; serving without traces and metrics")
            self.providers.shutdown()
            self.tracer = self.operation_duration = self.session_duration = self.active_sessions = None

    def _start(self, host: mcphost.Host) -> None:
        if setup.sdk_disabled() and self._given_tracer_provider is None and self._given_meter_provider is None:
            log.info("OTEL_SDK_DISABLED is true: mcphost-otel records nothing")
            return
        server = host.config.server
        res = None
        if self.settings.traces:
            provider = self._given_tracer_provider
            if provider is None:
                res = setup.resource(server.name, server.version or mcphost.__version__)
                provider, owned = setup.tracer_provider(res)
                if owned:
                    self.providers.owned.append(provider)
            self.providers.tracer_provider = provider
            self.tracer = provider.get_tracer(SCOPE, __version__)
        if self.settings.prometheus and not self.settings.metrics:
            log.warning("[plugins.otel] prometheus = true needs metrics = true; %s serves nothing",
                        self.settings.prometheus_path)
        if self.settings.metrics:
            provider = self._given_meter_provider
            readers: list[Any] = []
            if self.registry is not None:
                from opentelemetry.exporter.prometheus import PrometheusMetricReader
                readers.append(PrometheusMetricReader(registry=self.registry))
            if provider is None or readers:
                if provider is not None:
                    log.warning("a meter provider was given and prometheus is on: /metrics uses a provider "
                                "of its own")
                res = res or setup.resource(server.name, server.version or mcphost.__version__)
                provider, owned = setup.meter_provider(res, readers)
                if owned:
                    self.providers.owned.append(provider)
            self.providers.meter_provider = provider
            self._instruments(provider.get_meter(SCOPE, __version__))
        if self.registry is not None and self.settings.metrics and server.workers > 1:
            from mcphost_otel.workers import Snapshots, shared_directory
            self.snapshots = Snapshots(self.registry, shared_directory(), self.settings.prometheus_interval)
            self.snapshots.start()

    @mcphost.hookimpl
    def mcphost_shutdown(self, host: mcphost.Host) -> None:
        if self.snapshots is not None:
            self.snapshots.stop()
            self.snapshots = None
        self.providers.shutdown()
        self.tracer = self.operation_duration = self.session_duration = self.active_sessions = None

    @mcphost.hookimpl
    def mcphost_terminate(self, session: Any, reason: str) -> None:
        """A session ended: it is no longer active, and its duration is known."""
        if self.active_sessions is None or session.era != "legacy" or not session.initialized:
            return  # only initialized session-era sessions were counted (see the middleware)
        version = {"mcp.protocol.version": session.protocol_version or ""}
        self.active_sessions.add(-1, version)
        self.session_duration.record(max(0.0, time.time() - session.created_at), {**version, END_REASON: reason})

    @mcphost.hookimpl
    def mcphost_exception(self, request: Any, exception: BaseException) -> None:
        """A handler raised: put the exception (type, message, stack) on the request's span."""
        span = trace.get_current_span()
        if span.is_recording():
            span.record_exception(exception, attributes=_exception_message(exception))

    @mcphost.hookimpl
    def mcphost_routes(self, app: Any) -> None:
        if not self.settings.prometheus or self.registry is None:
            return
        from prometheus_client.exposition import choose_encoder
        from quart import request as quart_request

        registry = self.registry

        async def scrape() -> Any:
            encoder, content_type = choose_encoder(quart_request.headers.get("accept", ""))
            snapshots = self.snapshots
            if snapshots is not None:  # several workers: every worker's figures, merged (file I/O off the loop)
                body = await asyncio.to_thread(lambda: encoder(snapshots.merged_registry()))
            else:
                body = encoder(registry)
            return body, 200, {"content-type": content_type, "cache-control": "no-store"}

        app.add_url_rule(self.settings.prometheus_path, "mcphost_otel_metrics", scrape, methods=["GET"])

    # -- per request ---------------------------------------------------------------------------

    def _instruments(self, meter: Any) -> None:
        self.operation_duration = meter.create_histogram(
            OPERATION_DURATION, unit="s", description="MCP request duration as observed on the server, from "
            "receipt until the result or error is ready.", explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self.session_duration = meter.create_histogram(
            SESSION_DURATION, unit="s", description="Duration of MCP sessions (session era) as observed on "
            "the server, from creation to termination.", explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self.active_sessions = meter.create_up_down_counter(
            ACTIVE_SESSIONS, unit="{session}", description="Initialized MCP sessions (session era) that have "
            "not ended, in this process.")

    async def middleware(self, request: Any, call_next: Callable[[Any], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Wrap one MCP request in a SERVER span and time it."""
        tracer, histogram = self.tracer, self.operation_duration
        if tracer is None and histogram is None:
            return await call_next(request)
        started = time.perf_counter()
        method = request.method
        session = request.session
        counting = method == "initialize" and session.era == "legacy" and not (
            session.initialized or session.protocol_version is not None)
        attributes: dict[str, Any] = {"mcp.method.name": method}
        name = request.name
        target = None
        if name is not None:
            if method == "tools/call":
                attributes["gen_ai.tool.name"] = name
                attributes["gen_ai.operation.name"] = "execute_tool"
                target = name
            elif method == "prompts/get":
                attributes["gen_ai.prompt.name"] = target = name
        connection = request.connection
        transport = NETWORK_TRANSPORT.get(connection.transport) if connection is not None else None
        if transport is not None:
            attributes["network.transport"] = transport
        span = None
        token = None
        if tracer is not None:
            parent, links = _parent_and_links(request)
            span = tracer.start_span(f"{method} {target}" if target else method, context=parent,
                                     kind=SpanKind.SERVER, attributes=_span_attributes(request, attributes),
                                     links=links)
            token = otel_context.attach(trace.set_span_in_context(span))
        error_type: str | None = None
        status_code: str | None = None
        description: str | None = None
        try:
            result = await call_next(request)
        except McpError as exc:
            error_type = status_code = str(exc.code)
            description = exc.message
            raise
        except _INPUT_REQUIRED:
            raise  # 2026-07-28: the request answers with questions for the client; not an error
        except asyncio.CancelledError:
            error_type, description = "cancelled", "the request was cancelled"
            raise
        except Exception as exc:
            # The kernel answers these with -32603 and a generic message.
            error_type = status_code = str(INTERNAL_ERROR)
            description = "Internal error"
            if span is not None:
                span.record_exception(exc, attributes=_exception_message(exc))
            raise
        else:
            if method == "tools/call" and isinstance(result, dict) and result.get("isError") is True:
                error_type, description = "tool_error", _first_text(result)
            return result
        finally:
            try:
                self._finish(request, span, token, attributes, started, error_type, status_code, description,
                             counting)
            except Exception:  # telemetry must never change the request's outcome
                log.debug("mcphost-otel could not finish recording %s", method, exc_info=True)

    def _finish(self, request: Any, span: Any, token: Any, attributes: dict[str, Any], started: float,
                error_type: str | None, status_code: str | None, description: str | None, counting: bool) -> None:
        elapsed = time.perf_counter() - started
        session = request.session
        late: dict[str, Any] = {}  # known only now; the span has the rest since its start
        version = request.protocol_version
        if version:
            late["mcp.protocol.version"] = version
        owner = request.owner
        if owner is not None:
            late[PLUGIN_NAME] = owner.plugin
            if owner.version:
                late[PLUGIN_VERSION] = owner.version
        if error_type is not None:
            late["error.type"] = error_type
        if status_code is not None:
            late["rpc.response.status_code"] = status_code
        if span is not None:
            span.set_attributes(late)
            if error_type is not None:  # an upstream's error may quote its URL or command
                span.set_status(Status(StatusCode.ERROR, mcphost.redact_text(description or "") or None))
            span.end()
            otel_context.detach(token)
        if self.operation_duration is not None:
            attributes.update(late)
            if attributes["mcp.method.name"] not in KNOWN_METHODS:
                attributes["mcp.method.name"] = OTHER
            if owner is None:  # no record of that name: whatever the client typed stays off the metrics
                for key in _RECORD_NAMES:
                    if key in attributes:
                        attributes[key] = OTHER
            self.operation_duration.record(elapsed, attributes)
        if counting and session.initialized and self.active_sessions is not None:
            self.active_sessions.add(1, {"mcp.protocol.version": session.protocol_version or ""})


def _exception_message(exc: BaseException) -> dict[str, str]:
    """The ``exception.message`` and ``exception.stacktrace`` a span records, redacted (an error may
    quote an upstream's URL or command)."""
    import traceback
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"exception.message": mcphost.redact_text(str(exc)), "exception.stacktrace": mcphost.redact_text(stack)}


def _span_attributes(request: Any, attributes: dict[str, Any]) -> dict[str, Any]:
    """What only the span carries (per-request, high cardinality): ids, the URI, the peer."""
    out = dict(attributes)
    if request.era == "legacy":  # a 2026-07-28 request has no session, only a per-request stand-in
        out["mcp.session.id"] = request.session.id
    request_id = request.id
    if request_id is not None:
        out["jsonrpc.request.id"] = str(request_id)
    if request.method in RESOURCE_METHODS and request.name is not None:
        out["mcp.resource.uri"] = mcphost.redact_text(request.name)  # a URI may carry a token
    connection = request.connection
    if connection is not None and connection.transport == "http":
        out["network.protocol.name"] = "http"
        remote = connection.remote
        if remote:
            address, _, port = remote.rpartition(":")
            if address and port.isdigit():
                out["client.address"] = address.strip("[]")
                out["client.port"] = int(port)
    return out


def _carrier(source: Any) -> dict[str, str] | None:
    if not isinstance(source, dict) and not isinstance(source, Mapping):
        return None
    if "traceparent" not in source:
        return None  # the usual case: nothing to extract
    carrier = {key: value for key in PROPAGATION_KEYS if isinstance(value := source.get(key), str)}
    return carrier if "traceparent" in carrier else None


def _meta_context(request: Any) -> Any:
    carrier = _carrier(request.params.get("_meta"))
    return None if carrier is None else propagate.extract(carrier)


def _header_context(request: Any) -> Any:
    connection = request.connection
    carrier = _carrier(connection.headers) if connection is not None else None
    return None if carrier is None else propagate.extract(carrier)


def _valid(ctx: Any) -> bool:
    return ctx is not None and trace.get_current_span(ctx).get_span_context().is_valid


def _parent_and_links(request: Any) -> tuple[Any, list[Link] | None]:
    """The parent context and the links of a request's span.

    The parent is the trace context in ``params._meta`` (the conventions' choice), else the
    HTTP headers', else whatever is current (an ASGI instrumentation's span, say). With a
    parent from ``_meta``, the transport's contexts (headers, current span) become links.
    """
    meta = _meta_context(request)
    headers = _header_context(request)
    if not _valid(meta):
        return (headers if _valid(headers) else None), None
    parent = trace.get_current_span(meta).get_span_context()
    links: list[Link] = []
    for ctx in (headers, None):  # None: the current context
        span_context = trace.get_current_span(ctx).get_span_context()
        if span_context.is_valid and span_context != parent and all(link.context != span_context for link in links):
            links.append(Link(span_context))
    return meta, links or None


def _first_text(result: dict[str, Any]) -> str | None:
    for block in result.get("content") or ():
        text = block.get("text") if isinstance(block, dict) and block.get("type") == "text" else None
        if isinstance(text, str):
            return text[:256]
    return None


__all__ = ["ACTIVE_SESSIONS", "DURATION_BUCKETS", "OPERATION_DURATION", "PLUGIN_NAME",
           "PLUGIN_VERSION", "SESSION_DURATION", "OtelPlugin", "OtelSettings"]
