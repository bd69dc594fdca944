"""The life every service shares: connect, check durability, build, consume, serve,
stop. A service says what it answers and consumes in its routing table (`routes.py`,
`seedline_platform.routing`); its `bootstrap(settings, ports)` builds the parts whose
methods the table names, from ports that are real adapters here and fakes in tests.

The edges are FastStream (DESIGN.md rule 9): request/reply APIs and low-rate
event subscribers are FastStream subscribers, which gives typed routing, the
AsyncAPI document generated from this code, and the Prometheus and OpenTelemetry
middlewares. High-rate stream consumers that need batch fetches, windows of
pending acks and ordered batches use ``BatchConsumer`` on the same connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
from collections.abc import Awaitable, Callable

import msgspec
import nats.micro
from faststream import AckPolicy
from faststream.security import BaseSecurity
# FastStream's type for a handler's message, a Context field: only the broker's own
# specification reads it (as no part of the payload). Nothing is injected (apply_types off):
# each handler is called with its message, what the broker's decoder returns.
from faststream.nats import ConsumerConfig, JStream, NatsBroker, NatsMessage, PullSub
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from seedline_contracts import CONTRACT_VERSION, subjects
from seedline_contracts.channels import Api
from seedline_contracts.codec import decoder, encode
from seedline_contracts.errors import ErrorReply, error_reply
from seedline_core.notices import error_message

from . import natsio, pg
from .consumer import FETCH_WAIT_SECONDS, BatchConsumer, BatchHandler, Consumption, Parker
from .faststream_workarounds import stop_subscribers
from .health_http import HealthServer
from .logging import get_logger
from .metrics_labels import prometheus_middleware
from .nats_workarounds import fetch_queued_without_a_task, survive_abandoned_flushes
from .observability import ServiceMetrics, tracer_provider
from .redelivery import MsgHandler, handle_with_redelivery, typed
from .routing import Kind, Route, bind, message_name
from .sending import sending_as
from .settings import Settings

log = get_logger(__name__)

VERSION = f"{CONTRACT_VERSION}.0"  # service discovery wants x.y.z
# Requests answered at once per API: an open waits for its machine, a read may
# wait for min_seq; a few hundred waiting requests cost only their tasks.
REQUEST_WORKERS = 256
# A stopping consumer withdraws its waiting fetch and hands back what one brought.
QUIESCE_SECONDS = 2.0


def side_port_metadata(health: HealthServer) -> dict[str, str]:
    """What `seedline status` shows of a copy: where its side port is, and which process."""
    return {"http_url": health.url or "", "pid": str(os.getpid()),
            "host": socket.gethostname()}


async def _the_message(msg: NatsMessage) -> NatsMessage:
    return msg


def no_routes(settings: Settings) -> tuple[Route, ...]:
    return ()


def in_route(route: Route, handle):
    """The handler, with what it sends checked against its row."""

    async def checked(*args):
        with sending_as(route):
            return await handle(*args)

    return checked


async def answer(route: Route, handle, data: bytes,
                 read: Callable[[bytes], object] | None = None) -> bytes:
    """One request through the edge of its row: read into its type (or refused), handled
    with its sends checked, the answer encoded; a handler that raises answers
    `unavailable`."""
    read = read or route.decode or _request_reader(route.api)
    with sending_as(route):
        request = read(data)
        if isinstance(request, ErrorReply):
            return encode(request)
        try:
            return encode(await handle(request))
        except Exception:
            log.exception("request_failed", subject=route.subject)
            return encode(error_reply("unavailable", error_message("unavailable")))


def parts_of(parts: object) -> list[object]:
    """The parts a bootstrap built, in the order it lists them."""
    return [getattr(parts, f.name) for f in dataclasses.fields(parts)]


def _request_reader(api: Api) -> Callable[[bytes], object]:
    """A body read into the API's request type, or the contract's refusal of it."""
    read = decoder(api.request).decode

    def request_of(data: bytes) -> object:
        try:
            return read(data)
        except (msgspec.ValidationError, RecursionError) as exc:
            problem: object = exc
        except msgspec.DecodeError as exc:
            if api.not_json:
                return error_reply("not_json", error_message("not_json"))
            problem = exc
        if isinstance(problem, RecursionError):
            problem = "the JSON nests too deeply to read"
        return error_reply("invalid_request", f"The {api.title} request is not valid: {problem}.")

    return request_of


class ServiceApp:
    name = "seedline"
    description = "A Seedline service."
    uses_database = True
    pool_size = 8  # Postgres connections of one copy
    # Connections for statements that find rows by key alone (pg.KEYED_OPTIONS: the folds'
    # statements, planned once); 0: none, they go on the pool.
    keyed_pool_size = 0
    # The service's routing table: settings -> its routes (each service's routes.py).
    route_table = staticmethod(no_routes)
    # Durable consumers (stream, name) an earlier release of this service read and this one
    # does not: removed at start, so the server neither keeps nor writes state for them.
    retired_durables: tuple[tuple[str, str], ...] = ()

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
            # The edge decodes bodies itself, into the contract's types, and answers
            # malformed input with the contract's errors: FastStream must not parse JSON
            # first (input nested 3,000 deep made it fail before any handler, unanswered).
            # Each handler is given its message as it came, with no dependency injection:
            # fast_depends resolving a handler's one argument on every message was a sixth
            # of the seed-composer's CPU in a storm of wakes (bench.durable_work, py-spy).
            decoder=_the_message,
            apply_types=False,
            middlewares=[
                NatsTelemetryMiddleware(tracer_provider=self.tracer_provider),
                prometheus_middleware(self.metrics.registry, self.name,
                                      [f for route in self.routing for f in route.filters]),
            ],
        )
        self.nc = None
        self.js = None
        self.pool = None
        self.keyed_pool = None
        self.parts = None
        self.consumers: list[BatchConsumer] = []
        self.loops: list[Callable[[], Awaitable[None]]] = []
        self.health: HealthServer | None = None
        self.ready = False
        self._micro = None
        # Each row's handler (by the function its row names), bound at start; a test may hold
        # one here, as a SIGSTOP of the process would.
        self.handlers: dict[Callable, Callable] = {}
        self._subscribe()

    # -- what a service says --------------------------------------------------------

    async def build(self):
        """The service's parts, from its real ports (each service's bootstrap.py)."""
        raise NotImplementedError

    async def batch_options(self, route: Route) -> dict:
        """Options of a batch route's consumer known only once connected (e.g. `ack_all`),
        and for a projection that stores how far it applied, `applied`: that offset's
        reader, from which the consumer starts and keeps its own state in memory
        (consumer.py)."""
        return {}

    # -- the edge: each row subscribed, its messages typed, its sends checked -------------

    def _subscribe(self) -> None:
        """A FastStream subscriber for each row that is one, made with the app (so the
        broker's own specification lists them before anything starts). Each calls its
        handler as bound when the service starts (`_bind`)."""
        for route in self.routing:
            handle = self._bound(route)
            if route.kind is Kind.REQUEST:
                self._answer(route, handle)
            elif route.kind is Kind.EVENT:
                self._on_events(route, typed(route.message, handle) if route.message else handle)
            elif route.kind in (Kind.MESSAGE, Kind.BROADCAST):
                self._on_messages(route, handle)

    def _bound(self, route: Route):
        """The row's handler as bound when the service started (`handlers`)."""

        async def handle(*args):
            return await self.handlers[route.handler](*args)

        return handle

    async def _bind(self) -> None:
        """Each row's handler bound to the part bootstrap built; the batch consumers and
        the loops started from their rows."""
        parts = parts_of(self.parts)
        self.handlers = {route.handler: bind(route.handler, parts) for route in self.routing}
        for route in self.routing:
            handle = self._bound(route)
            if route.kind is Kind.LOOP:
                self.loops.append(in_route(route, handle))
            elif route.kind is Kind.BATCH:
                self._consume(route, in_route(route, handle), await self.batch_options(route))

    def _answer(self, route: Route, handle) -> None:
        """Serve a request/reply API: the body read into its request type (or refused with
        the contract's error), the handler's answer encoded; a handler that raises still
        answers `unavailable`."""
        api = route.api
        read = route.decode or _request_reader(api)

        async def reply(msg: NatsMessage) -> bytes:
            return await answer(route, handle, msg.raw_message.data, read)

        reply.__name__ = api.address.replace(".", "_")
        self.broker.subscriber(
            api.address, queue=self.name, max_workers=REQUEST_WORKERS, title=api.address,
            description=route.description,
        )(reply)

    def _on_messages(self, route: Route, handle) -> None:
        """Core NATS messages, typed when the row names a type: what cannot be read is
        logged and dropped (there is no stream to park it from)."""
        read = decoder(route.message).decode if route.message else None

        async def on_message(msg: NatsMessage) -> None:
            raw = msg.raw_message
            with sending_as(route):
                if read is None:
                    await handle(raw)
                    return
                try:
                    message = read(raw.data)
                except (msgspec.MsgspecError, RecursionError):
                    log.warning("message_unreadable", subject=raw.subject,
                                takes=message_name(route.message))
                    return
                await handle(message, raw)

        on_message.__name__ = route.handler.__name__
        # A queue group: one copy takes each message; none: every copy does.
        queue = self.name if route.kind is Kind.MESSAGE else ""
        at_once = {"max_workers": route.workers} if route.workers > 1 else {}
        # Nothing is answered: a message heard on a stream's subject carries the reply
        # subject its publisher waits on for the stream's acknowledgement, and FastStream
        # would answer it (an empty message from every copy, for every event heard).
        self.broker.subscriber(route.subject, queue=queue, no_reply=True,
                               title=f"{route.handler_name} {route.subject}",
                               description=route.description, **at_once)(on_message)

    def _on_events(self, route: Route, handle: MsgHandler) -> None:
        self.on_events(stream=route.stream, durable=route.durable, subject=route.subject,
                       handle=in_route(route, handle), park=self.parker(route.park),
                       description=route.description, ack_wait=route.ack_wait or 30.0)

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
            pull_sub=PullSub(batch_size=batch_size, timeout=FETCH_WAIT_SECONDS),
            config=ConsumerConfig(
                max_deliver=max_deliver + 1, ack_wait=ack_wait, max_ack_pending=batch_size * 4
            ),
            ack_policy=AckPolicy.MANUAL,
            # FastStream defaults a pull subscription's inbox to _INBOX, not the connection's.
            inbox_prefix=(subjects.service_inbox_prefix(self.name) + ".").encode(),
            title=durable,
            description=description,
        )(on_event)

    def _consume(self, route: Route, handle: BatchHandler, options: dict) -> None:
        """A batch row's consumer, as its row says (`options`: what only the connected
        service knows, `batch_options`)."""
        # A projection that skips what it applied settles a batch with one ack (AckPolicy.ALL):
        # a batch that follows another copy's folds that copy's messages first (consumer.py),
        # so the ack never settles one nobody applied.
        options = dict(options)
        applied = options.pop("applied", None)
        how = Consumption(
            stream=route.stream, durable=route.durable, filter_subjects=route.filters,
            batch_size=self.settings.batch_size, max_deliver=self.settings.max_deliver,
            message=route.message,
            **{"idempotent": route.idempotent, "ack_all": route.idempotent, **options})
        self.consumers.append(BatchConsumer(self.js, how, handle=handle,
                                            park=self.parker(route.park), metrics=self.metrics,
                                            applied=applied))

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
        for stream, durable in self.retired_durables:
            with contextlib.suppress(NotFoundError):
                await self.js.delete_consumer(stream, durable)
        if self.uses_database:
            self.pool = await pg.open_pool(s.database_url, self.name, self.pool_size)
            if self.keyed_pool_size:
                self.keyed_pool = await pg.open_pool(s.database_url, self.name,
                                                     self.keyed_pool_size, keyed=True)
        self.parts = await self.build()
        await self._bind()
        for consumer in self.consumers:
            await consumer.start()
        # Subscribes to the request subjects only now, when everything can answer.
        await self.broker.start()
        for subscriber in self.broker.subscribers:  # the event routes' pull subscriptions
            fetch_queued_without_a_task(getattr(subscriber, "subscription", None))
        # The side port first, so that service discovery can say where it is.
        self.health = HealthServer(s.http_host, s.http_port, self.metrics.registry,
                                   self._alive, self._ready, before_metrics=self._read_lag)
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
            await asyncio.wait_for(stop_subscribers(self.broker), 5)
        for consumer in self.consumers:
            await consumer.close()  # when quiesce was not called first
        if self.nc is not None and not self.nc.is_closed:
            await self.nc.close()
        for pool in (self.keyed_pool, self.pool):
            if pool is not None:
                await pool.close()
        self.tracer_provider.shutdown()

    async def _alive(self) -> dict[str, bool]:
        return {"nats": self.nc is not None and self.nc.is_connected}

    async def _ready(self) -> dict[str, bool]:
        checks = {"started": self.ready, **(await self._alive())}
        if self.pool is not None:
            checks["postgres"] = await pg.answers(self.pool)
        return checks

    async def _read_lag(self) -> None:
        """Consumer lag per durable, read as /metrics is asked for: a service nobody
        scrapes asks nats-server nothing."""
        async def read(stream: str, durable: str) -> None:
            try:
                info = await self.js.consumer_info(stream, durable)
            except Exception:
                return  # the gauge keeps the last value read
            self.metrics.consumer_pending.labels(stream, durable).set(info.num_pending or 0)
            self.metrics.consumer_ack_pending.labels(stream, durable).set(
                info.num_ack_pending or 0)
        await asyncio.gather(*(read(stream, durable) for stream, durable in self._durables()))

    def _durables(self) -> list[tuple[str, str]]:
        found = [(c.stream, c.durable) for c in self.consumers]
        for sub in self.broker.subscribers:
            stream = getattr(sub, "stream", None)
            durable = getattr(getattr(sub, "config", None), "durable_name", None)
            if stream is not None and durable:
                found.append((stream.name, durable))
        return found
