"""Which conversations the platform launched on which machine (CONTRACT.md 6).

Runner-scoped ingest is accepted only for a conversation launched on that node. The
launch is known from its ``seed_composed`` event, recorded in SEEDLINE_SESSIONS before
the gateway sends the launch request, so a machine's first output is never early. The
writer learns a launch when a machine's output first names it, not from a consumer of
its own (a delivery and an ack per launch, for rows read only then): an entry naming a
launch this process does not hold yet makes the writer read that conversation's newest
``seed_composed`` (one direct get), and failing that the registry, and failing that the
``seed_composed`` events of SEEDLINE_SESSIONS after its mark up to the end (``LaunchFeed``:
a launch older than its conversation's newest, e.g. output of a machine it moved away
from), and only then refuse.

Launches are a set (inserting one twice changes nothing); every launch at or before the
mark is in the registry, since a read records what it found before it moves the mark. A
launch learnt as its conversation's newest is written a moment later, with those learnt
meanwhile (`record_soon`): a burst of wakes costs a statement, not one per wake. One lost
with its process before it was written is found again by the read from the mark.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import NamedTuple, Protocol

from nats.js import JetStreamContext
from psycopg_pool import AsyncConnectionPool

from seedline_contracts import subjects
from seedline_contracts.channels import event_tag
from seedline_contracts.codec import decode
from seedline_contracts.events import SeedComposed
from seedline_platform import pg
from seedline_platform.bounded import trim_oldest
from seedline_platform.logging import get_logger
from seedline_platform.replay import last_seq, replay
from seedline_platform.session_reads import newest_event

from .schema import LAUNCHES_PROJECTION, OFFSETS

log = get_logger(__name__)

# How long a launch learnt as its conversation's newest waits to be written with the others
# learnt meanwhile (`record_soon`).
RECORD_AFTER_SECONDS = 1.0


class Launch(NamedTuple):
    node_id: str
    instance_id: str
    repo: str
    session_id: str


def launch_of(event: SeedComposed) -> Launch:
    plan = event.plan
    return Launch(plan.node_id, plan.instance_id, plan.repo, event.session_id)


class LaunchRegistry(Protocol):
    async def record(self, launches: Iterable[Launch]) -> None: ...

    def record_soon(self, launches: Iterable[Launch]) -> None:
        """Held here at once, written a moment later with the others learnt meanwhile: for
        launches SEEDLINE_SESSIONS holds past the mark, which the read from the mark finds
        again should the write be lost."""
        ...

    def held_here(self, launches: set[Launch]) -> set[Launch]:
        """Those of `launches` this process holds as made, with no read."""
        ...

    async def permitted(self, launches: set[Launch]) -> set[Launch]:
        """The launches of `launches` that the platform made."""
        ...

    async def read_mark(self) -> int:
        """How far (sessions stream seq) the catch-up has read."""
        ...

    async def set_mark(self, seq: int) -> None: ...


class LaunchFeed(Protocol):
    async def newest(self, session_id: str) -> Launch | None:
        """The conversation's newest launch (its last `seed_composed`), if any."""
        ...

    async def since(self, seq: int) -> tuple[list[Launch], int]:
        """Launches recorded after stream seq `seq`, and the stream's end."""
        ...


