"""FastStream's Prometheus middleware, its messages labelled by the routing table's subjects.

FastStream labels each message by its own subject. A session event's subject names its
conversation (`seedline.session.<id>.opened`) and a reply goes to a new inbox each time,
so every conversation and every request added label values: series that /metrics kept for
ever, each first message building a new histogram. Labelled by the route whose subject
matches, the series are as many as the table has rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faststream.nats.prometheus.provider import NatsMetricsSettingsProvider
from faststream.prometheus.middleware import PrometheusMiddleware
from nats.aio.msg import Msg

from .subject_match import subject_matches

OTHER = "other"  # a reply inbox, or a subject no route names


def route_label(subject: str, patterns: Sequence[str]) -> str:
    return next((p for p in patterns if subject_matches(subject, p)), OTHER)


def prometheus_middleware(registry: Any, app_name: str,
                          patterns: Sequence[str]) -> PrometheusMiddleware:
    patterns = tuple(patterns)

    class ByRoute(NatsMetricsSettingsProvider):
        __slots__ = ()

        def get_consume_attrs_from_message(self, msg):
            attrs = super().get_consume_attrs_from_message(msg)
            return {**attrs, "destination_name": route_label(attrs["destination_name"], patterns)}

        def get_publish_destination_name_from_cmd(self, cmd) -> str:
            return route_label(cmd.destination, patterns)

    def provider(msg: Msg | None) -> ByRoute | None:
        # Single messages only, as FastStream's own factory; KV watches get no metrics.
        return ByRoute() if msg is None or isinstance(msg, Msg) else None

    return PrometheusMiddleware(settings_provider_factory=provider, registry=registry,
                                app_name=app_name)
