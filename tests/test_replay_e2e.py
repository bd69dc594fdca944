"""Replaying the streams rebuilds the same decisions and the same brief bytes."""

from __future__ import annotations

import pytest

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.events import ContinuityDecided
from seedline_continuity_resolver.rebuild import rebuild_conversations
from seedline_seed_composer.composing import compose_for
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
    recomposed = await compose_for(decided[0], system.composer.composer.reader)
    assert recomposed is not None and recomposed.sha256 == first["brief"]["sha256"]

    second = await system.open()
    assert second["continuity"]["reason_code"] == "resume"
    assert second["continuity"]["resume_from"] == first["session_id"]
