"""Tracer and meter providers configured the standard OpenTelemetry way, from ``OTEL_*`` variables.

What the SDK's own auto-configuration reads, read the same way: ``OTEL_SDK_DISABLED``,
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (the resource), ``OTEL_TRACES_EXPORTER``
and ``OTEL_METRICS_EXPORTER`` (comma-separated exporter names, default ``otlp``, ``none`` for
nothing), resolved through the SDK's entry-point groups ``opentelemetry_traces_exporter`` and
``opentelemetry_metrics_exporter`` (so ``console``, ``otlp``, ``prometheus`` or any installed
exporter work), ``OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]PROTOCOL`` (``http/protobuf``, the
specification's default, or ``grpc``), and everything each exporter and processor reads itself
(``OTEL_EXPORTER_OTLP_ENDPOINT``, headers, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``,
``OTEL_METRIC_EXPORT_INTERVAL``...). Providers someone else already installed globally (say
``opentelemetry-instrument``) are used instead of building new ones.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

# The SDK is imported by the functions that build providers, not with the plugin: a CLI command that
# loads the plugins, with this one dormant, does not pay for it (half a second).
if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.resources import Resource

log = logging.getLogger("mcphost.otel")

_OTLP_BY_PROTOCOL = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}


@dataclass
class Providers:
    """The providers mcphost records into, and which of them it built (and so shuts down)."""

    tracer_provider: Any = None
    meter_provider: Any = None
    owned: list[Any] = field(default_factory=list)

    def shutdown(self) -> None:
        for provider in self.owned:
            try:
                provider.shutdown()
            except Exception:  # an exporter that cannot flush at exit must not stop the shutdown
                log.warning("could not shut down %s cleanly", type(provider).__name__, exc_info=True)
        for provider in (self.tracer_provider, self.meter_provider):
            if provider is not None and provider not in self.owned and hasattr(provider, "force_flush"):
                try:
                    provider.force_flush()
                except Exception:
                    log.warning("could not flush %s", type(provider).__name__, exc_info=True)


def sdk_disabled(env: dict[str, str] | os._Environ[str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


#: Variables that say where telemetry goes; any of them set (``none`` included) configures the plugin.
DESTINATION_VARIABLES = ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
                         "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


def destination(env: dict[str, str] | os._Environ[str] | None = None) -> str | None:
    """What configures telemetry here: the first ``DESTINATION_VARIABLES`` entry set, or a global SDK
    provider someone else installed (``opentelemetry-instrument``); None when nothing does."""
    env = os.environ if env is None else env
    for name in DESTINATION_VARIABLES:
        if env.get(name, "").strip():
            return name
    if "opentelemetry.sdk" not in sys.modules:  # nobody has imported the SDK: nobody installed its providers
        return None
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    if isinstance(trace.get_tracer_provider(), TracerProvider) or isinstance(metrics.get_meter_provider(),
                                                                            MeterProvider):
        return "a global OpenTelemetry provider"
    return None


def resource(service_name: str, service_version: str | None) -> Resource:
    """The environment's resource; mcphost's server name and version fill in what it leaves unset."""
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
    found = Resource.create()
    defaults: dict[str, str] = {}
    if str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        defaults[SERVICE_NAME] = service_name
    if service_version and SERVICE_VERSION not in found.attributes:
        defaults[SERVICE_VERSION] = service_version
    return found.merge(Resource(defaults)) if defaults else found


def metric_exporter_names() -> list[str]:
    """The names ``OTEL_METRICS_EXPORTER`` lists (lower case)."""
    value = os.environ.get("OTEL_METRICS_EXPORTER", "otlp")
    return [name.strip().lower() for name in value.split(",") if name.strip()]


def exporter_classes(signal: str) -> list[tuple[str, type]]:
    """The exporter classes ``OTEL_<SIGNAL>_EXPORTER`` names (signal: ``traces`` or ``metrics``).

    A name that is unknown or fails to import is logged and skipped: telemetry that cannot be
    exported is no reason to refuse serving.
    """
    value = os.environ.get(f"OTEL_{signal.upper()}_EXPORTER", "otlp")
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    found: list[tuple[str, type]] = []
    for name in names:
        if name == "none":
            continue
        if name == "prometheus" and signal == "metrics":
            continue  # served on the host's own port by the plugin's scrape route, never a second bind
        entry_name = name
        if name == "otlp":
            protocol = (os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
                        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
            entry_name = _OTLP_BY_PROTOCOL.get(protocol, "")
            if not entry_name:
                log.error("OTEL_EXPORTER_OTLP_PROTOCOL %r is not supported (use http/protobuf or grpc); "
                          "no OTLP %s exporter", protocol, signal)
                continue
        candidates = list(entry_points(group=f"opentelemetry_{signal}_exporter", name=entry_name))
        if not candidates:
            log.error("OTEL_%s_EXPORTER names %r, but no such exporter is installed; it is skipped",
                      signal.upper(), name)
            continue
        try:
            found.append((name, candidates[0].load()))
        except Exception:
            log.exception("the %s exporter %r failed to load; it is skipped", signal, name)
    return found


def tracer_provider(res: Resource) -> tuple[Any, bool]:
    """The global SDK tracer provider, or a new one with the configured exporters (True: new)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current, False
    provider = TracerProvider(resource=res)
    for name, exporter_class in exporter_classes("traces"):
        if not issubclass(exporter_class, SpanExporter):
            log.error("OTEL_TRACES_EXPORTER %r is not a span exporter; it is skipped", name)
            continue
        try:
            provider.add_span_processor(BatchSpanProcessor(exporter_class()))
        except Exception:
            log.exception("the trace exporter %r could not be set up; it is skipped", name)
    trace.set_tracer_provider(provider)
    return provider, True


def meter_provider(res: Resource, extra_readers: list[MetricReader]) -> tuple[Any, bool]:
    """The global SDK meter provider, or a new one with the configured readers (True: new).

    ``extra_readers`` (the Prometheus reader behind ``/metrics``) can only be attached to a new
    provider; when there are some, a new provider is built even if a global one exists, so the
    scrape route always sees mcphost's metrics.
    """
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricReader, PeriodicExportingMetricReader
    current = metrics.get_meter_provider()
    if isinstance(current, MeterProvider) and not extra_readers:
        return current, False
    readers: list[MetricReader] = list(extra_readers)
    for name, exporter_class in exporter_classes("metrics"):
        try:
            if issubclass(exporter_class, MetricReader):
                readers.append(exporter_class())
            elif issubclass(exporter_class, MetricExporter):
                readers.append(PeriodicExportingMetricReader(exporter_class()))
            else:
                log.error("OTEL_METRICS_EXPORTER %r is not a metric exporter; it is skipped", name)
        except Exception:
            log.exception("the metric exporter %r could not be set up; it is skipped", name)
    provider = MeterProvider(resource=res, metric_readers=readers)
    if not isinstance(current, MeterProvider):
        metrics.set_meter_provider(provider)
    return provider, True
