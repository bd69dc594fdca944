"""Which instances were forgotten, and following that (CONTRACT.md Conventions, Erasure).

The record of an erasure is kept in the NATS KV bucket ``seedline_forgotten`` (one value
per instance). The timeline-writer writes it when it forgets an instance; every service
that keeps rows of instances follows the bucket and drops that instance's rows from its
own tables (one owner per table), and a rebuild leaves out the entries it covers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from seedline_contracts.codec import decode, encode
from seedline_contracts.instances import Erasure
from seedline_core import lifecycle as lc
from seedline_platform.logging import get_logger
from seedline_contracts.channels import ERASURES
from seedline_platform.outage import NATS_AWAY
from seedline_platform.replay import BucketWatch, WatchBroken, newest_values
from seedline_platform.routing import Kind, Route
from seedline_platform.sending import check_send
from seedline_platform.sealing import key_name

log = get_logger(__name__)

FORGOTTEN_BUCKET = "seedline_forgotten"

_Fact = TypeVar("_Fact")
_Step = TypeVar("_Step")


async def forgotten_bucket(js, replicas: int = 1):
    from nats.js import api as js_api

    try:
        return await js.key_value(FORGOTTEN_BUCKET)
    except Exception:
        try:
            return await js.create_key_value(js_api.KeyValueConfig(
                bucket=FORGOTTEN_BUCKET, history=1, storage=js_api.StorageType.FILE,
                replicas=replicas,
            ))
        except Exception:  # another service made it first
            return await js.key_value(FORGOTTEN_BUCKET)


async def record(js, erasure: Erasure, replicas: int = 1) -> None:
    kv = await forgotten_bucket(js, replicas)
    check_send(f"$KV.{FORGOTTEN_BUCKET}.{key_name(erasure.instance_id)}")
    await kv.put(key_name(erasure.instance_id), encode(erasure))


async def erasures(js, replicas: int = 1) -> dict[str, Erasure]:
    """Every instance forgotten so far (read so that it cannot end before values on their
    way: seedline_platform.replay.newest_values)."""
    await forgotten_bucket(js, replicas)
    out: dict[str, Erasure] = {}
    async for _, msg in newest_values(js, FORGOTTEN_BUCKET):
        erasure = decode(msg.data, Erasure)
        out[erasure.instance_id] = erasure
    return out


class Forgotten:
    """The erasures this process has taken in, and a fence between them and its folds.

    A person's message sent while an instance is being forgotten lies inside the erasure
    (`through_seq`) and may still wake a conversation, whose events are recorded after the
    instance's rows were dropped. A fold writes each batch inside `folding()`, leaving out
    what an erasure it has taken in covers (`kept_facts`, `kept_steps`); an erasure is taken
    in (`add`) between two batches, before this process drops the instance's rows. So a
    batch either lands before that drop, which removes its rows, or leaves them out.
    """

    def __init__(self) -> None:
        self._records: dict[str, Erasure] = {}
        self._folds = asyncio.Lock()

    async def add(self, record: Erasure) -> None:
        async with self._folds:
            self._records[record.instance_id] = record

    def folding(self) -> asyncio.Lock:
        return self._folds

    def covers(self, instance_id: str, seq: int | None) -> bool:
        """Whether the timeline entry at `seq` of the instance was forgotten (a wake's
        message, say); never for no seq."""
        return seq is not None and covers(self._records.get(instance_id), seq)

    def kept_facts(self, facts: Sequence[_Fact]) -> list[_Fact]:
        """Timeline facts (anything with `instance_id` and `seq`) no erasure covers."""
        if not self._records:
            return list(facts)
        return [fact for fact in facts if not self.covers(fact.instance_id, fact.seq)]

    def kept_steps(self, steps: Sequence[_Step]) -> list[_Step]:
        """Lifecycle steps without the requests of wakes an erasure covers: the conversation
        such a wake makes is never folded, and its later events find no row to change."""
        if not self._records:
            return list(steps)
        return [step for step in steps if not (
            isinstance(step.event, lc.Requested)
            and self.covers(step.event.instance_id, step.event.wake_seq))]


class ErasureFollower:
    """A service loop (a LOOP row of its routing table, `route()`): each erasure recorded,
    those before it started too, is taken in by `forgotten` (when given) and then handed to
    `on_forgotten`, which must be idempotent."""

    def __init__(self, js, on_forgotten: Callable[[Erasure], Awaitable[None]],
                 replicas: int = 1, forgotten: Forgotten | None = None) -> None:
        self._js = js
        self._on_forgotten = on_forgotten
        self._replicas = replicas
        self._forgotten = forgotten

    async def follow(self) -> None:
        while True:
            watch = BucketWatch(self._js, FORGOTTEN_BUCKET)
            try:
                await forgotten_bucket(self._js, self._replicas)
                async for change in watch.changes():
                    if change.operation == "PUT" and change.value:
                        record = decode(change.value, Erasure)
                        if self._forgotten is not None:
                            await self._forgotten.add(record)
                        await self._on_forgotten(record)
            except asyncio.CancelledError:
                raise
            except (WatchBroken, *NATS_AWAY) as exc:
                # A server that restarted took the watch with it: a new one reads every
                # erasure again (on_forgotten is idempotent).
                log.warning("forgotten_follow_restarting", error=str(exc) or type(exc).__name__)
                await asyncio.sleep(1.0)
            except Exception:
                log.exception("forgotten_follow_failed")
                await asyncio.sleep(1.0)
            finally:
                await watch.stop()


def route(what: str, sends: tuple = ()) -> Route:
    """The row every owner of rows has: it follows the erasures and drops `what`."""
    return Route(Kind.LOOP, ERASURES.filter, ErasureFollower.follow,
                 f"Drops {what} of each instance forgotten (Erasure).", sends=sends)


def covers(erasure: Erasure | None, seq: int) -> bool:
    """Whether the entry at `seq` of the erasure's instance was forgotten."""
    return erasure is not None and seq <= erasure.through_seq


