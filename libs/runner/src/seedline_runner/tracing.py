"""The runner's part of one trace: its launch and turn spans continue the platform's.

The gateway sends W3C ``traceparent`` in each request's headers; the runner's span is
its child, so one open is one trace from the caller to the machine. Spans are
exported over OTLP when SEEDLINE_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_ENDPOINT) is
set; otherwise the API's no-op tracer costs nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR = TraceContextTextMapPropagator()
_tracer = trace.get_tracer("seedline-runner")


@contextlib.contextmanager
def request_span(name: str, headers: Mapping[str, str] | None, **attributes) -> Iterator[None]:
    context = _PROPAGATOR.extract(dict(headers or {}))
    with _tracer.start_as_current_span(
        name, context=context, kind=trace.SpanKind.SERVER, attributes=attributes
    ):
        yield


def configure_tracing(node_id: str, env: Mapping[str, str] | None = None):
    """Export this process's spans over OTLP when an endpoint is set; the provider, or None."""
    env = os.environ if env is None else env
    endpoint = env.get("SEEDLINE_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create(
        {"service.name": "seedline-runner", "seedline.node_id": node_id}))
    exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider
