"""Drop the conversation projection and replay both streams into it.

The open_requests ledger is not a projection (it remembers which request ids
were claimed), so it is kept; replies are re-applied to it idempotently.
"""

from __future__ import annotations

from typing import Callable

from seedline_contracts import subjects
from seedline_platform import natsio, pg
from seedline_platform.replay import last_seq, replay
from seedline_platform.settings import Settings

from .projection import SESSIONS_PROJECTION, TIMELINE_PROJECTION, ConversationProjection


async def digest_conversations(pool) -> str:
    import hashlib

    h = hashlib.sha256()
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT session_id, instance_id, repo, last_activity, activity_seq, entry_engine,"
            " open_engine, node_id, resume_key, resume_node_id FROM conversations ORDER BY session_id"
        )
        for row in await cur.fetchall():
            h.update(repr(row).encode())
    return h.hexdigest()


async def rebuild_conversations(
    settings: Settings, progress: Callable[[str, int], None] | None = None
) -> tuple[str, str]:
    """Returns the projection's digest before and after."""
    nc = await natsio.connect(settings.nats_servers, "seedline-rebuild")
    pool = await pg.open_pool(settings.database_url, "seedline-rebuild")
    try:
        js = nc.jetstream()
        projection = ConversationProjection(pool)
        await projection.setup()
        before = await digest_conversations(pool)
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("TRUNCATE conversations")
            await conn.execute(
                "DELETE FROM projection_offsets WHERE projection = ANY(%s)",
                ([TIMELINE_PROJECTION, SESSIONS_PROJECTION],),
            )
        for stream, subject, apply in (
            (subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL, projection.apply_timeline),
            (subjects.SESSIONS_STREAM, subjects.SESSION_EVENTS_ALL, projection.apply_sessions),
        ):
            end = await last_seq(js, stream)
            done = 0
            async for msgs in replay(js, stream, subject, 1, end):
                await apply(msgs)
                done += len(msgs)
                if progress:
                    progress(stream, done)
        return before, await digest_conversations(pool)
    finally:
        await pool.close()
        await nc.close()
