"""The life every service shares: connect, check durability, set up, consume,
serve, stop. A service says only what it consumes and what it answers."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Sequence

from nats.aio.msg import Msg

from . import natsio, pg
from .consumer import BatchConsumer, BatchHandler, Parker
from .logging import get_logger
from .settings import Settings

log = get_logger(__name__)


class ServiceApp:
    name = "seedline"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.nc = None
        self.js = None
        self.pool = None
        self.responder: natsio.Responder | None = None
        self.consumers: list[BatchConsumer] = []
        self.loops: list[Callable[[], Awaitable[None]]] = []

    async def setup(self) -> None:
        """Build the service's parts; add consumers with `consume` and loops to `loops`."""

    async def serve(self, responder: natsio.Responder) -> None:
        """Subscribe to request subjects; called once everything else is ready."""

    def consume(
        self, *, stream: str, durable: str, filter_subjects: Sequence[str], handle: BatchHandler,
        park: Parker, batch_size: int | None = None, ack_wait: float = 30.0,
    ) -> BatchConsumer:
        consumer = BatchConsumer(
            self.js, stream=stream, durable=durable, filter_subjects=filter_subjects,
            handle=handle, park=park, batch_size=batch_size or self.settings.batch_size,
            max_deliver=self.settings.max_deliver, ack_wait=ack_wait,
        )
        self.consumers.append(consumer)
        return consumer

    def parker(self, subject: str) -> Parker:
        async def park(msg: Msg, reason: str) -> None:
            await natsio.park_message(self.js, msg, reason, subject)

        return park

    async def start(self) -> None:
        s = self.settings
        self.nc = await natsio.connect(s.nats_servers, self.name)
        self.js = self.nc.jetstream()
        await natsio.ensure_streams(self.js, replicas=s.stream_replicas)
        await natsio.enforce_durability(self.nc, self.js, s.nats_monitor_url, s.strict_durability)
        self.pool = await pg.open_pool(s.database_url, self.name)
        await self.setup()
        for consumer in self.consumers:
            await consumer.start()
        self.responder = natsio.Responder(self.nc, self.name)
        await self.serve(self.responder)
        log.info("ready")

    async def run(self) -> None:
        await asyncio.gather(*(c.run() for c in self.consumers), *(loop() for loop in self.loops))

    async def stop(self) -> None:
        if self.responder:
            await self.responder.close()
        if self.nc and not self.nc.is_closed:
            # close, not drain: unacknowledged work is redelivered, and a
            # drain would wait on pull subscriptions whose fetches were cancelled.
            await self.nc.close()
        if self.pool:
            await self.pool.close()