def dropping(
    pool, statements: tuple[str, ...], sealer=None, param: Callable[[str], str] = str,
    first: tuple[str, ...] = (),
) -> Callable[[Erasure], Awaitable[None]]:
    """An `on_forgotten` that runs a service's own DELETE statements (each taking
    `param(instance id)`) in one transaction, after `first` (statements with no
    parameter: an offset a fold checks, pg.Offsets.touch_statement), and drops the key its
    sealer cached."""

    async def drop(record: Erasure) -> None:
        if sealer is not None:
            sealer.forget(record.instance_id)
        async with pool.connection() as conn, conn.transaction():
            for statement in first:
                await conn.execute(statement)
            for statement in statements:
                await conn.execute(statement, (param(record.instance_id),))

    return drop


async def scrub_streams(js, instance_id: str, belongs: Callable[[bytes], bool]) -> dict:
    """Remove what the streams that allow it still hold of a forgotten instance, in plain
    text: its notices (purged by their subject) and its ingest and rejected messages
    (found by `belongs(body)`, deleted one by one). The timeline and the session
    events stay append-only; what they hold of it is sealed with the destroyed key.
    Returns how many messages went from each stream."""
    from seedline_contracts import subjects

    from .replay import last_seq, replay

    removed: dict[str, int] = {}
    notices = subjects.notify_subject(instance_id)
    before = await js.stream_info(subjects.NOTICES_STREAM, subjects_filter=notices)
    counted = (before.state.subjects or {}).get(notices, 0)
    await js.purge_stream(subjects.NOTICES_STREAM, subject=notices)
    removed[subjects.NOTICES_STREAM] = counted
    for stream in (subjects.INGEST_STREAM, subjects.REJECTED_STREAM):
        end = await last_seq(js, stream)
        found = 0
        async for batch in replay(js, stream, ">", 1, end):
            for msg in batch:
                if belongs(msg.data):
                    await js.delete_msg(stream, msg.metadata.sequence.stream)
                    found += 1
        removed[stream] = found
    return removed



async def delete_saved_objects(js, instance_id: str) -> int:
    """Delete every saved checkout and engine record of a forgotten instance (CONTRACT.md
    Erasure, 6): sealed with keys derived from its destroyed key, and gone besides. Returns
    how many objects went."""
    from seedline_contracts import subjects

    from .saved_objects import delete_objects, object_names

    names = await object_names(js, subjects.worktree_prefix(instance_id))
    await delete_objects(js, names)
    return len(names)
