"""The life every service shares: connect, check durability, set up, consume,
serve, stop. A service says what it answers and consumes in its routing table
(`routes.py`, `seedline_platform.routing`), and builds the parts its handlers are.

The edges are FastStream (DESIGN.md rule 9): request/reply APIs and low-rate
event subscribers are FastStream subscribers, which gives typed routing, the
AsyncAPI document generated from this code, and the Prometheus and OpenTelemetry
middlewares. High-rate stream consumers that need batch fetches, windows of
pending acks and ordered batches use ``BatchConsumer`` on the same connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Awaitable, Callable, Sequence

import nats.micro
from faststream import AckPolicy
from faststream._internal.broker import BrokerUsecase
from faststream.security import BaseSecurity
from faststream.nats import ConsumerConfig, JStream, NatsBroker, PullSub
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from nats.aio.msg import Msg

from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.errors import error_reply
from seedline_core.notices import error_message

from . import natsio, pg
from .consumer import ACK_WAIT_SECONDS, BatchConsumer, BatchHandler, Parker
from .faststream_workarounds import NatsMessage
from .health_http import HealthServer
from .logging import get_logger
from .metrics_labels import prometheus_middleware
from .nats_workarounds import survive_abandoned_flushes
from .observability import ServiceMetrics, tracer_provider
from .redelivery import MsgHandler, handle_with_redelivery, typed
from .routing import Kind, Route, resolve
from .settings import Settings

log = get_logger(__name__)

Answer = Callable[[Msg], Awaitable[bytes]]
VERSION = "1.1.0"
# Requests answered at once per API: an open waits for its machine, a read may
# wait for min_seq; a few hundred waiting requests cost only their tasks.
REQUEST_WORKERS = 256
LAG_REFRESH_SECONDS = 5.0
# A fetch in flight returns within the consumer's fetch_wait (0.25 s) and is handed back.
QUIESCE_SECONDS = 2.0


def side_port_metadata(health: HealthServer) -> dict[str, str]:
    """What `seedline status` shows of a copy: where its side port is, and which process."""
    return {"http_url": health.url or "", "pid": str(os.getpid()),
            "host": socket.gethostname()}


async def _raw_body(msg) -> bytes:
    return msg.body


def no_routes(settings: Settings) -> tuple[Route, ...]:
    return ()


class ServiceApp:
    name = "seedline"
    description = "A Seedline service."
    uses_database = True
    pool_size = 8  # Postgres connections of one copy
    # The service's routing table: settings -> its routes (each service's routes.py).
    route_table = staticmethod(no_routes)

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.metrics = ServiceMetrics(self.name)
        self.tracer_provider = tracer_provider(self.name, settings.otlp_endpoint)
        self.tracer = self.tracer_provider.get_tracer(self.name)
        self.routing: tuple[Route, ...] = self.route_table(settings)
        self.broker = NatsBroker(
            settings.nats_servers,
            name=self.name,
            # Its own reply prefix: under deploy/nats-secure.conf it may subscribe only there.
            inbox_prefix=subjects.service_inbox_prefix(self.name),
            max_reconnect_attempts=-1,
            reconnect_time_wait=1,
            connect_timeout=5,
            security=BaseSecurity(ssl_context=tls) if (tls := settings.nats_tls()) else None,
            logger=None,  # handlers log through structlog, with their context bound
            # Handlers decode bodies themselves, into the contract's types, and answer
            # malformed input with the contract's errors: FastStream must not parse JSON
            # first (input nested 3,000 deep made it fail before any handler, unanswered).
            decoder=_raw_body,
            middlewares=[
                NatsTelemetryMiddleware(tracer_provider=self.tracer_provider),
                prometheus_middleware(self.metrics.registry, self.name,
                                      [f for route in self.routing for f in route.filters]),
            ],
        )
        self.nc = None
        self.js = None
        self.pool = None
        self.consumers: list[BatchConsumer] = []
        self.loops: list[Callable[[], Awaitable[None]]] = []
        self.health: HealthServer | None = None
        self.ready = False
        self._micro = None
        for route in self.routing:
            self._subscribe(route)

    # -- what a service says --------------------------------------------------------

    async def setup(self) -> None:
        """Build the parts the routing table's handlers name."""

    async def batch_options(self, route: Route) -> dict:
        """Options of a batch route's consumer known only once connected (e.g. `ack_all`)."""
        return {}

    def handler(self, route: Route):
        """The route's handler, looked up when a message arrives (parts exist after setup,
        and a test may swap one)."""
        return lambda *args: resolve(self, route.handler)(*args)

    def _subscribe(self, route: Route) -> None:
        """A FastStream subscriber for each route but the batch and loop ones, which need
        the parts setup builds (`_add_batches_and_loops`)."""
        handle = self.handler(route)
        if route.kind is Kind.REQUEST:
            self.answer(route.subject, handle, route.description)
        elif route.kind is Kind.EVENT:
            if route.message is not None:
                handle = typed(route.message, handle)
            self.on_events(stream=route.stream, durable=route.durable, subject=route.subject,
                           handle=handle, park=self.parker(route.park),
                           description=route.description, ack_wait=route.ack_wait or 30.0)
        elif route.kind in (Kind.MESSAGE, Kind.BROADCAST):
            async def on_message(msg: NatsMessage) -> None:
                await handle(msg.raw_message)

            on_message.__name__ = route.handler.replace(".", "_")
            # A queue group: one copy takes each message; none: every copy does.
            queue = self.name if route.kind is Kind.MESSAGE else ""
            self.broker.subscriber(route.subject, queue=queue,
                                   title=f"{route.handler} {route.subject}",
                                   description=route.description)(on_message)

    async def _add_batches_and_loops(self) -> None:
        """The batch consumers and the loops of the table, once setup built their parts."""
        for route in self.routing:
            if route.kind is Kind.LOOP:
                self.loops.append(self.handler(route))
            elif route.kind is Kind.BATCH:
                options = {"idempotent": route.idempotent, "message": route.message,
                           **await self.batch_options(route)}
                self.consume(stream=route.stream, durable=route.durable,
                             filter_subjects=list(route.filters), handle=self.handler(route),
                             park=self.parker(route.park), **options)

    def answer(self, subject: str, handler: Answer, description: str) -> None:
        """Serve a request/reply subject; a handler that raises still answers `unavailable`."""

        async def reply(msg: NatsMessage) -> bytes:
            try:
                return await handler(msg.raw_message)
            except Exception:
                log.exception("request_failed", subject=subject)
                return encode(error_reply("unavailable", error_message("unavailable")))

        reply.__name__ = subject.replace(".", "_")
        self.broker.subscriber(
            subject, queue=self.name, max_workers=REQUEST_WORKERS, title=subject,
            description=description,
        )(reply)

    def on_events(
        self, *, stream: str, durable: str, subject: str, handle: MsgHandler, park: Parker,
        description: str, batch_size: int = 32, ack_wait: float = 30.0,
    ) -> None:
        """A durable JetStream subscriber whose messages are settled by `redelivery`."""
        max_deliver = self.settings.max_deliver

        async def on_event(msg: NatsMessage) -> None:
            await handle_with_redelivery(msg.raw_message, handle, park, max_deliver)

        on_event.__name__ = durable.replace("-", "_")
        self.broker.subscriber(
            subject,
            stream=JStream(stream, declare=False),
            durable=durable,
            pull_sub=PullSub(batch_size=batch_size, timeout=1.0),
            config=ConsumerConfig(
                max_deliver=max_deliver + 1, ack_wait=ack_wait, max_ack_pending=batch_size * 4
            ),
            ack_policy=AckPolicy.MANUAL,
            # FastStream defaults a pull subscription's inbox to _INBOX, not the connection's.
            inbox_prefix=(subjects.service_inbox_prefix(self.name) + ".").encode(),
            title=durable,
            description=description,
        )(on_event)

    def consume(
        self, *, stream: str, durable: str, filter_subjects: Sequence[str], handle: BatchHandler,
        park: Parker, batch_size: int | None = None, ack_wait: float = ACK_WAIT_SECONDS,
        ack_all: bool = False, idempotent: bool = False, message: type | None = None,
    ) -> BatchConsumer:
        consumer = BatchConsumer(
            self.js, stream=stream, durable=durable, filter_subjects=filter_subjects,
            handle=handle, park=park, batch_size=batch_size or self.settings.batch_size,
            max_deliver=self.settings.max_deliver, ack_wait=ack_wait,
            metrics=self.metrics, ack_all=ack_all, idempotent=idempotent, message=message,
        )
        self.consumers.append(consumer)
        return consumer

    def parker(self, subject: str) -> Parker:
        async def park(msg: Msg, reason: str) -> None:
            await natsio.park_message(self.js, msg, reason, subject)

        return park

    # -- life -----------------------------------------------------------------------

    async def start(self) -> None:
        s = self.settings
        self.nc = await self.broker.connect()
        survive_abandoned_flushes(self.nc)  # FastStream's connection, not natsio's
        self.js = self.nc.jetstream()
        await natsio.ensure_streams(self.js, replicas=s.stream_replicas)
        await natsio.enforce_durability(self.nc, self.js, s.nats_monitor_url, s.strict_durability)
        if self.uses_database:
            self.pool = await pg.open_pool(s.database_url, self.name, self.pool_size)
        await self.setup()
        await self._add_batches_and_loops()
        for consumer in self.consumers:
            await consumer.start()
        # Subscribes to the request subjects only now, when everything can answer.
        await self.broker.start()
        # The side port first, so that service discovery can say where it is.
        self.health = HealthServer(s.http_host, s.http_port, self.metrics.registry,
                                   self._alive, self._ready)
        await self.health.start()
        self._micro = await nats.micro.add_service(
            self.nc, name=self.name, version=VERSION, description=self.description,
            metadata=side_port_metadata(self.health),
        )
        # Ready means a request is answered: the server must hold those subscriptions before
        # anyone is told (a request sent the moment after start found no responders).
        await self.nc.flush()
        self.ready = True
        log.info("ready", health=self.health.url)

    async def run(self) -> None:
        await asyncio.gather(
            *(c.run() for c in self.consumers), *(loop() for loop in self.loops),
            self._refresh_lag(),
        )

    async def quiesce(self) -> None:
        """Stop taking work (before the loops are cancelled): batch consumers hand back
        what they hold, so another copy takes it at once."""
        self.ready = False
        await asyncio.gather(*(c.stop(timeout=QUIESCE_SECONDS) for c in self.consumers))

    async def stop(self) -> None:
        self.ready = False
        if self.health is not None:
            await self.health.stop()
        if self._micro is not None:
            with contextlib.suppress(Exception):
                await self._micro.stop()
        # Stop the subscribers, then close (not drain) the connection: unacknowledged
        # work is redelivered to whichever copy runs next, and a drain waits out its
        # timeout on pull subscriptions whose fetches were cancelled.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(BrokerUsecase.stop(self.broker), 5)
        for consumer in self.consumers:
            await consumer.close()  # when quiesce was not called first
        if self.nc is not None and not self.nc.is_closed:
            await self.nc.close()
        if self.pool is not None:
            await self.pool.close()
        self.tracer_provider.shutdown()

    async def _alive(self) -> dict[str, bool]:
        return {"nats": self.nc is not None and self.nc.is_connected}

    async def _ready(self) -> dict[str, bool]:
        checks = {"started": self.ready, **(await self._alive())}
        if self.pool is not None:
            checks["postgres"] = await pg.answers(self.pool)
        return checks

    async def _refresh_lag(self) -> None:
        """Consumer lag per durable, for /metrics."""
        while True:
            for stream, durable in self._durables():
                try:
                    info = await self.js.consumer_info(stream, durable)
                except Exception:
                    continue
                self.metrics.consumer_pending.labels(stream, durable).set(info.num_pending or 0)
                self.metrics.consumer_ack_pending.labels(stream, durable).set(
                    info.num_ack_pending or 0
                )
            await asyncio.sleep(LAG_REFRESH_SECONDS)

    def _durables(self) -> list[tuple[str, str]]:
        found = [(c.stream, c.durable) for c in self.consumers]
        for sub in self.broker.subscribers:
            stream = getattr(sub, "stream", None)
            durable = getattr(getattr(sub, "config", None), "durable_name", None)
            if stream is not None and durable:
                found.append((stream.name, durable))
        return found
