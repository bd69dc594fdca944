"""Where the timeline draws each open: pure placement, from events shaped as in CONTRACT 7."""

from __future__ import annotations

import io

import msgspec

from seedline_contracts.errors import ErrorBody
from seedline_contracts.events import ContinuityDecided, LaunchPlan, Opened, OpenFailed, Relocated
from seedline_contracts.sessions import BriefStats, Continuity, NoticeBody, OpenReply
from seedline_cli.publish_file import capped_lines
from seedline_cli.timeline_opens import first_decisions, interleave, marks_from_events
from seedline_contracts.events import SessionEvent


AT = "2026-12-01T10:00:00Z"


def decided(session, until_seq, reason_code, *, relocation_from=None, wake_seq=None, node="m1",
            relocation=False):
    continuity = Continuity("fresh", None, reason_code, f"because {reason_code}")
    plan = LaunchPlan("inst", "apps/x", "scripted", node, continuity, None, None, False,
                      relocation_from=relocation_from, wake_seq=wake_seq, relocation=relocation)
    return as_dict(ContinuityDecided(session_id=session, at=AT, continuity=continuity,
                                     seed_source="repo_timeline", until_seq=until_seq,
                                     entries_upto=until_seq, plan=plan))


def reply(session, outcome, node="m1"):
    mode = "resume" if outcome == "resumed" else "fresh"
    return OpenReply(session, node, outcome == "resumed", outcome == "briefed", outcome,
                     Continuity(mode, None, "no_previous", "because"),
                     BriefStats(1, 10, 0, 1, "ab" * 32), NoticeBody("c", "c", "m", "warning"))


def opened(session, outcome):
    plan = LaunchPlan("inst", "apps/x", "scripted", "m1",
                      Continuity("fresh", None, "no_previous", "because"), None, None, False)
    return as_dict(Opened(session_id=session, at=AT, reply=reply(session, outcome), plan=plan))


def relocated(session, from_node, to_node, outcome=None):
    return as_dict(Relocated(session_id=session, at=AT, from_node_id=from_node,
                             to_node_id=to_node,
                             reply=reply(session, outcome, to_node) if outcome else None))


def as_dict(event) -> dict:
    return msgspec.to_builtins(event)


def read(bodies: list[dict]) -> list:
    """Events as the CLI reads them: through the contract's types, in stream order; one it
    cannot read is left out."""
    found = []
    for seq, body in enumerate(bodies, 1):
        try:
            found.append((seq, msgspec.convert(body, SessionEvent)))
        except msgspec.MsgspecError:
            continue
    return found


def entry(seq, session):
    return {"seq": seq, "session_id": session, "kind": "chat_user", "content": str(seq)}


def test_each_open_keeps_the_decision_made_then_and_a_relocation_is_its_own_mark():
    marks = marks_from_events(read([
        {"type": "open_requested", "session_id": "c1"},
        decided("c1", 2, "no_previous"),
        opened("c1", "briefed"),
        {"type": "engine_bound", "session_id": "c1"},
        decided("c1", 5, "other_machine", relocation_from="m1", node="m2"),
        relocated("c1", "m1", "m2"),
        opened("c1", "briefed"),
    ]))
    assert [(m.kind, m.after_seq, m.continuity["reason_code"], m.outcome) for m in marks] == [
        ("open", 2, "no_previous", "briefed"),
        ("relocation", 5, "other_machine", "briefed"),
    ]
    assert marks[1].from_node_id == "m1" and marks[1].node_id == "m2"
    assert first_decisions(marks)["c1"]["reason_code"] == "no_previous"
    assert marks[0].text() == "opened fresh: because no_previous · outcome briefed"
    assert marks[1].text().startswith("relocated to m2, fresh: because other_machine")


