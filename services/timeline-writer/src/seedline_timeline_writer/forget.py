"""seedline.api.instances.forget: forget an instance (CONTRACT.md Conventions, Erasure).

The streams stay append-only: the instance's entries stay there, sealed with a key that
is destroyed here, so nothing can open them again. In order: the instance's live
conversations are stopped on their machines (engines and whatever they started, CONTRACT.md
6), so nothing of it runs on, or tells anyone anything, afterwards; the erasure is recorded
(who, when, why, how many entries, the timeline seq it reaches), the key is destroyed,
this service drops the instance's rows, and the streams that hold plain text (notices,
the ingest inbox, rejected input) lose the instance's messages; every other service
follows the record and drops its own rows (seedline_platform.erasure). A forget asked
again redoes each step. A person's message sent while this runs lies inside the erasure and
may wake a conversation after the live ones were stopped: the runner-gateway stops it once
the erasure is recorded, and no fold keeps a row of it (runner-gateway forgetting.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from psycopg_pool import AsyncConnectionPool

from seedline_contracts import subjects
from seedline_contracts.errors import ErrorReply, error_reply
from seedline_contracts.instances import MAX_REASON_CHARS, Erasure, ForgetReply, ForgetRequest
from seedline_contracts.times import now_text
from seedline_contracts.tokens import name_problem
from seedline_platform import erasure
from seedline_platform.logging import get_logger
from seedline_platform.replay import last_seq
from seedline_platform.sealing import KeyStore, Sealer

from .launches import PostgresLaunchRegistry

log = get_logger(__name__)

STOP_REASON = "forgotten"


class LiveNotStopped(Exception):
    """The instance's live conversations could not all be stopped; the sentence says why."""


async def _nothing_live(_: str) -> int:
    return 0


class Forgetter:
    def __init__(
        self, js, pool: AsyncConnectionPool, keys: KeyStore, sealer: Sealer,
        launches: PostgresLaunchRegistry, replicas: int = 1,
        clock: Callable[[], str] = now_text,
        stop_live: Callable[[str], Awaitable[int]] = _nothing_live,
    ) -> None:
        self._js = js
        self._pool = pool
        self._launches = launches
        self._keys = keys
        self._sealer = sealer
        self._replicas = replicas
        self._clock = clock
        # Stops the instance's live conversations and answers how many it stopped; raises
        # LiveNotStopped when it cannot, and then nothing is forgotten yet.
        self._stop_live = stop_live

    async def handle(self, request: ForgetRequest) -> ForgetReply | ErrorReply:
        problem = name_problem(request.instance_id)
        if problem is not None:
            return error_reply("invalid_request", f"instance_id {problem}.")
        if not request.reason.strip() or len(request.reason) > MAX_REASON_CHARS:
            return error_reply("invalid_request", (
                f"reason must say why, in 1 to {MAX_REASON_CHARS} characters."))
        instance = request.instance_id
        try:
            stopped = await self._stop_live(instance)
        except LiveNotStopped as error:
            return error_reply("unavailable", f"{error} Nothing was forgotten yet; ask again.")
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM timeline_entries WHERE instance_id = %s", (instance,))
            entries = int((await cur.fetchone())[0])
        record = Erasure(
            instance_id=instance, reason=request.reason, by=request.by, at=self._clock(),
            entries=entries, through_seq=await last_seq(self._js, subjects.TIMELINE_STREAM),
        )
        await erasure.record(self._js, record, self._replicas)
        await self._keys.destroy(instance)
        await self.drop(record)
        removed = await erasure.scrub_streams(
            self._js, instance, lambda body: names_instance(body, instance))
        removed[subjects.WORKTREES_BUCKET] = await erasure.delete_saved_objects(self._js, instance)
        log.info("instance_forgotten", instance_id=instance, entries=entries, stopped=stopped,
                 through_seq=record.through_seq, removed_from_streams=removed)
        return ForgetReply(entries=entries)

    async def drop(self, record: Erasure) -> None:
        """This service's rows of the forgotten instance (also run for each erasure recorded,
        so every copy of the writer forgets the key it cached)."""
        self._sealer.forget(record.instance_id)
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM timeline_entries WHERE instance_id = %s AND seq <= %s",
                (record.instance_id, record.through_seq),
            )
            await self._launches.forget(conn, record.instance_id)


def names_instance(body: bytes, instance_id: str) -> bool:
    """An ingest message, a rejected one (its `raw`, when it was text) or a parked session
    event of this instance. Input that never named one cannot be told apart, and stays."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return False
    if not isinstance(value, dict):
        return False
    plan = value.get("plan")
    if instance_id in (value.get("instance_id"), plan.get("instance_id") if isinstance(
            plan, dict) else None):
        return True
    raw = value.get("raw")
    return (value.get("raw_encoding") == "utf-8" and isinstance(raw, str)
            and names_instance(raw.encode("utf-8"), instance_id))
