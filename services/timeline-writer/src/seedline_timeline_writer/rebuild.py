"""Drop the timeline projection and rebuild it from SEEDLINE_TIMELINE (DESIGN.md rule 3).

The proof of deterministic replay: the digest of the rows before and after a
rebuild from sequence 1 must be equal. The "after" digest is taken where each
partition's writer had projected to, so a writer behind the stream's end is not
drift; the replay then goes on to the end. A difference means the projection had
drifted from the stream (and the rebuild has repaired it).

Everything happens in one transaction, so readers see the old rows or the new
ones, never a half-built table. Lock order matches PostgresTimelineStore.append
(offset row first, then the table): a writer running at the same time waits
for the rebuild and then appends above the rebuilt offset, with no deadlock.
Reads of the projection wait too while the rebuild runs. Entries of a forgotten
instance (up to the seq its erasure reached) are left out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import psycopg
from nats.js import JetStreamContext
from psycopg_pool import AsyncConnectionPool

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.streams import TIMELINE
from seedline_contracts.timeline import TimelineEntry
from seedline_contracts.instances import Erasure
from seedline_platform import natsio
from seedline_platform.erasure import covers, erasures
from seedline_platform.replay import last_seq, replay
from seedline_platform.settings import Settings

from .schema import OFFSETS, TIMELINE_PROJECTION
from .store import PostgresTimelineStore, copy_entries, digest
from .stream import PARTITION_HEADER

Progress = Callable[[int, int], None]  # (entries replayed, entries to replay)
NAME = "timeline-rebuild"


class RebuildIncomplete(RuntimeError):
    """The stream stopped answering before its last entry; the transaction is rolled back."""


@dataclass(frozen=True)
class RebuildResult:
    before_digest: str
    after_digest: str
    rows: int
    seconds: float

    @property
    def identical(self) -> bool:
        return self.before_digest == self.after_digest


async def rebuild_timeline(settings: Settings, progress: Progress | None = None) -> RebuildResult:
    """Replay the whole timeline stream into a fresh projection and compare digests."""
    started = time.monotonic()
    nc = await natsio.connect(settings.nats_servers, NAME)
    try:
        js = nc.jetstream()
        await natsio.ensure_streams(js, [TIMELINE])
        async with AsyncConnectionPool(
            settings.database_url,
            min_size=1,
            max_size=1,
            open=False,
            timeout=10.0,
            kwargs={"autocommit": True, "application_name": NAME},
        ) as pool:
            await PostgresTimelineStore(pool).setup()
            forgotten = await erasures(js, settings.stream_replicas)
            async with pool.connection() as conn:
                before, after, rows = await _rebuild(conn, js, progress, forgotten)
    finally:
        await nc.close()
    return RebuildResult(before, after, rows, time.monotonic() - started)


async def rebuild_command(settings: Settings, progress) -> dict:
    """`timeline-writer rebuild`: the figures `seedline rebuild timeline` shows."""
    result = await rebuild_timeline(settings, lambda done, total: progress(done=done, total=total))
    return {"before_digest": result.before_digest, "after_digest": result.after_digest,
            "rows": result.rows, "seconds": round(result.seconds, 3)}


async def _rebuild(
    conn: psycopg.AsyncConnection, js: JetStreamContext, progress: Progress | None,
    forgotten: dict[str, Erasure] | None = None,
) -> tuple[str, str, int]:
    forgotten = forgotten or {}
    async with conn.transaction():
        # The table before the offsets: a writer's append opens the table, then waits for
        # its offset's row. Taken the other way round (the offsets, then the table to empty
        # it), a rebuild and an append each waited for what the other held, and Postgres
        # ended the rebuild as a deadlock.
        await conn.execute("LOCK TABLE timeline_entries IN ACCESS EXCLUSIVE MODE")
        await OFFSETS.lock(conn, TIMELINE_PROJECTION)
        # ...and every other partition's, so no writer appends while the table is rebuilt.
        cur = await conn.execute(
            f"SELECT projection, applied_seq FROM {OFFSETS.table}"
            " WHERE projection LIKE 'timeline%%' FOR UPDATE"
        )
        reached = {_partition_of(name): int(seq) for name, seq in await cur.fetchall()}
        # Both digests are taken under the offset lock, so rows a writer adds
        # meanwhile cannot make equal projections look different.
        before, _ = await digest(conn)
        await conn.execute("TRUNCATE timeline_entries")
        # Every partition's offset (timeline, timeline.p1, ...): the rebuild holds them all.
        await conn.execute(
            f"UPDATE {OFFSETS.table} SET applied_seq = 0 WHERE projection LIKE 'timeline%%'"
        )
        end = await last_seq(js, subjects.TIMELINE_STREAM)
        ordinals: dict[tuple[str, str], int] = {}
        copied = 0
        first_left_out: int | None = None  # where the second pass starts

        async def copy_range(first: int, last: int, wanted) -> int:
            """Copy the entries of first..last that `wanted(seq, partition)` keeps; returns
            the last seq the stream answered with."""
            nonlocal copied, first_left_out
            reached_seq = first - 1
            async for msgs in replay(js, subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL,
                                     first, last):
                keep = []
                for m in msgs:
                    seq = m.metadata.sequence.stream
                    if wanted(seq, _partition_header(m)):
                        entry = decode(m.data, TimelineEntry)
                        # A forgotten instance's entries stay in the stream, sealed with a
                        # destroyed key; the projection never holds them again.
                        if not covers(forgotten.get(entry.instance_id), seq):
                            keep.append((seq, entry))
                    elif first_left_out is None:
                        first_left_out = seq
                if keep:
                    await copy_entries(conn, keep, ordinals)
                copied += len(keep)
                reached_seq = msgs[-1].metadata.sequence.stream
                if progress is not None:
                    progress(copied, end)
            return reached_seq

        # First up to where each partition's writer had projected: the "after" digest
        # compares like with like, so a writer a few entries behind the stream's end is
        # not reported as drift. Then on to the end, from the first entry left out.
        def projected(seq: int, partition: str) -> bool:
            return seq <= reached.get(partition, 0)

        upto = min(max(reached.values(), default=0), end)
        if await copy_range(1, upto, projected) < upto:
            raise _incomplete(upto)
        after, rows = await digest(conn)
        copied_before_the_rest = copied
        rest = upto + 1 if first_left_out is None else first_left_out
        if await copy_range(rest, end, lambda seq, partition: not projected(seq, partition)) < end:
            raise _incomplete(end)
        await conn.execute(
            f"UPDATE {OFFSETS.table} SET applied_seq = %s WHERE projection LIKE 'timeline%%'",
            (end,),
        )
    return before, after, rows + copied - copied_before_the_rest


def _partition_of(projection: str) -> str:
    """timeline -> "0", timeline.p2 -> "2": the partition header its writer stamps."""
    return projection.rpartition(".p")[2] if ".p" in projection else "0"


def _partition_header(msg) -> str:
    return (msg.headers or {}).get(PARTITION_HEADER, "0")


def _incomplete(seq: int) -> RebuildIncomplete:
    # replay() stops quietly when a fetch times out; the timeline has no gaps
    # (deny delete), so stopping short means a slow server, not the end.
    return RebuildIncomplete(
        f"the timeline stream did not answer up to seq {seq}; "
        "nothing was changed, run the rebuild again"
    )
