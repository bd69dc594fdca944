"""Hand-written stand-ins for unit tests that run with no servers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace


@dataclass
class FakeMsg:
    """What handlers read of a nats-py JetStream message, and what they do to settle it."""

    data: bytes
    subject: str = "seedline.ingest.timeline"
    stream_seq: int = 1
    num_delivered: int = 1
    headers: dict[str, str] | None = None
    reply: str = ""
    timestamp: datetime | None = None
    settled: list[str] = field(default_factory=list)

    @property
    def metadata(self) -> SimpleNamespace:
        return SimpleNamespace(
            sequence=SimpleNamespace(stream=self.stream_seq, consumer=self.stream_seq),
            num_delivered=self.num_delivered,
            timestamp=self.timestamp,
        )

    async def ack(self) -> None:
        self.settled.append("ack")

    async def nak(self, delay: float | None = None) -> None:
        self.settled.append("nak")

    async def in_progress(self) -> None:
        self.settled.append("in_progress")


async def ask(table, parts, handler, body: bytes | dict) -> dict:
    """A request answered by `handler` as the service's edge answers it: the body read into
    the row's type (or refused), the handler bound to the bootstrap's parts, what it sends
    checked against its row, the answer encoded and read back as JSON."""
    import json

    from seedline_platform.app_base import answer, parts_of
    from seedline_platform.routing import bind

    (route,) = [r for r in table if r.handler is handler]
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return json.loads(await answer(route, bind(handler, parts_of(parts)), data))


async def deliver(table, parts, handler, *args):
    """A message handed to `handler` as the service's edge hands it over: bound to the
    bootstrap's parts, what it sends checked against its row."""
    from seedline_platform.app_base import parts_of
    from seedline_platform.routing import bind
    from seedline_platform.sending import sending_as

    route = next(r for r in table if r.handler is handler)
    with sending_as(route):
        return await bind(handler, parts_of(parts))(*args)
