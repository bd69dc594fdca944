"""Load for fault tests: a producer that counts only acknowledged entries, and
the checks that every one of them is in the stream and projection once, in order."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import psycopg

from seedline_contracts import subjects

from seedline_platform.replay import last_seq, replay


def entry(n: int, prefix: str = "load", instances: int = 1) -> dict:
    return {
        "entry_id": f"{prefix}-{n:06d}",
        "instance_id": "bd43f4de" if instances == 1 else f"inst-{n % instances}",
        "repo": f"apps/repo-{n % 3}",
        "session_id": f"csess_{n % 5}",
        "kind": "terminal",
        "content": f"line {n}",
        "at": "2026-08-17T10:00:00Z",
    }


class Producer:
    """Publishes numbered entries in windows; an entry counts once the stream acknowledged it.

    A publish that errs or times out is sent again with the same Nats-Msg-Id until it
    is acknowledged or the producer stops, so the stream's duplicate window (and the
    writer's entry_id index) must turn retries into one entry. Each acknowledged
    entry's SEEDLINE_INGEST sequence is kept: the timeline must follow that order.
    """

    def __init__(self, js, prefix: str, window: int = 64, ack_timeout: float = 2.0,
                 instances: int = 1) -> None:
        self._js = js
        self._prefix = prefix
        # More than one: entries of several instances, each on its instance's own subject.
        self._instances = instances
        self._window = window
        self._ack_timeout = ack_timeout
        self.ingest_seq: dict[str, int] = {}  # acknowledged entry_id -> its ingest sequence
        self.retries = 0
        self.stopping = asyncio.Event()
        self._next = 1

    @property
    def acked(self) -> set[str]:
        return set(self.ingest_seq)

    def entry(self, n: int) -> dict:
        return entry(n, self._prefix, self._instances)

    async def _send(self, n: int) -> asyncio.Future | None:
        body = self.entry(n)
        subject = (subjects.INGEST_TIMELINE if self._instances == 1
                   else subjects.ingest_timeline_subject(body["instance_id"]))
        try:
            return await self._js.publish_async(
                subject, json.dumps(body).encode(), headers={"Nats-Msg-Id": body["entry_id"]},
                wait_stall=self._ack_timeout,
            )
        except Exception:
            return None

    async def _settle(self, n: int, future: asyncio.Future | None) -> bool:
        if future is None:
            return False
        try:
            ack = await asyncio.wait_for(future, self._ack_timeout)
        except Exception:
            return False
        self.ingest_seq[self.entry(n)["entry_id"]] = ack.seq  # a duplicate's ack names the first
        return True

    async def run(self) -> None:
        while not self.stopping.is_set():
            numbers = list(range(self._next, self._next + self._window))
            self._next += self._window
            futures = [await self._send(n) for n in numbers]
            outcomes = await asyncio.gather(*(self._settle(n, f) for n, f in zip(numbers, futures)))
            for n in (n for n, ok in zip(numbers, outcomes) if not ok):
                while True:
                    self.retries += 1
                    if await self._settle(n, await self._send(n)) or self.stopping.is_set():
                        break
                    await asyncio.sleep(0.1)


async def wait_until(probe, timeout: float, what: str):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            value = await probe()
        except Exception:
            value = None  # the server may be away; ask again
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f} s")
        await asyncio.sleep(0.1)


async def projected_ids(database_url: str) -> Counter:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("SELECT entry_id FROM timeline_entries")
        return Counter(r[0] for r in await cur.fetchall())


async def stream_order(js, instance_id: str | None = None) -> list[str]:
    """Every entry_id in SEEDLINE_TIMELINE (of one instance when given), in stream order."""
    ids: list[str] = []
    end = await last_seq(js, subjects.TIMELINE_STREAM)
    async for msgs in replay(js, subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL, 1, end):
        bodies = (json.loads(m.data) for m in msgs)
        ids += [b["entry_id"] for b in bodies if instance_id in (None, b["instance_id"])]
    return ids


async def stream_ids(js) -> Counter:
    return Counter(await stream_order(js))


def out_of_ingest_order(order: list[str], ingest_seq: dict[str, int]) -> list[str]:
    """Acknowledged entries appended after one that reached SEEDLINE_INGEST later."""
    seqs = [(ingest_seq[i], i) for i in order if i in ingest_seq]
    return [b for (sa, _), (sb, b) in zip(seqs, seqs[1:]) if sb < sa]


async def projected_at_least(database_url: str, n: int) -> int | None:
    """How many entries are projected, once there are at least n (None while Postgres is away)."""
    try:
        count = sum((await projected_ids(database_url)).values())
    except psycopg.Error:
        return None
    return count if count >= n else None


async def acked_at_least(producer: Producer, n: int) -> bool:
    return len(producer.ingest_seq) >= n


async def projected_all(database_url: str, acked: set[str]) -> bool:
    return acked <= (await projected_ids(database_url)).keys()


async def ingest_taken(js, durables: tuple[str, ...] | None = None,
                       upto: int | None = None) -> bool:
    """Every ingest consumer (these durables, or every durable there is) has been handed
    everything and has acknowledged it. SEEDLINE_INGEST keeps messages by age, so an
    acknowledged message stays in the stream: its consumers say what is taken. A consumer
    counts a message just stored as pending a moment later: `upto`, a seq the caller's own
    publish was acknowledged at, is waited for as handed to one of them."""
    if durables is None:
        infos = [i for i in await js.consumers_info(subjects.INGEST_STREAM)
                 if i.config.durable_name]
        if not infos:
            return False
    else:
        infos = [await js.consumer_info(subjects.INGEST_STREAM, d) for d in durables]
    handed = max((i.delivered.stream_seq or 0 for i in infos), default=0)
    return all(not (i.num_pending or i.num_ack_pending) for i in infos) and (
        upto is None or handed >= upto)
