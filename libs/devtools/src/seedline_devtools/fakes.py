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