def test_a_relocation_answered_in_its_relocated_event_has_its_outcome():
    marks = marks_from_events(read([
        decided("c1", 2, "no_previous"), opened("c1", "briefed"),
        decided("c1", 4, "other_machine", node="m2", relocation=True),
        relocated("c1", "m1", "m2", "briefed"),
    ]))
    assert [(m.kind, m.outcome, m.from_node_id) for m in marks] == [
        ("open", "briefed", None), ("relocation", "briefed", "m1")]


def test_a_failed_open_and_a_wake_say_so():
    failed = marks_from_events(read([
        decided("c2", 0, "no_previous"),
        as_dict(OpenFailed(session_id="c2", at=AT,
                           error=ErrorBody("runner_offline", "Your Mac mini is offline."),
                           plan=LaunchPlan("inst", "apps/x", "scripted", "m1",
                                           Continuity("fresh", None, "no_previous", "b"),
                                           None, None, False))),
    ]))
    # Nothing was opened, so the line must not begin "opened".
    assert failed[0].text().startswith("open failed: Your Mac mini is offline. (it had decided")
    assert "opened" not in failed[0].text()
    woken = marks_from_events(read([decided("c3", 6, "no_resume_key", wake_seq=7)]))
    assert (woken[0].kind, woken[0].after_seq) == ("wake", 7)
    assert woken[0].text().startswith("woken by #7, fresh:")
    assert woken[0].text().endswith("no answer from the machine yet")


def test_marks_go_between_the_entries_they_came_between():
    marks = marks_from_events(read([decided("c1", 2, "no_previous"), opened("c1", "briefed"),
                               decided("c1", 4, "other_machine", relocation_from="m1")]))
    entries = [entry(1, "old"), entry(2, "old"), entry(3, "c1"), entry(4, "c1"), entry(5, "c1")]
    order = [item["seq"] if isinstance(item, dict) else item.kind
             for item in interleave(entries, marks, None, None)]
    assert order == [1, 2, "open", 3, 4, "relocation", 5]


def test_a_mark_past_the_last_entry_shows_only_when_nothing_newer_lies_outside_the_view():
    marks = marks_from_events(read([decided("c1", 5, "no_previous")]))
    entries = [entry(4, "old"), entry(5, "old")]
    assert interleave(entries, marks, None, None)[-1].kind == "open"
    assert interleave(entries, marks, None, 6)[-1].kind == "open"
    assert all(isinstance(i, dict) for i in interleave(entries, marks, None, 5))


def test_a_mark_older_than_the_view_is_left_to_the_older_page():
    marks = marks_from_events(read([decided("a", 1, "no_previous"), decided("b", 7, "past_window")]))
    entries = [entry(9, "b"), entry(10, "b")]
    shown = [i.session_id for i in interleave(entries, marks, 7, None) if not isinstance(i, dict)]
    assert shown == ["b"]
    shown = [i.session_id for i in interleave(entries, marks, None, None)
             if not isinstance(i, dict)]
    assert shown == ["a", "b"]


def test_capped_lines_keeps_lines_up_to_the_limit_and_only_measures_longer_ones():
    data = b"short\n" + b"x" * 50 + b"\n" + b"y" * 10 + b"\nlast"
    lines = list(capped_lines(io.BytesIO(data), limit=20))
    assert lines == [(1, b"short\n", 6), (2, None, 51), (3, b"y" * 10 + b"\n", 11),
                     (4, b"last", 4)]


def test_a_resume_lost_after_the_reply_shows_the_corrected_outcome():
    from seedline_contracts.events import ResumeLost

    marks = marks_from_events(read([
        decided("c1", 2, "resume"), opened("c1", "resumed"),
        as_dict(ResumeLost(session_id="c1", at=AT, node_id="m1", reason="no record")),
    ]))
    assert [m.outcome for m in marks] == ["resume_unconfirmed_briefed"]
    assert marks[0].to_json()["outcome"] == "resume_unconfirmed_briefed"
    assert marks[0].text().endswith("· outcome resume_unconfirmed_briefed")
