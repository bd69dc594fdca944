"""The one way Seedline reads a stream without a durable consumer: a range in order
(catch-up, rebuilds, scrubs), what is stored now (a conversation's events, stored
notices), what comes next (notices followed), and a KV bucket's live values, once
(`newest_values`) or watched (`BucketWatch`).

Each is an ephemeral consumer with no acks, in memory, removed when idle (`reader`):
the read leaves nothing behind on the server and costs no fsync.
"""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import AsyncIterator, Sequence

from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import NotFoundError, ServiceUnavailableError

from .logging import get_logger
from .nats_workarounds import fetch_queued_without_a_task
from .outage import NATS_AWAY, StreamsUnavailable

log = get_logger(__name__)

# A cluster between metadata leaders answers a consumer create, or a fetch, with nothing
# (a timeout) or a 503 for a few seconds, as after losing a server; a reader then tries again.
CREATE_ATTEMPTS = 4
CREATE_BACKOFF = 0.5


async def last_seq(js: JetStreamContext, stream: str) -> int:
    """Where the stream ends now; StreamsUnavailable while it cannot say (no leader)."""
    try:
        info = await js.stream_info(stream)
    except NATS_AWAY as exc:
        raise StreamsUnavailable(f"{stream}'s end: {type(exc).__name__}") from exc
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
    async with reader(js, stream, subject, deliver_policy=js_api.DeliverPolicy.BY_START_SEQUENCE,
                       opt_start_seq=max(1, start_seq)) as sub:
        unavailable, last = 0, start_seq - 1
        while True:
            try:
                msgs = await _fetch_or_end(js, sub, stream, subject, batch, last, end_seq)
                if not msgs:
                    return  # the range ended in a gap (deleted messages)
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
            last = msgs[-1].metadata.sequence.stream
            if last >= end_seq:
                return


# How many fetches in a row a replay makes of messages the stream still holds for it
# before it gives up (StreamsUnavailable): a server too slow to answer for this long.
FETCH_ATTEMPTS = 5
FETCH_SECONDS = 2.0


async def _fetch_or_end(js: JetStreamContext, sub: JetStreamContext.PullSubscription,
                        stream: str, subject: str, batch: int, last: int, end: int
                        ) -> list[Msg]:
    """A replay's next messages after stream seq `last`, or none when the stream holds no
    more of them up to `end`. A fetch that times out does not say so by itself: a server
    slow under load lets it time out (nats-py then raises asyncio's TimeoutError, not its
    own) with messages still to come, or one it sent is still on its way; so the stream
    is asked for the next message on the subject, and the fetch made again while there is
    one within the range."""
    for _ in range(FETCH_ATTEMPTS):
        try:
            return await sub.fetch(batch, timeout=FETCH_SECONDS)
        except TimeoutError:  # nats-py's is one
            try:
                found = await js.get_msg(stream, seq=last + 1, subject=subject, next=True)
            except NotFoundError:
                return []
            if found.seq is None or found.seq > end:
                return []
    raise StreamsUnavailable(f"{stream}: messages up to {end} not delivered in "
                             f"{FETCH_ATTEMPTS * FETCH_SECONDS:.0f} s")


async def newest_values(js: JetStreamContext, bucket: str, timeout: float = 5.0
                        ) -> AsyncIterator[tuple[str, Msg]]:
    """(key, message) for every key of a KV bucket holding a value now, each key's newest
    message counted before any is delivered. A watch or `keys()` can end before values
    already on their way (nats.py #842), and then a listing of the machines online says
    there are none."""
    prefix = f"$KV.{bucket}."
    async for msg in stored(js, f"KV_{bucket}", f"{prefix}>", timeout=timeout,
                            deliver_policy=js_api.DeliverPolicy.LAST_PER_SUBJECT):
        headers = msg.headers or {}
        # A delete, a purge, or a marker the server left (TTL, max age).
        if msg.data and not ({"KV-Operation", "Nats-Marker-Reason"} & headers.keys()):
            yield msg.subject[len(prefix):], msg


async def stored(js: JetStreamContext, stream: str, subject: str, *, limit: int | None = None,
                 timeout: float = 5.0, **policy) -> AsyncIterator[Msg]:
    """The messages on `subject` stored when the read starts (counted before any is
    delivered, so the read cannot end early), oldest first, at most `limit`. `policy` is
    the consumer's deliver policy (default: all)."""
    async with reader(js, stream, subject, **policy) as sub:
        pending = (await sub.consumer_info()).num_pending
        taken = 0
        while pending > 0 and (limit is None or taken < limit):
            want = min(pending, 256) if limit is None else min(pending, 256, limit - taken)
            try:
                msgs = await sub.fetch(want, timeout=timeout)
            except TimeoutError:  # nats-py's, or asyncio's when the answer came at the deadline
                return  # what was counted went away meanwhile (expired, deleted)
            for msg in msgs:
                yield msg
            taken += len(msgs)
            pending = msgs[-1].metadata.num_pending


# How long a watch's fetch waits for a change before it asks again: a pull lost with a
# server that restarted is noticed (the next fetch fails) within this.
WATCH_TICK_SECONDS = 5.0


class WatchBroken(Exception):
    """A watch can no longer vouch that it delivered every change: start a new one."""


