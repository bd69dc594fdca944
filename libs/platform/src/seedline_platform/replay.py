"""Read a stream in order, for catch-up, rebuilds and scrubs; and a KV bucket's live values.

An ephemeral consumer with no acks, in memory, removed when idle: the read
leaves nothing behind on the server and costs no fsync.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator, Sequence

from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import ServiceUnavailableError

from .logging import get_logger

log = get_logger(__name__)

# A cluster between metadata leaders answers a consumer create, or a fetch, with nothing
# (a timeout) or a 503 for a few seconds, as after losing a server; a reader then tries again.
CREATE_ATTEMPTS = 4
CREATE_BACKOFF = 0.5


async def last_seq(js: JetStreamContext, stream: str) -> int:
    info = await js.stream_info(stream)
    return int(info.state.last_seq)


async def replay(
    js: JetStreamContext,
    stream: str,
    subject: str,
    start_seq: int,
    end_seq: int,
    batch: int = 1000,
) -> AsyncIterator[Sequence[Msg]]:
    """Yield batches of messages with start_seq <= seq <= end_seq, in order."""
    if end_seq < start_seq:
        return
    async with _reader(js, stream, subject, deliver_policy=js_api.DeliverPolicy.BY_START_SEQUENCE,
                       opt_start_seq=max(1, start_seq)) as sub:
        unavailable = 0
        while True:
            try:
                msgs = await sub.fetch(batch, timeout=2.0)
            except NatsTimeout:
                # Nothing more is coming: the range ended in a gap (deleted messages).
                return
            except ServiceUnavailableError:
                # The reader's consumer is electing a leader (a cluster that lost a server).
                unavailable += 1
                if unavailable >= CREATE_ATTEMPTS:
                    raise
                await asyncio.sleep(CREATE_BACKOFF * unavailable)
                continue
            wanted = [m for m in msgs if m.metadata.sequence.stream <= end_seq]
            if wanted:
                yield wanted
            if msgs[-1].metadata.sequence.stream >= end_seq:
                return


async def newest_values(js: JetStreamContext, bucket: str, timeout: float = 5.0
                        ) -> AsyncIterator[tuple[str, Msg]]:
    """(key, message) for every key of a KV bucket holding a value now, each key's newest
    message counted before any is delivered. A watch or `keys()` can end before values
    already on their way (nats.py #842), and then a listing of the machines online says
    there are none."""
    prefix = f"$KV.{bucket}."
    async with _reader(js, f"KV_{bucket}", f"{prefix}>",
                       deliver_policy=js_api.DeliverPolicy.LAST_PER_SUBJECT) as sub:
        pending = (await sub.consumer_info()).num_pending
        while pending > 0:
            try:
                msgs = await sub.fetch(min(pending, 256), timeout=timeout)
            except NatsTimeout:
                return  # keys expired meanwhile: what was counted is no longer there
            for msg in msgs:
                headers = msg.headers or {}
                # A delete, a purge, or a marker the server left (TTL, max age).
                if msg.data and not ({"KV-Operation", "Nats-Marker-Reason"} & headers.keys()):
                    yield msg.subject[len(prefix):], msg
            pending = msgs[-1].metadata.num_pending


@asynccontextmanager
async def _reader(js: JetStreamContext, stream: str, subject: str, **policy):
    """The ephemeral pull consumer every read uses, unsubscribed when it ends."""
    config = js_api.ConsumerConfig(
        ack_policy=js_api.AckPolicy.NONE,
        inactive_threshold=30.0,
        mem_storage=True,
        max_ack_pending=-1,
        **policy,
    )
    sub = await _subscribe(js, subject, stream, config)
    try:
        yield sub
    finally:
        try:
            await sub.unsubscribe()
        except Exception:
            pass


async def _subscribe(js: JetStreamContext, subject: str, stream: str,
                     config: js_api.ConsumerConfig) -> JetStreamContext.PullSubscription:
    for attempt in range(1, CREATE_ATTEMPTS):
        try:
            return await js.pull_subscribe(subject, stream=stream, config=config)
        except (NatsTimeout, NoRespondersError, ServiceUnavailableError):
            # A create that timed out may still have made its consumer: it is ephemeral and
            # goes after inactive_threshold; the next attempt makes one with a new name.
            await asyncio.sleep(CREATE_BACKOFF * attempt)
    # The last attempt's error is the caller's.
    return await js.pull_subscribe(subject, stream=stream, config=config)
