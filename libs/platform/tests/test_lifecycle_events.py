"""The one reading of SEEDLINE_SESSIONS: lifecycle steps and the opens fold (1.2 resume_lost)."""

from __future__ import annotations

from seedline_contracts.codec import encode
from seedline_contracts.events import ContinuityDecided, LaunchPlan, Opened, ResumeLost, SeedComposed
from seedline_contracts.sessions import BriefStats, Continuity, NoticeBody, OpenReply
from seedline_core import lifecycle as lc
from seedline_core.notices import wording_violations
from seedline_devtools.fakes import FakeMsg
from seedline_platform.lifecycle_events import (
    RequestedHere,
    Step,
    brief_given,
    lifecycle_steps,
    session_events,
    opens_of,
    reply_after_resume_lost,
)

AT = "2026-12-02T10:00:00Z"
RESUME = Continuity("resume", "csess_0", "resume", "last touched 2 hours ago")
PLAN = LaunchPlan("inst", "apps/x", "claude", "mac", RESUME, "k0", None, False, request_id="r1")
BRIEF = BriefStats(3, 90, 0, 7, "ab" * 32, spent=False)


def resumed_reply(brief: BriefStats | None = BRIEF) -> OpenReply:
    return OpenReply("csess_a", "mac", True, False, "resumed", RESUME, brief,
                     NoticeBody("c", "c", "m", "info"))


def test_a_resume_lost_reply_is_briefed_when_a_brief_was_offered_and_fresh_when_not():
    corrected = reply_after_resume_lost(resumed_reply())
    assert (corrected.outcome, corrected.resumed, corrected.seeded) == (
        "resume_unconfirmed_briefed", False, True)
    assert corrected.brief.spent is True and brief_given(corrected)
    assert corrected.notice.tone == "warning" and "was given a brief" in corrected.notice.chat
    assert not wording_violations(corrected.notice.mcp)
    bare = reply_after_resume_lost(resumed_reply(None))
    assert (bare.outcome, bare.seeded, bare.brief) == ("fresh", False, None)
    assert not brief_given(resumed_reply())


def test_the_steps_and_the_opens_fold_read_a_resume_lost_the_same_way():
    events = [
        ContinuityDecided(session_id="csess_a", at=AT, continuity=RESUME,
                          seed_source="repo_timeline", until_seq=7, entries_upto=7, plan=PLAN),
        SeedComposed(session_id="csess_a", at=AT, brief=BRIEF, plan=PLAN, text="the brief"),
        Opened(session_id="csess_a", at=AT, reply=resumed_reply(), plan=PLAN,
               engine_session_id="k0"),
        ResumeLost(session_id="csess_a", at=AT, node_id="mac", reason="gone",
                   reply=reply_after_resume_lost(resumed_reply())),
    ]
    (view,) = opens_of(list(enumerate(events, 1)))
    assert view.reply.outcome == "resume_unconfirmed_briefed" and view.brief_text == "the brief"
    steps = lifecycle_steps(
        session_events([FakeMsg(encode(e), stream_seq=n) for n, e in enumerate(events, 1)]))
    assert [type(s.event) for s in steps] == [lc.Opened, lc.ResumeLost]
    opened, lost = steps
    assert opened.request_id == "r1" and not opened.corrects
    assert lost.corrects and lost.event.outcome == "resume_unconfirmed_briefed"
    # Without the reply read back, the fold still corrects what it holds.
    (bare,) = opens_of(list(enumerate(
        [*events[:3], ResumeLost(session_id="csess_a", at=AT, node_id="mac")], 1)))
    assert bare.reply.outcome == "resume_unconfirmed_briefed"


def test_a_request_of_a_conversation_this_copy_folded_a_request_of_is_left_out():
    def requested(seq, session):
        return Step(seq, session, lc.Requested(session, "inst-a", "apps/x", seq, "mac", "claude"),
                    None, None)

    def stopped(seq, session):
        return Step(seq, session, lc.Stopped("requested"), None, None)

    here = RequestedHere(limit=2)
    first = [requested(1, "csess_a"), stopped(2, "csess_b")]
    assert here.news(first) == first  # nothing folded yet
    here.folded(first)
    # The wake's open_requested: changes nothing, left out; the rest stays, in order.
    assert here.news([requested(3, "csess_a"), stopped(4, "csess_a"),
                      requested(5, "csess_b")]) == [stopped(4, "csess_a"), requested(5, "csess_b")]
    here.folded([requested(5, "csess_b"), requested(6, "csess_c")])
    # The newest two are kept: csess_a, the oldest, is folded as before.
    assert here.news([requested(7, "csess_a")]) == [requested(7, "csess_a")]
    assert here.news([requested(8, "csess_c")]) == []