@dataclass(frozen=True)
class KvChange:
    key: str
    value: bytes
    revision: int  # the message's stream sequence, as a KV entry's revision
    operation: str  # "PUT", or "DEL" / "PURGE" for a key that went


class BucketWatch:
    """Every key's newest value in a KV bucket, then each put and delete as it lands.

    nats-py's `KeyValue.watch` is an ordered push consumer whose flow-control check wakes
    four times a second for as long as it lives: about 0.8 ms of CPU a second per watch,
    which every idle service paid once per watch (measured with ten machines online). This
    is the same read as an ephemeral pull consumer, asked again every `tick` seconds when
    nothing comes. It does not mend what it cannot vouch for: a message it did not get (the
    consumer's delivery count skipped) or a consumer gone with its server raises, and the
    caller starts a new watch, which reads every key's newest value again.
    """

    def __init__(self, js: JetStreamContext, bucket: str,
                 tick: float = WATCH_TICK_SECONDS) -> None:
        self._js = js
        self._prefix = f"$KV.{bucket}."
        self._stream = f"KV_{bucket}"
        self._tick = tick
        self._sub: JetStreamContext.PullSubscription | None = None

    async def start(self) -> None:
        """Make the consumer: no change after this returns is missed."""
        self._sub = await _subscribe(self._js, f"{self._prefix}>", self._stream, _reader_config(
            deliver_policy=js_api.DeliverPolicy.LAST_PER_SUBJECT))

    async def stop(self) -> None:
        if self._sub is not None:
            sub, self._sub = self._sub, None
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def changes(self) -> AsyncIterator[KvChange]:
        if self._sub is None:
            await self.start()
        delivered, pending = 0, 0
        while True:
            try:
                # One at a time while waiting (a batch fetch waits to fill its batch).
                msgs = await self._sub.fetch(min(pending, FOLLOW_BATCH) or 1,
                                             timeout=self._tick)
            except TimeoutError:  # nats-py's, or asyncio's when the server answered late
                pending = 0
                continue
            for msg in msgs:
                delivered += 1
                if msg.metadata.sequence.consumer != delivered:
                    raise WatchBroken(f"{self._stream}: a change was not delivered")
                change = self._change(msg)
                if change is not None:
                    yield change
            pending = msgs[-1].metadata.num_pending

    def _change(self, msg: Msg) -> KvChange | None:
        headers = msg.headers or {}
        if "Nats-Marker-Reason" in headers:
            return None  # the server's note of a key it removed (TTL): not a delete
        return KvChange(msg.subject[len(self._prefix):], msg.data or b"",
                        msg.metadata.sequence.stream, headers.get("KV-Operation", "PUT"))


FOLLOW_BATCH = 256


async def follow(js: JetStreamContext, stream: str, subject: str, *,
                 after_seq: int | None = None, tick: float = 2.0
                 ) -> AsyncIterator[Msg | None]:
    """The messages on `subject` after `after_seq` (or from now), then each as it comes;
    None every `tick` seconds without one, so the caller can look around. The first value
    is None once the consumer exists: nothing stored after that is missed."""
    policy = ({"deliver_policy": js_api.DeliverPolicy.BY_START_SEQUENCE,
               "opt_start_seq": after_seq + 1} if after_seq is not None
              else {"deliver_policy": js_api.DeliverPolicy.NEW})
    async with reader(js, stream, subject, **policy) as sub:
        yield None
        pending = 0
        while True:
            # One at a time while waiting (a batch fetch waits to fill its batch), then
            # what is already stored in batches.
            try:
                msgs = await sub.fetch(min(pending, FOLLOW_BATCH) or 1, timeout=tick)
            except TimeoutError:  # nats-py's, or asyncio's when the server answered late
                pending = 0
                yield None
                continue
            pending = msgs[-1].metadata.num_pending
            for msg in msgs:
                yield msg


@asynccontextmanager
async def reader(js: JetStreamContext, stream: str, subject: str, **policy):
    """The ephemeral pull consumer every read uses, unsubscribed when it ends; `policy` is
    its deliver policy (default: all)."""
    sub = await _subscribe(js, subject, stream, _reader_config(**policy))
    try:
        yield sub
    finally:
        try:
            await sub.unsubscribe()
        except Exception:
            pass


def _reader_config(**policy) -> js_api.ConsumerConfig:
    policy.setdefault("deliver_policy", js_api.DeliverPolicy.ALL)
    return js_api.ConsumerConfig(ack_policy=js_api.AckPolicy.NONE, inactive_threshold=30.0,
                                 mem_storage=True, max_ack_pending=-1, **policy)


async def _subscribe(js: JetStreamContext, subject: str, stream: str,
                     config: js_api.ConsumerConfig) -> JetStreamContext.PullSubscription:
    for attempt in range(1, CREATE_ATTEMPTS):
        try:
            return fetch_queued_without_a_task(
                await js.pull_subscribe(subject, stream=stream, config=config))
        except (NatsTimeout, NoRespondersError, ServiceUnavailableError):
            # A create that timed out may still have made its consumer: it is ephemeral and
            # goes after inactive_threshold; the next attempt makes one with a new name.
            await asyncio.sleep(CREATE_BACKOFF * attempt)
    # The last attempt's error is the caller's.
    return fetch_queued_without_a_task(
        await js.pull_subscribe(subject, stream=stream, config=config))
