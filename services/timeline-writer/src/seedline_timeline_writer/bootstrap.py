"""The timeline-writer's object graph, built the same way in the service and in tests: real
adapters there, fakes here, given as `Ports`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from opentelemetry import trace

from seedline_contracts.instances import Erasure
from seedline_contracts.times import now_text
from seedline_platform.erasure import ErasureFollower
from seedline_platform.observability import ServiceMetrics
from seedline_platform.publishing import Publisher
from seedline_platform.sealing import Sealer, unsealed
from seedline_platform.settings import Settings

from .api import TimelineApi
from .ingest import IngestHandler
from .launches import (
    InMemoryLaunchFeed,
    InMemoryLaunchRegistry,
    LaunchCheck,
    LaunchFeed,
    LaunchRegistry,
)
from .store import TimelineStore
from .stream import TimelineStream
from .writer import TimelineWriter

NAME = "timeline-writer"


@dataclass
class Ports:
    """What the timeline-writer talks to."""

    store: TimelineStore
    stream: TimelineStream
    # Rejected input and the synchronous append's way into ingest.
    publisher: Publisher
    launches: LaunchRegistry = field(default_factory=InMemoryLaunchRegistry)
    feed: LaunchFeed = field(default_factory=InMemoryLaunchFeed)
    sealer: Sealer = field(default_factory=unsealed)
    metrics: ServiceMetrics = field(default_factory=lambda: ServiceMetrics(NAME))
    tracer: trace.Tracer = field(default_factory=lambda: trace.get_tracer(NAME))
    clock: Callable[[], str] = now_text
    # The operator's forget (a part of its own: it needs the streams and the database).
    forgetter: object | None = None
    # Erasures followed (a JetStream context; none in tests) and what each drops here.
    js: object | None = None
    drop_forgotten: Callable[[Erasure], Awaitable[None]] | None = None


@dataclass
class Parts:
    writer: TimelineWriter
    ingest: IngestHandler
    api: TimelineApi
    forgetter: object | None
    forgetting: ErasureFollower


def bootstrap(settings: Settings, ports: Ports) -> Parts:
    writer = TimelineWriter(ports.stream, ports.store, settings.redact_at_ingest, ports.sealer)
    drop = ports.drop_forgotten or getattr(ports.forgetter, "drop", None)
    return Parts(
        writer=writer,
        ingest=IngestHandler(writer, LaunchCheck(ports.launches, ports.feed), ports),
        api=TimelineApi(ports.store, ports.publisher),
        forgetter=ports.forgetter,
        forgetting=ErasureFollower(ports.js, drop, settings.stream_replicas),
    )
