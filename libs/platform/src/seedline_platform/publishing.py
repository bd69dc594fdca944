"""Publishing to the streams: one small port, its JetStream adapter and a fake.

Every message goes out with a window of pending acks (DESIGN.md rule 5) and the
current trace context in its headers, so a consumer's span joins the same trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from nats.js import JetStreamContext

from seedline_contracts.codec import encode
from seedline_contracts.events import event_subject

from .natsio import publish_window
from .observability import trace_headers
from .outage import NATS_AWAY, StreamsUnavailable
from .sending import check_send

Outgoing = tuple[str, bytes, dict[str, str] | None]  # subject, payload, headers


def event_message(event, msg_id: str | None = None) -> Outgoing:
    """A session event as it is recorded: on seedline.session.<session>.<type>, with a
    Nats-Msg-Id when a redelivery must record it once."""
    return (event_subject(event), encode(event),
            {"Nats-Msg-Id": msg_id} if msg_id is not None else None)


class Publisher(Protocol):
    async def publish(self, messages: Sequence[Outgoing]) -> list[int]:
        """Store every message, in order; their stream sequences (0 for a message the
        stream already held under the same Nats-Msg-Id: another copy recorded it first)."""
        ...


class JetStreamPublisher:
    def __init__(self, js: JetStreamContext) -> None:
        self._js = js

    async def publish(self, messages: Sequence[Outgoing]) -> list[int]:
        if not messages:
            return []
        try:
            acks = await publish_window(
                self._js, [(subject, payload, trace_headers(headers))
                           for subject, payload, headers in messages]
            )
        except NATS_AWAY as exc:
            raise StreamsUnavailable(str(exc) or type(exc).__name__) from exc
        return [0 if ack.duplicate else ack.seq for ack in acks]


class RecordingPublisher:
    """For unit tests: keeps what was published, numbered like a stream."""

    def __init__(self) -> None:
        self.messages: list[Outgoing] = []
        self._msg_ids: set[str] = set()

    async def publish(self, messages: Sequence[Outgoing]) -> list[int]:
        seqs = []
        for subject, payload, headers in messages:
            check_send(subject)
            msg_id = (headers or {}).get("Nats-Msg-Id")
            if msg_id is not None and msg_id in self._msg_ids:
                seqs.append(0)
                continue
            if msg_id is not None:
                self._msg_ids.add(msg_id)
            self.messages.append((subject, payload, headers))
            seqs.append(len(self.messages))
        return seqs

    def on(self, subject_prefix: str) -> list[bytes]:
        return [p for s, p, _ in self.messages if s.startswith(subject_prefix)]
