"""Replaying the streams rebuilds the same decisions and the same brief bytes."""

from __future__ import annotations

import asyncio

import pytest

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.events import ContinuityDecided
from seedline_continuity_resolver.rebuild import rebuild_conversations
from seedline_seed_composer.brief_of_decision import compose_for
from seedline_timeline_writer.rebuild import rebuild_timeline

pytestmark = pytest.mark.servers


async def test_rebuilt_projections_give_the_same_decision_and_brief_bytes(system):
    await system.start_runner()
    for n in range(1, 30):
        await system.append(n, content=f"entry number {n} " + "x" * (n * 37))
    first = await system.open()
    assert first["ok"], first
    before, after = await rebuild_conversations(system.settings)
    assert before == after
    result = await rebuild_timeline(system.settings, None)
    assert result.before_digest == result.after_digest

    js = system.nc.jetstream()
    decided = [
        decode((await js.get_msg(subjects.SESSIONS_STREAM, seq)).data, ContinuityDecided)
        for seq in range(1, (await js.stream_info(subjects.SESSIONS_STREAM)).state.last_seq + 1)
        if b'"continuity_decided"' in (await js.get_msg(subjects.SESSIONS_STREAM, seq)).data
    ]
    recomposed = await compose_for(decided[0], system.composer.parts.composer.reader)
    assert recomposed is not None and recomposed.sha256 == first["brief"]["sha256"]

    second = await system.open()
    assert second["continuity"]["reason_code"] == "resume"
    assert second["continuity"]["resume_from"] == first["session_id"]


async def test_a_resolver_behind_the_streams_is_not_reported_as_drift(settings):
    """The rebuild compares at the offsets the projection had reached, then reads on."""
    from seedline_continuity_resolver.app import create_app as create_resolver
    from seedline_continuity_resolver.postgres_repository import PostgresConversationRepository
    from seedline_devtools.testing import request, running
    from seedline_platform import natsio, pg
    from seedline_timeline_writer.app import create_app as create_writer

    def entry(n: int) -> dict:
        return {"entry_id": f"lag-{n}", "instance_id": "bd43f4de", "repo": "apps/chess-academy",
                "session_id": "csess_lagging", "kind": "chat_user", "content": f"entry {n}",
                "at": f"2026-08-17T10:00:{n:02d}Z", "engine": "scripted"}

    async def activity_seq() -> int:
        pool = await pg.open_pool(settings.database_url, "test")
        try:
            rows = await PostgresConversationRepository(pool).rows()
        finally:
            await pool.close()
        return max((r.activity_seq for r in rows if r.session_id == "csess_lagging"), default=0)

    nc = await natsio.connect(settings.nats_servers, "test")
    try:
        async with running(create_writer(settings)):
            async with running(create_resolver(settings)):
                for n in range(3):
                    seq = (await request(nc, subjects.API_TIMELINE_APPEND, entry(n)))["seq"]
                for _ in range(200):
                    if await activity_seq() == seq:
                        break
                    await asyncio.sleep(0.05)
                assert await activity_seq() == seq
            # The resolver is down: these reach the stream, not its projection.
            for n in range(3, 6):
                last = (await request(nc, subjects.API_TIMELINE_APPEND, entry(n)))["seq"]
        assert await activity_seq() == seq < last
        before, after = await rebuild_conversations(settings)
        assert before == after
        assert await activity_seq() == last
    finally:
        await nc.close()
