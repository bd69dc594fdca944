"""Where nothing exports, a trace a service starts records nothing (its ids still travel on);
a sampled trace it continues from a service that exports is recorded, so that trace stays
whole; where an endpoint is set, every span is recorded."""

from __future__ import annotations

from seedline_platform.observability import context_from, trace_headers, tracer_provider

SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
NOT_SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


def _sampled(traceparent: str) -> bool:
    return bool(int(traceparent.split("-")[3], 16) & 1)


def _span(provider, traceparent: str | None = None) -> tuple[bool, dict[str, str]]:
    tracer = provider.get_tracer("test")
    context = context_from({"traceparent": traceparent} if traceparent else None)
    with tracer.start_as_current_span("work", context=context) as span:
        return span.is_recording(), trace_headers()


def test_with_nothing_exporting_a_started_trace_records_nothing_and_still_travels():
    provider = tracer_provider("svc", None)
    recording, headers = _span(provider)
    assert not recording
    assert not _sampled(headers["traceparent"])  # its ids carried on, not sampled
    assert not _span(provider, NOT_SAMPLED)[0]


def test_with_nothing_exporting_a_sampled_trace_from_upstream_is_continued_and_recorded():
    recording, headers = _span(tracer_provider("svc", None), SAMPLED)
    assert recording
    assert headers["traceparent"].split("-")[1] == SAMPLED.split("-")[1]
    assert _sampled(headers["traceparent"])


def test_with_an_endpoint_every_span_is_recorded_and_exported(monkeypatch):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    exported: list[str] = []

    def export(self, spans):
        exported.extend(span.name for span in spans)
        return SpanExportResult.SUCCESS

    monkeypatch.setattr(OTLPSpanExporter, "export", export)
    provider = tracer_provider("svc", "http://127.0.0.1:9")
    assert _span(provider)[0]
    provider.shutdown()  # flushes
    assert exported == ["work"]
