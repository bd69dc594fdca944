"""Drop the conversation projection and replay both streams into it (DESIGN.md rule 3).

The open_requests ledger is not a projection (it holds which request ids were
claimed), so it is kept; replies are re-applied to it idempotently. Equal digests
before and after mean the projection was what the streams say.
"""

from __future__ import annotations

from typing import Callable

from seedline_contracts import subjects
from seedline_platform import natsio, pg
from seedline_platform.replay import last_seq, replay
from seedline_platform.settings import Settings

from .app import lifecycle_steps, timeline_facts
from .postgres_repository import OFFSETS, PostgresConversationRepository, digest_rows
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
            for projection in (TIMELINE, SESSIONS):
                await OFFSETS.lock(conn, projection)
            repo = PostgresConversationRepository(pool, conn)
            before = digest_rows(await repo.rows())
            await repo.reset()
            await _replay(js, repo, progress)
            return before, digest_rows(await repo.rows())
    finally:
        await pool.close()
        await nc.close()


async def rebuild_command(settings: Settings, progress) -> dict:
    """`continuity-resolver rebuild`: the figures `seedline rebuild conversations` shows."""
    before, after = await rebuild_conversations(
        settings, lambda stream, done: progress(stream=stream, done=done)
    )
    return {"before_digest": before, "after_digest": after}


async def _replay(js, repo, progress) -> None:
    for stream, subject in (
        (subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL),
        (subjects.SESSIONS_STREAM, subjects.SESSION_EVENTS_ALL),
    ):
        end = await last_seq(js, stream)
        done = 0
        async for msgs in replay(js, stream, subject, 1, end):
            if stream == subjects.TIMELINE_STREAM:
                await repo.apply_timeline(timeline_facts(msgs))
            else:
                await repo.apply_lifecycle(
                    lifecycle_steps(msgs), msgs[-1].metadata.sequence.stream
                )
            done += len(msgs)
            if progress:
                progress(stream, done)
