"""The composer on fakes: one seed_composed per decision, its bytes kept on redelivery."""

from __future__ import annotations


from seedline_contracts.codec import decode, encode
from seedline_contracts.events import ContinuityDecided, LaunchPlan, SeedComposed
from seedline_contracts.sessions import BriefGetRequest, Continuity
from seedline_core.brief_rows import BriefRow
from seedline_devtools.fakes import FakeMsg
from seedline_platform.publishing import RecordingPublisher
from seedline_platform.settings import Settings
from seedline_seed_composer.briefs import InMemoryBriefStore
from seedline_seed_composer.bootstrap import Ports, bootstrap
from seedline_seed_composer.handlers import Composer
from seedline_seed_composer.reader import RowsReader

AT = "2026-12-01T10:00:00Z"


def decision(engine: str = "claude") -> ContinuityDecided:
    plan = LaunchPlan("inst", "apps/x", engine, "mac",
                      Continuity("fresh", None, "no_previous", "none"), None, "go", False)
    return ContinuityDecided(session_id="csess_a", at=AT, continuity=plan.continuity,
                             seed_source="repo_timeline", until_seq=3, entries_upto=3, plan=plan)


def composer_with(publisher, store, settings, reader) -> Composer:
    async def recorded(session_id):
        found = [decode(p, SeedComposed) for s, p, _ in publisher.messages]
        return found[-1] if found else None

    return bootstrap(settings, Ports(publisher=publisher, reader=reader, store=store,
                                     recorded=recorded, clock=lambda: AT)).composer


async def test_a_redelivered_decision_keeps_the_recorded_bytes_whatever_the_budget_now():
    rows = [("inst", "apps/x", BriefRow(n, "csess_old", "terminal", "x" * 3000, AT, None))
            for n in (1, 2, 3)]
    reader, store, publisher = RowsReader(rows), InMemoryBriefStore(), RecordingPublisher()
    first = composer_with(publisher, store, Settings(), reader)
    msg = FakeMsg(encode(decision()), stream_seq=7)
    await first.handle_decision(decode(msg.data, ContinuityDecided), msg)
    (recorded,) = [decode(p, SeedComposed) for _, p, _ in publisher.messages]
    assert recorded.decided_seq == 7 and recorded.brief.rows == 3
    # The budget setting changed before the decision came back (an ack was lost).
    tighter = Settings.from_env({"SEEDLINE_BRIEF_BUDGETS": "claude=11:3200"})
    again = composer_with(publisher, store, tighter, reader)
    await again.handle_decision(decision(), FakeMsg(encode(decision()), stream_seq=7,
                                                    num_delivered=2))
    assert len(publisher.messages) == 1
    kept = await store.latest("csess_a")
    assert kept.sha256 == recorded.brief.sha256 and kept.text == recorded.text
    reply = await again.get_brief(BriefGetRequest(session_id="csess_a"))
    assert reply.sha256 == recorded.brief.sha256


async def test_a_wake_by_a_forgotten_message_is_not_briefed_and_keeps_no_row():
    import msgspec

    from seedline_contracts.instances import Erasure

    rows = [("inst", "apps/x", BriefRow(n, "csess_old", "terminal", "words", AT, None))
            for n in (1, 2, 3)]
    reader, store, publisher = RowsReader(rows), InMemoryBriefStore(), RecordingPublisher()
    parts = bootstrap(Settings(), Ports(publisher=publisher, reader=reader, store=store,
                                        recorded=lambda _: None, clock=lambda: AT))
    await parts.forgetting._forgotten.add(Erasure(
        instance_id="inst", reason="left", by=None, at=AT, entries=3, through_seq=4))

    def wake(wake_seq: int, session_id: str) -> ContinuityDecided:
        asked = decision()
        return msgspec.structs.replace(asked, session_id=session_id,
                                       plan=msgspec.structs.replace(asked.plan, wake_seq=wake_seq))

    for n, asked in enumerate((wake(4, "csess_covered"), wake(5, "csess_after")), start=7):
        await parts.composer.handle_decision(asked, FakeMsg(encode(asked), stream_seq=n))
    assert [decode(p, SeedComposed).session_id for _, p, _ in publisher.messages] == [
        "csess_after"]
    assert await store.latest("csess_covered") is None
    assert await store.latest("csess_after") is not None
