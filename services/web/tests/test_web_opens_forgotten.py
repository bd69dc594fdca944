"""The console's projection of opens keeps no open of a wake by a forgotten message, although
its events come after the instance's rows were dropped (erasure.Forgotten). On Postgres."""

from __future__ import annotations

import pytest

from seedline_contracts.codec import encode
from seedline_contracts.events import ContinuityDecided, LaunchPlan, SessionEvent
from seedline_contracts.instances import Erasure
from seedline_contracts.sessions import Continuity
from seedline_devtools.fakes import FakeMsg
from seedline_platform import pg
from seedline_platform.consumer import Batch
from seedline_platform.lifecycle_events import session_events
from seedline_platform.settings import Settings
from seedline_web.opens import OpensProjection
from seedline_web.routes import routes

pytestmark = pytest.mark.servers
AT = "2026-12-01T10:00:00Z"


def decided(session_id: str, instance_id: str, wake_seq: int | None) -> ContinuityDecided:
    plan = LaunchPlan(instance_id, "apps/x", "claude", "mac",
                      Continuity("fresh", None, "no_previous", "none"), None, None, False,
                      wake_seq=wake_seq)
    return ContinuityDecided(session_id=session_id, at=AT, continuity=plan.continuity,
                             seed_source=None, until_seq=None, entries_upto=0, plan=plan)


async def test_no_open_of_a_wake_by_a_forgotten_message_is_kept(database_url):
    (row,) = [r for r in routes(Settings()) if r.handler is OpensProjection.apply]
    pool = await pg.open_pool(database_url, "test-web-opens")
    try:
        opens = OpensProjection(None, pool, row)
        await opens.setup()
        await opens.forgotten.add(Erasure(instance_id="gone", reason="left", by=None, at=AT,
                                          entries=1, through_seq=10))
        events = [decided("csess_covered", "gone", 10), decided("csess_later", "gone", 11),
                  decided("csess_asked", "gone", None), decided("csess_kept", "kept", 3)]
        msgs = [FakeMsg(encode(e), subject=f"seedline.session.{e.session_id}.continuity_decided",
                        stream_seq=n) for n, e in enumerate(events, start=1)]
        batch: Batch[SessionEvent] = Batch(session_events(msgs), len(msgs))
        await opens.apply(batch)
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT session_id FROM web_open_views ORDER BY 1")
            kept = [r[0] for r in await cur.fetchall()]
        assert kept == ["csess_asked", "csess_kept", "csess_later"]
    finally:
        await pool.close()
