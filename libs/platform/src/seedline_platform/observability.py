"""Metrics and traces every service carries (DESIGN.md rule 10).

Each service has a Prometheus registry of its own (several services can share one
test process) and an OpenTelemetry tracer provider whose resource names it. Spans
travel in NATS headers as W3C ``traceparent``: FastStream's middleware does it for
its own subscribers and publishes; ``trace_headers`` and ``consumed_span`` do it
where the service uses nats-py directly (batched publishes, the batch consumer), so
one open is one trace across the services and the runner.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_PROPAGATOR = TraceContextTextMapPropagator()

def tracer_provider(service: str, otlp_endpoint: str | None) -> TracerProvider:
    """A provider naming `service`; spans go to OTLP over HTTP when an endpoint is set."""
    resource = Resource.create({"service.name": service})
    if not otlp_endpoint:
        # Nothing exports: a span that starts a trace records nothing (no attributes, no
        # events) yet still carries its ids onward; one that continues a sampled trace from
        # a service that exports is recorded as before, so that trace stays whole.
        return TracerProvider(resource=resource, sampler=ParentBased(ALWAYS_OFF))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider(resource=resource)
    endpoint = otlp_endpoint.rstrip("/") + "/v1/traces"
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def trace_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    """`headers` plus the current span's ``traceparent`` (when there is a span)."""
    out = dict(headers or {})
    _PROPAGATOR.inject(out)
    return out


def context_from(headers: Mapping[str, str] | None) -> Context:
    return _PROPAGATOR.extract(dict(headers or {}))


@contextlib.contextmanager
def consumed_span(
    tracer: trace.Tracer, name: str, headers: Mapping[str, str] | None, **attributes: Any
) -> Iterator[trace.Span]:
    """A span for work on a message that arrived without FastStream, continuing its trace."""
    with tracer.start_as_current_span(
        name, context=context_from(headers), kind=trace.SpanKind.CONSUMER, attributes=attributes
    ) as span:
        yield span


class ServiceMetrics:
    """The series every service exports, plus a place for its own."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.registry = CollectorRegistry(auto_describe=True)
        self.consumer_pending = Gauge(
            "seedline_consumer_pending_messages",
            "Messages of a durable consumer not yet delivered (its lag).",
            ["stream", "durable"],
            registry=self.registry,
        )
        self.consumer_ack_pending = Gauge(
            "seedline_consumer_ack_pending_messages",
            "Messages of a durable consumer delivered but not yet acknowledged.",
            ["stream", "durable"],
            registry=self.registry,
        )
        self.batch_seconds = Histogram(
            "seedline_batch_handler_seconds",
            "Time to apply one batch of a batch consumer.",
            ["stream", "durable"],
            registry=self.registry,
        )

    def counter(self, name: str, documentation: str, labels: list[str]) -> Counter:
        return Counter(name, documentation, labels, registry=self.registry)

    def histogram(
        self, name: str, documentation: str, labels: list[str], buckets: tuple[float, ...]
    ) -> Histogram:
        return Histogram(name, documentation, labels, registry=self.registry, buckets=buckets)
