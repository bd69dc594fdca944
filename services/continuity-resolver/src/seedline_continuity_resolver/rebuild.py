"""Drop the conversation projection and replay both streams into it (DESIGN.md rule 3).

The open_requests ledger is not a projection (it holds which request ids were
claimed), so it is kept; replies are re-applied to it idempotently.

The "after" digest is taken once the replay reaches the offsets the projection had
when the rebuild locked it, so a resolver a few events behind the streams' end does
not look like drift: equal digests mean the projection was what the streams say up
to where it had read. The replay then goes on to the streams' end.
"""

from __future__ import annotations

from typing import Callable

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.timeline import TimelineEntry
from seedline_platform import natsio, pg
from seedline_platform.erasure import erasures
from seedline_platform.lifecycle_events import lifecycle_steps, session_events
from seedline_platform.replay import last_seq, replay
from seedline_platform.settings import Settings

from .projection import timeline_facts
from .postgres_repository import (
    FORGET_STATEMENTS,
    OFFSETS,
    PostgresConversationRepository,
    digest_rows,
)
from .repository import SESSIONS, TIMELINE

NAME = "seedline-rebuild"


async def rebuild_conversations(
    settings: Settings, progress: Callable[[str, int], None] | None = None
) -> tuple[str, str]:
    """Returns the projection's digest before and after."""
    nc = await natsio.connect(settings.nats_servers, NAME)
    pool = await pg.open_pool(settings.database_url, NAME)
    try:
        js = nc.jetstream()
        await PostgresConversationRepository(pool).setup()
        async with pool.connection() as conn, conn.transaction():
            # The offsets stay locked to the end: a running resolver waits for the rebuild,
            # then goes on above it. Readers see the old rows or the new ones.
            reached = {p: await OFFSETS.lock(conn, p) for p in (TIMELINE, SESSIONS)}
            repo = PostgresConversationRepository(pool, conn)
            before = digest_rows(await repo.rows())
            await repo.reset()
            ends = {TIMELINE: await last_seq(js, subjects.TIMELINE_STREAM),
                    SESSIONS: await last_seq(js, subjects.SESSIONS_STREAM)}
            forgotten = await erasures(js, settings.stream_replicas)
            await _replay(js, repo, {p: (1, min(reached[p], ends[p])) for p in ends}, progress)
            await _drop_forgotten(conn, forgotten)
            after = digest_rows(await repo.rows())
            await _replay(js, repo, {p: (reached[p] + 1, ends[p]) for p in ends}, progress)
            await _drop_forgotten(conn, forgotten)
            return before, after
    finally:
        await pool.close()
        await nc.close()


async def _drop_forgotten(conn, forgotten: dict) -> None:
    """The running resolver drops these rows when an instance is forgotten; a rebuild drops
    the same, so it brings nothing of the instance back."""
    for instance in sorted(forgotten):
        for statement in FORGET_STATEMENTS:
            await conn.execute(statement, (instance,))


async def rebuild_command(settings: Settings, progress) -> dict:
    """`continuity-resolver rebuild`: the figures `seedline rebuild conversations` shows."""
    before, after = await rebuild_conversations(
        settings, lambda stream, done: progress(stream=stream, done=done)
    )
    return {"before_digest": before, "after_digest": after}


async def _replay(js, repo, ranges: dict[str, tuple[int, int]], progress) -> None:
    """Replay each stream's (first, last) range, the timeline before the lifecycle."""
    for projection, stream, subject in (
        (TIMELINE, subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL),
        (SESSIONS, subjects.SESSIONS_STREAM, subjects.SESSION_EVENTS_ALL),
    ):
        first, end = ranges[projection]
        done = 0
        async for msgs in replay(js, stream, subject, first, end):
            if stream == subjects.TIMELINE_STREAM:
                await repo.apply_timeline(timeline_facts(
                    [(decode(m.data, TimelineEntry), m) for m in msgs]))
            else:
                await repo.apply_lifecycle(
                    lifecycle_steps(session_events(msgs)), msgs[-1].metadata.sequence.stream
                )
            done += len(msgs)
            if progress:
                progress(stream, done)
