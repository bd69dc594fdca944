"""Publishing timeline entries and runner events.

Entries go to this machine's own ingest subject, ``seedline.ingest.runner.<node>``
(CONTRACT.md 6): the timeline-writer takes from there only entries of conversations
the platform launched on this machine. They are published with JetStream so each
one is acknowledged; a failed publish is retried with the same ``Nats-Msg-Id``,
which the stream deduplicates. Entries are published one after the other, each acknowledged
before the next, because the timeline keeps them in the order they reach the
ingest stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec
import structlog
from nats.aio.client import Client
from nats.js import JetStreamContext
from seedline_contracts.codec import encode
from seedline_contracts.runner import RunnerEvent
from seedline_contracts.subjects import ingest_runner_subject, runner_subject
from seedline_contracts.timeline import MAX_CONTENT_CHARS, TimelineEntryIn

log = structlog.get_logger(__name__)

RETRY_DELAYS_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)


class Publisher:
    def __init__(
        self,
        nc: Client,
        js: JetStreamContext,
        node_id: str,
        *,
        retry_delays: Sequence[float] = RETRY_DELAYS_SECONDS,
    ) -> None:
        self._nc = nc
        self._js = js
        self._events_subject = runner_subject(node_id, "events")
        self._node_id = node_id
        self._retry_delays = tuple(retry_delays)

    async def event(self, event: RunnerEvent) -> None:
        try:
            # No flush here: stop() cancels handlers and workers, and a flush cancelled
            # before its PONG makes nats.py's read loop die on that PONG, leaving a
            # connection that looks up but reads nothing. The client sends what is
            # pending on its own; stop() flushes once at the end.
            await self._nc.publish(self._events_subject, encode(event))
        except Exception as error:
            log.warning(
                "event_not_published",
                type=event.type,
                session_id=event.session_id,
                error=str(error),
            )

    async def entry(self, entry: TimelineEntryIn) -> None:
        """Publish one entry and wait for its acknowledgement (retried with the same id)."""
        payload = self._fitting_payload(entry)
        headers = {"Nats-Msg-Id": entry.entry_id}
        for attempt, delay in enumerate((*self._retry_delays, None)):
            try:
                subject = ingest_runner_subject(self._node_id, entry.instance_id)
                await self._js.publish(subject, payload, headers=headers)
                return
            except Exception as error:
                if delay is None:
                    log.error(
                        "entry_not_published",
                        entry_id=entry.entry_id,
                        session_id=entry.session_id,
                        attempts=attempt + 1,
                        error=str(error),
                    )
                    return
                await asyncio.sleep(delay)

    def _fitting_payload(self, entry: TimelineEntryIn) -> bytes:
        payload = encode(entry)
        if len(payload) <= self._nc.max_payload or len(entry.content) <= MAX_CONTENT_CHARS:
            return payload
        # Too big to publish at all: cut it the way the writer would have.
        return encode(msgspec.structs.replace(entry, content=entry.content[:MAX_CONTENT_CHARS]))