class PostgresLaunchRegistry:
    """Each machine's output asks whether its conversation was launched there: the launches
    found are kept in memory (the newest `known_limit`), so a conversation's every later
    batch is answered with no read. A launch is only ever taken away with its instance
    (`forget`), which drops what is kept of it and keeps nothing of it again."""

    def __init__(self, pool: AsyncConnectionPool, known_limit: int = 10_000,
                 record_after: float = RECORD_AFTER_SECONDS) -> None:
        self._pool = pool
        self._known: dict[Launch, None] = {}  # oldest first
        self._known_limit = known_limit
        self._forgotten: set[str] = set()
        self._record_after = record_after
        self._unwritten: dict[Launch, None] = {}  # kept by record_soon, not written yet
        self._writing: asyncio.Task | None = None

    def _keep(self, launches: Iterable[Launch]) -> None:
        for launch in launches:
            if launch.instance_id not in self._forgotten:
                self._known[launch] = None
        trim_oldest(self._known, self._known_limit)

    async def record(self, launches: Iterable[Launch]) -> None:
        rows = list(launches)
        if not rows:
            return
        async with self._pool.connection() as conn:  # one statement however many
            await conn.execute(
                "INSERT INTO runner_launches (node_id, instance_id, repo, session_id)"
                " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[])"
                " ON CONFLICT DO NOTHING",
                pg.columns(rows, 4),
            )
        self._keep(rows)

    def record_soon(self, launches: Iterable[Launch]) -> None:
        rows = [launch for launch in launches if launch.instance_id not in self._forgotten]
        self._keep(rows)
        self._unwritten.update(dict.fromkeys(rows))
        if self._unwritten and self._writing is None:
            self._writing = asyncio.ensure_future(self._write_soon())

    async def _write_soon(self) -> None:
        try:
            await asyncio.sleep(self._record_after)
            await self.write_unwritten()
        finally:
            self._writing = None

    async def write_unwritten(self) -> None:
        """Write what record_soon kept; a failed write is logged and left to the read from
        the mark (the launches are in SEEDLINE_SESSIONS past it)."""
        rows = list(self._unwritten)  # forget() takes an instance's out as it forgets it
        self._unwritten = {}
        try:
            await self.record(rows)
        except Exception as error:
            log.warning("launches_not_recorded", count=len(rows), error=str(error))

    def held_here(self, launches: set[Launch]) -> set[Launch]:
        return {launch for launch in launches if launch in self._known}

    async def permitted(self, launches: set[Launch]) -> set[Launch]:
        known = self.held_here(launches)
        asked = launches - known
        if not asked:
            return known
        nodes, instances, repos, sessions = pg.columns(list(asked), 4)
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT l.node_id, l.instance_id, l.repo, l.session_id FROM runner_launches l"
                " JOIN unnest(%s::text[], %s::text[], %s::text[], %s::text[])"
                " AS k(node_id, instance_id, repo, session_id) USING"
                " (node_id, instance_id, repo, session_id)",
                (nodes, instances, repos, sessions),
            )
            found = {Launch(*row) for row in await cur.fetchall()}
        self._keep(found)
        return known | found

    async def forget(self, conn, instance_id: str) -> None:
        """The instance's launches taken away, in the caller's transaction; none of them
        answered from memory again."""
        self._forgotten.add(instance_id)
        self._known = {launch: None for launch in self._known
                       if launch.instance_id != instance_id}
        self._unwritten = {launch: None for launch in self._unwritten
                           if launch.instance_id != instance_id}
        await conn.execute("DELETE FROM runner_launches WHERE instance_id = %s", (instance_id,))

    async def read_mark(self) -> int:
        async with self._pool.connection() as conn:
            return await OFFSETS.read(conn, LAUNCHES_PROJECTION)

    async def set_mark(self, seq: int) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            await OFFSETS.take(conn, LAUNCHES_PROJECTION, seq)


class InMemoryLaunchRegistry:
    def __init__(self) -> None:
        self.launches: set[Launch] = set()
        self.mark = 0

    async def record(self, launches: Iterable[Launch]) -> None:
        self.launches.update(launches)

    def record_soon(self, launches: Iterable[Launch]) -> None:
        self.launches.update(launches)

    def held_here(self, launches: set[Launch]) -> set[Launch]:
        return launches & self.launches

    async def permitted(self, launches: set[Launch]) -> set[Launch]:
        return launches & self.launches

    async def read_mark(self) -> int:
        return self.mark

    async def set_mark(self, seq: int) -> None:
        self.mark = max(self.mark, seq)


class SessionsLaunchFeed:
    """Reads seed_composed events from SEEDLINE_SESSIONS, in order, with no consumer state."""

    def __init__(self, js: JetStreamContext) -> None:
        self._js = js

    async def newest(self, session_id: str) -> Launch | None:
        composed = await newest_event(self._js, session_id, SeedComposed)
        return launch_of(composed) if composed is not None else None

    async def since(self, seq: int) -> tuple[list[Launch], int]:
        end = await last_seq(self._js, subjects.SESSIONS_STREAM)
        found: list[Launch] = []
        async for msgs in replay(
            self._js, subjects.SESSIONS_STREAM, subjects.session_event_filter(event_tag(SeedComposed)),
            seq + 1, end,
        ):
            found.extend(launch_of(decode(m.data, SeedComposed)) for m in msgs)
        return found, end


class InMemoryLaunchFeed:
    def __init__(self) -> None:
        self.events: list[Launch | None] = []  # index + 1 is the stream seq

    async def newest(self, session_id: str) -> Launch | None:
        return next((launch for launch in reversed(self.events)
                     if launch is not None and launch.session_id == session_id), None)

    async def since(self, seq: int) -> tuple[list[Launch], int]:
        later = self.events[seq:]
        return [launch for launch in later if launch is not None], len(self.events)


class LaunchCheck:
    """Answers "did the platform launch this conversation on this machine?"."""

    def __init__(self, registry: LaunchRegistry, feed: LaunchFeed) -> None:
        self._registry = registry
        self._feed = feed

    async def permitted(self, launches: set[Launch]) -> set[Launch]:
        known = self._registry.held_here(launches)
        if known == launches:
            return known
        # Not held here: most often the launch just made, its conversation's newest, which
        # the registry cannot hold yet (it records it from here). Asked first, so a
        # machine's first output of a conversation costs no read of the registry.
        newest = {launch for launch in launches - known
                  if await self._feed.newest(launch.session_id) == launch}
        if newest:
            self._registry.record_soon(newest)
            known |= newest
            if known == launches:
                return known
        # An older launch (of a machine the conversation moved away from): recorded, or
        # read from SEEDLINE_SESSIONS to its end before anything is refused.
        known |= await self._registry.permitted(launches - known)
        if known == launches:
            return known
        found, end = await self._feed.since(await self._registry.read_mark())
        await self._registry.record(found)
        await self._registry.set_mark(end)
        return known | (launches & set(found)) | await self._registry.permitted(launches - known)
