"""A durable pull consumer that hands batches to a handler and acks only after it.

Rules it keeps (DESIGN.md rules 2 and 4; the retry and park policy is retry_policy.py's):
- explicit acks and a bounded max_deliver on every consumer;
- ``max_ack_pending`` equals the batch size, so at most one batch is in flight
  across every copy of a service and messages are applied in stream order even
  when a copy dies mid-batch (its batch is redelivered before anything newer);
- an outage (Postgres or NATS away) is waited out, never counted against the
  message: the batch is retried in place and its lease extended;
- a message that keeps failing for any other reason is parked with a reason
  after ``max_deliver`` attempts, and the messages behind it go on;
- for an idempotent handler (a projection that skips what it has applied), what
  a copy that died was holding is read from the stream at once, not waited for; while the
  stream cannot be read (a cluster electing its leader, a server paused) the batch waits,
  leased, and is never handled ahead of what another copy holds;
- a consumer that names its message type decodes each payload at the edge: its handler
  is given a `Batch` of (message, Msg) pairs, and a payload that is not that type is
  parked on its first delivery (no redelivery makes it readable);
- a consumer given its projection's stored offset (`applied`) takes that offset as the
  truth (acks are flow control): where the durable has acknowledged past it (the rows and
  offset were reset, or put back from an older backup), the durable is made again from
  just after it, so the projection refills from the stream;
- such a durable keeps its state in the server's memory (`mem_storage`), not on its disk:
  the offset, committed with the rows, says where it stands, and under `sync_interval:
  always` every state write is an fsync. A server that restarts has lost it: the consumer
  makes it again from just after the stored offset and reads on;
- a pull request waiting when the connection is lost is gone with it (a server that
  restarted never heard of it): on reconnecting the consumer asks again at once, not when
  the lost request would have expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Sequence, TypeVar

import msgspec
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import NotFoundError, ServiceUnavailableError

from seedline_contracts.codec import decoder

from .logging import get_logger
from .nats_workarounds import connection_of, fetch_queued_without_a_task, on_reconnect
from .outage import is_outage
from .replay import replay
from .subject_match import subject_matches
from .retry_policy import failure_reason, gives_up, outage_pause, unreadable_reason, worn_out
from .tasks import cancel_and_wait

log = get_logger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Batch(Generic[T]):
    """What the handler of a typed batch consumer is given."""

    items: list[tuple[T, Msg]]  # the readable messages, decoded, in stream order
    # The stream seq the batch ends at, a parked message's included: a projection's
    # offset moves past what it will never apply, so a wait for that seq ends.
    last_seq: int
    # The consumer had more to deliver when the batch's last message came (its
    # num_pending): it is not drained before the next batch (Watermark.advance).
    more: bool = False


BatchHandler = Callable[[Any], Awaitable[None]]  # Sequence[Msg], or a Batch when typed
# How long a batch handed to a copy stays its own without word from it. A copy that dies
# holding a batch delays that batch (and, to keep order, what follows it) this long; a copy
# still working tells the server so every third of it, however long the work takes.
ACK_WAIT_SECONDS = 6.0
Parker = Callable[[Msg, str], Awaitable[None]]
# How long one pull request waits on an idle stream. A message returns it at once, and a
# stop withdraws it (the server drops a request nobody listens to), so a long one costs no
# latency and keeps an idle consumer from asking several times a second.
FETCH_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class Consumption:
    """What a batch consumer reads and how it settles it."""

    stream: str
    durable: str
    filter_subjects: tuple[str, ...]
    batch_size: int = 256
    max_deliver: int = 5
    ack_wait: float = ACK_WAIT_SECONDS
    fetch_wait: float = FETCH_WAIT_SECONDS
    # AckPolicy.ALL: one ack settles the whole batch (the stream keeps its messages by
    # age, so an ack removes nothing and costs one write, not one per message).
    ack_all: bool = False
    # A handler that treats an applied message as a no-op can be handed, from the stream,
    # what a dead copy held: the server's redelivery later changes nothing.
    idempotent: bool = False
    # The contract type each payload is decoded into (None: the handler takes raw Msgs).
    message: type | None = None


async def consumer_drained(js: JetStreamContext, stream: str, durable: str) -> int | None:
    """Where a durable consumer stands when it has nothing left: every message it takes that
    the stream holds now was delivered and settled (by any copy), the last of them at the
    stream seq returned (0: none yet). None when it has something left or cannot say."""
    try:
        info = await js.consumer_info(stream, durable)
    except Exception as exc:
        log.debug("consumer_info_failed", durable=durable, error=str(exc) or type(exc).__name__)
        return None
    if info.num_pending or info.num_ack_pending:
        return None
    return (info.delivered.stream_seq or 0) if info.delivered else 0


class BatchConsumer:
    def __init__(
        self, js: JetStreamContext, how: Consumption, *, handle: BatchHandler, park: Parker,
        metrics=None, applied: Callable[[], Awaitable[int]] | None = None,
    ) -> None:
        self._js = js
        self.stream = how.stream
        self.durable = how.durable
        self._filters = list(how.filter_subjects)
        self._handle = handle
        self._park = park
        self._batch_size = how.batch_size
        self._max_deliver = how.max_deliver
        self._ack_wait = how.ack_wait
        self._fetch_wait = how.fetch_wait
        self._ack_all = how.ack_all
        self._idempotent = how.idempotent
        self._message = how.message
        self._decode = decoder(how.message).decode if how.message is not None else None
        self._applied = applied
        self._batch_seconds = (
            None if metrics is None else metrics.batch_seconds.labels(how.stream, how.durable)
        )
        self._sub = None
        self._stopping = False
        self._stop_asked = asyncio.Event()
        self._reconnected = asyncio.Event()
        self._forget_reconnects: Callable[[], None] | None = None
        self._finished = asyncio.Event()
        # Consumer sequence of the last delivery this copy received: a gap means
        # deliveries went elsewhere (a copy that died, or a sibling copy).
        self._last_delivery: int | None = None

    def consumer_config(self) -> js_api.ConsumerConfig:
        config = js_api.ConsumerConfig(
            durable_name=self.durable,
            ack_policy=js_api.AckPolicy.ALL if self._ack_all else js_api.AckPolicy.EXPLICIT,
            deliver_policy=js_api.DeliverPolicy.ALL,
            max_deliver=self._max_deliver + 1,
            ack_wait=self._ack_wait,
            max_ack_pending=self._batch_size,
            max_waiting=64,
            mem_storage=self._applied is not None,
        )
        if len(self._filters) == 1:
            config.filter_subject = self._filters[0]
        else:
            config.filter_subjects = self._filters
        return config

    async def start(self) -> None:
        """Make or find the durable and bind to it; through an outage (a cluster electing a
        leader after losing a node answers nothing for seconds) it waits and asks again:
        a copy that died of it would leave its share of the work to the others for good
        (fault harness, seed 50704079)."""
        waits = 0
        while True:
            try:
                config = await self._as_made(self.consumer_config())
                await self._js.add_consumer(self.stream, config)
                self._sub = fetch_queued_without_a_task(
                    await self._js.pull_subscribe_bind(self.durable, stream=self.stream))
                if self._forget_reconnects is None:
                    self._forget_reconnects = on_reconnect(connection_of(self._js),
                                                           self._reconnected.set)
                return
            except Exception as exc:
                if not is_outage(exc) or self._stopping:
                    raise
                log.warning("consumer_waiting_for_outage", stream=self.stream,
                            durable=self.durable, error=str(exc) or type(exc).__name__)
                await asyncio.sleep(outage_pause(waits))
                waits += 1

    async def _as_made(self, config: js_api.ConsumerConfig) -> js_api.ConsumerConfig:
        """How a durable is acknowledged, where it keeps its state and where it starts are
        fixed when it is made: one that exists is asked for as it was made, unless it must
        be made again from a seq: an earlier release made it with another ack policy or on
        the server's disk (then from just after the stored offset, or what it
        acknowledged), or it acknowledged past the stored offset (`applied`, a projection
        rebuilt, or put back from an older copy: from just after that offset)."""
        # The durable is read before the stored offset: a copy stores a batch's offset
        # before it acknowledges the batch, so read in this order the acknowledged seq
        # passes the offset only where the projection is behind it (reset, put back, or a
        # batch that stored no offset). Read the other way round, a copy starting while
        # another folded took the durable for ahead of the offset, and made it again under
        # the running copy: that copy's fetches went unanswered, its acks were lost.
        try:
            info = await self._js.consumer_info(self.stream, self.durable)
        except NotFoundError:
            info = None
        applied = await self._applied() if self._applied is not None else None
        if info is None and applied is None:
            return config
        start = None if applied is None else applied + 1
        if info is not None:
            acknowledged = info.ack_floor.stream_seq
            if info.config.ack_policy != config.ack_policy or \
                    bool(info.config.mem_storage) != config.mem_storage:
                log.info("consumer_made_again", durable=self.durable,
                         ack_policy=config.ack_policy, in_memory=config.mem_storage,
                         from_seq=start or acknowledged + 1)
                start = start or acknowledged + 1
            elif applied is not None and acknowledged > applied:
                log.warning("projection_behind_its_consumer", durable=self.durable,
                            applied=applied, acknowledged=acknowledged)
            else:
                config.deliver_policy = info.config.deliver_policy
                config.opt_start_seq = info.config.opt_start_seq
                return config
            await self._js.delete_consumer(self.stream, self.durable)
        config.deliver_policy = js_api.DeliverPolicy.BY_START_SEQUENCE
        config.opt_start_seq = start
        return config

    async def stop(self, timeout: float) -> None:
        """Stop taking work: a fetch still waiting is withdrawn, one that brought messages
        hands them back at once (nak), so the next copy gets them now, not after ack_wait.
        Then the subscription is withdrawn."""
        self._stopping = True
        self._stop_asked.set()
        try:
            await asyncio.wait_for(self._finished.wait(), timeout)
        except TimeoutError:
            pass
        await self.close()

    async def close(self) -> None:
        """Withdraw the pull subscription before the connection goes, so no message is
        handed to a copy that is stopping (it would wait out ack_wait to come back)."""
        if self._forget_reconnects is not None:
            self._forget_reconnects()
            self._forget_reconnects = None
        if self._sub is None:
            return
        try:
            await self._sub.unsubscribe()
            await connection_of(self._js).flush(timeout=2)
        except Exception:
            pass
        self._sub = None

    async def run(self) -> None:
        assert self._sub is not None, "call start() first"
        try:
            await self._serve()
        finally:
            self._finished.set()

    async def _serve(self) -> None:
        while (sub := self._sub) is not None and not self._stopping:
            try:
                msgs = await self._fetch(sub)
            except TimeoutError:
                # Nothing came: nats-py's own, or asyncio's when the server's "no messages"
                # came at the deadline (a loaded machine); neither is an outage to pause on.
                continue
            except Exception as exc:
                if not is_outage(exc):
                    log.exception("fetch_failed", stream=self.stream)
                elif isinstance(exc, ServiceUnavailableError):
                    await self._made_again_if_lost()
                await asyncio.sleep(0.5)
                continue
            if not msgs:
                continue
            if self._stopping:
                await self._hand_back(msgs)
                return
            try:
                if not self._deliveries_went_elsewhere(msgs):
                    await self._process(msgs)
                elif self._idempotent:
                    ordered = await self._with_older_from_stream_once_readable(msgs)
                    if ordered is None:  # stopping
                        await self._hand_back(msgs)
                        return
                    await self._process(ordered)
                else:
                    await self._process_in_runs(msgs)
            except asyncio.CancelledError:
                await self._hand_back(msgs)
                raise

    async def _made_again_if_lost(self) -> None:
        """A pull nothing answers: a durable kept in memory is gone when its server
        restarted. Made again from just after the stored offset and bound anew (by whichever
        copy asks first; the others find it made). While the server cannot say, or the
        making fails, the next pull that nothing answers asks again."""
        if self._applied is None:
            return
        try:
            await self._js.consumer_info(self.stream, self.durable)
            return
        except NotFoundError:
            pass
        except Exception:
            return
        log.warning("consumer_lost", stream=self.stream, durable=self.durable)
        lost = self._sub
        try:
            await self.start()
        except Exception as exc:
            log.warning("consumer_not_made_again", durable=self.durable,
                        error=str(exc) or type(exc).__name__)
            return
        # Its deliveries are numbered from 1 again: the next batch reads what is older first.
        self._last_delivery = None
        with contextlib.suppress(Exception):
            await lost.unsubscribe()

    async def _fetch(self, sub) -> list[Msg]:
        """The next batch; none when a stop is asked while the pull request still waits."""
        self._reconnected.clear()
        fetch = asyncio.ensure_future(sub.fetch(self._batch_size, timeout=self._fetch_wait))
        stop = asyncio.ensure_future(self._stop_asked.wait())
        # A reconnect lost the request: withdrawn, and asked again by the caller's next pull
        # (what it brought meanwhile waits in the subscription, and that pull takes it first).
        reconnected = asyncio.ensure_future(self._reconnected.wait())
        try:
            await asyncio.wait({fetch, stop, reconnected}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            reconnected.cancel()
        if not fetch.done():
            fetch.cancel()
            with contextlib.suppress(BaseException):
                await fetch
            return []
        return fetch.result()

    def _deliveries_went_elsewhere(self, msgs: Sequence[Msg]) -> bool:
        """Whether a message of this consumer between (or just before) these went to
        another copy. Deliveries are numbered in stream order, and two copies whose pull
        requests wait together are handed messages in turn (2, 3, 5 here; 4, 6 there)."""
        deliveries = sorted(m.metadata.sequence.consumer for m in msgs)
        gap = self._last_delivery is None or deliveries[0] != self._last_delivery + 1 or any(
            b != a + 1 for a, b in zip(deliveries, deliveries[1:]))
        self._last_delivery = deliveries[-1]
        return gap

    async def _process_in_runs(self, msgs: Sequence[Msg]) -> None:
        """Handle a batch whose deliveries interleave with another copy's, in stream order.

        The batch is cut into runs of consecutive deliveries; each run is handled once
        every message of the consumer before it is acknowledged (by whichever copy held
        it), so across copies the handler sees the stream in order. The copy holding the
        oldest unacknowledged message always goes on, so no two copies wait on each other.
        A copy that died holding older messages leaves them pending until ack_wait passes;
        past twice that something else is wrong, and holding on would only stall the stream.
        """
        ordered = sorted(msgs, key=lambda m: m.metadata.sequence.stream)
        runs: list[list[Msg]] = []
        for msg in ordered:
            if runs and msg.metadata.sequence.consumer == runs[-1][-1].metadata.sequence.consumer + 1:
                runs[-1].append(msg)
            else:
                runs.append([msg])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2 * self._ack_wait
        for i, run in enumerate(runs):
            while loop.time() < deadline:
                try:
                    await connection_of(self._js).flush()  # our own acks first
                    info = await self._sub.consumer_info()
                    if await self._nothing_older_pending(info, run[0].metadata.sequence.stream):
                        break
                except Exception:
                    pass
                await self._extend([m for later in runs[i:] for m in later])
                await asyncio.sleep(0.02)
            await self._process(run)

    async def _nothing_older_pending(self, info, first: int) -> bool:
        """Whether every message of this consumer below stream seq `first` is acknowledged:
        the ack floor is just below it, or no message of the filters lies in between."""
        floor = info.ack_floor.stream_seq
        if floor + 1 >= first:
            return True
        for subject in self._filters:
            try:
                found = await self._js.get_msg(self.stream, seq=floor + 1, subject=subject,
                                               next=True)
            except NotFoundError:
                continue
            if found.seq is not None and found.seq < first:
                return False
        return True

    async def _with_older_from_stream_once_readable(
        self, msgs: Sequence[Msg]
    ) -> list[Msg] | None:
        """The batch with what other copies hold before it, read from the stream as soon as
        it can be read; meanwhile the batch stays leased. Handling it alone (after a
        deadline, say) would put it ahead of messages a paused copy holds: a server paused
        for 15 s once had the timeline take an entry before one sent before it (fault
        harness, seed 3). None when the consumer is stopping."""
        waits = 0
        while not self._stopping:
            ordered = await self._with_older_from_stream(msgs)
            if ordered is not None:
                return ordered
            await self._extend(msgs)
            await asyncio.sleep(outage_pause(waits))
            waits += 1
        return None

    async def _with_older_from_stream(self, msgs: Sequence[Msg]) -> list[Msg] | None:
        """Every message of the consumer from its ack floor up to the newest of this batch,
        read from the stream where another copy holds it (or held it and died): stream
        order without waiting for them. Under AckPolicy.ALL the batch's ack settles those
        too. None when the stream cannot be read now (the caller goes run by run instead)."""
        held = {m.metadata.sequence.stream: m for m in msgs}
        try:
            await connection_of(self._js).flush()  # our own acks first, so they are not counted
            info = await self._sub.consumer_info()
            start, end = info.ack_floor.stream_seq + 1, max(held)
            missing = set(range(start, end + 1)) - held.keys()
            if missing:
                # One read of the range (a read per filter waited out each empty one).
                async for older in replay(self._js, self.stream, ">", min(missing), end):
                    held.update((m.metadata.sequence.stream, m) for m in older
                                if m.metadata.sequence.stream not in held
                                and any(subject_matches(m.subject, f) for f in self._filters))
        except Exception as exc:
            log.warning("older_pending_unread", stream=self.stream, error=repr(exc))
            return None
        return [held[seq] for seq in sorted(held)]

    async def _process(self, msgs: Sequence[Msg]) -> None:
        every, items = msgs, []
        for msg in every:
            item, problem = self._read(msg)
            if problem is not None:
                await self._park(msg, problem)
            else:
                items.append(item)
        msgs = [msg for _, msg in items]
        last = max(m.metadata.sequence.stream for m in every)
        if not msgs and self._decode is None:
            await self._ack(every)
            return
        failures = 0
        started = time.perf_counter()
        while True:
            try:
                await self._handled(items, last)
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_outage(exc):
                    log.warning("batch_waiting_for_outage", stream=self.stream, error=str(exc))
                    await self._extend(msgs)
                    await asyncio.sleep(outage_pause(failures))
                    failures += 1
                    continue
                log.exception("batch_failed", stream=self.stream, size=len(msgs))
                await self._process_one_by_one(items, last)
                await self._ack(every)
                return
        if self._batch_seconds is not None:
            self._batch_seconds.observe(time.perf_counter() - started)
        # The parked ones too, and only now: under AckPolicy.ALL an ack settles every
        # message before it, so nothing is acknowledged before the batch is applied.
        await self._ack(every)

    async def _process_one_by_one(self, items: list[tuple[Any, Msg]], last: int) -> None:
        """Find the message that fails, park it, keep the rest flowing."""
        for item in items:
            msg = item[1]
            # The batch's try was this delivery's: each try here is one more.
            tries, waits = msg.metadata.num_delivered, 0
            while True:
                try:
                    await self._handled([item], msg.metadata.sequence.stream)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if is_outage(exc):
                        await self._extend([msg])
                        await asyncio.sleep(outage_pause(waits))
                        waits += 1
                        continue
                    tries += 1
                    if gives_up(tries, self._max_deliver):
                        log.error("message_parked", stream=self.stream,
                                  seq=msg.metadata.sequence.stream, error=repr(exc))
                        await self._park(msg, failure_reason(tries, exc))
                        break
            await self._ack([msg])  # in stream order, so AckPolicy.ALL settles only these
        if self._decode is not None:
            await self._end_at(last)

    async def _end_at(self, last: int) -> None:
        """A typed handler is given the batch's end alone (an empty Batch), so its offset
        moves past a message parked at the end."""
        waits = 0
        while True:
            try:
                await self._handled([], last)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not is_outage(exc):
                    log.exception("batch_end_failed", stream=self.stream, seq=last)
                    return
                await asyncio.sleep(outage_pause(waits))
                waits += 1

    async def _handled(self, items: list[tuple[Any, Msg]], last: int) -> None:
        """The handler's work on `items` (ending at stream seq `last`), their lease extended
        while it lasts."""
        msgs = [msg for _, msg in items]
        leasing = asyncio.create_task(self._keep_leased(msgs))
        try:
            await self._handle(msgs if self._decode is None
                               else Batch(list(items), last, self._more_after(msgs, last)))
        finally:
            await cancel_and_wait(leasing)

    def _more_after(self, msgs: Sequence[Msg], last: int) -> bool:
        """Whether the consumer had more to deliver when the batch's last message came: the
        batch ends at a message it delivered (not one read from the stream, nor a parked
        one) that came with messages pending after it."""
        if not msgs:
            return False
        meta = msgs[-1].metadata
        return (meta.consumer == self.durable and meta.sequence.stream == last
                and bool(meta.num_pending))

    def _read(self, msg: Msg) -> tuple[tuple[Any, Msg], str | None]:
        """The message as its handler takes it ((decoded, msg); (None, msg) untyped), or
        why it is parked unhandled."""
        worn = worn_out(msg, self._max_deliver)
        if worn is not None or self._decode is None:
            return (None, msg), worn
        try:
            return (self._decode(msg.data), msg), None
        except msgspec.MsgspecError as exc:
            return (None, msg), unreadable_reason(self._message, exc)

    async def _keep_leased(self, msgs: Sequence[Msg]) -> None:
        while True:
            await asyncio.sleep(self._ack_wait / 3)
            await self._extend(msgs)

    async def _hand_back(self, msgs: Sequence[Msg]) -> None:
        """Redeliver now what this copy will not finish (a nak of an acked one is ignored)."""
        for msg in msgs:
            try:
                await asyncio.wait_for(msg.nak(), 1.0)
            except BaseException:
                pass

    async def _extend(self, msgs: Sequence[Msg]) -> None:
        for msg in msgs:
            try:
                await msg.in_progress()
            except Exception:
                pass

    async def _ack(self, msgs: Sequence[Msg]) -> None:
        if self._ack_all and msgs:
            msgs = [max(msgs, key=lambda m: m.metadata.sequence.stream)]
        for msg in msgs:
            try:
                await msg.ack()
            except Exception:
                # A lost ack means a redelivery, which every handler treats as a no-op.
                log.warning("ack_failed", stream=self.stream, seq=msg.metadata.sequence.stream)
