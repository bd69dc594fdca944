from seedline_contracts.timeline import MAX_ENTRY_ID_CHARS

from seedline_runner.engines.base import EngineOutput
from seedline_runner.timeline_out import LAUNCH_STEP, entry_id, timeline_entry, turn_step


def test_entry_ids_are_the_same_every_time_and_differ_per_step_and_output():
    assert entry_id("csess_1", LAUNCH_STEP, 0) == entry_id("csess_1", LAUNCH_STEP, 0)
    ids = {
        entry_id("csess_1", LAUNCH_STEP, 0),
        entry_id("csess_1", LAUNCH_STEP, 1),
        entry_id("csess_1", turn_step(7), 0),
        entry_id("csess_2", turn_step(7), 0),
    }
    assert len(ids) == 4


def test_an_id_too_long_or_with_spaces_becomes_a_digest_that_is_still_deterministic():
    long_session = "s" * 200
    spaced = "has space"

    for session_id in (long_session, spaced):
        made = entry_id(session_id, LAUNCH_STEP, 0)
        assert made == entry_id(session_id, LAUNCH_STEP, 0)
        assert len(made) <= MAX_ENTRY_ID_CHARS and " " not in made
    assert entry_id(long_session, LAUNCH_STEP, 0) != entry_id(long_session, LAUNCH_STEP, 1)


def test_an_entry_carries_its_place_in_the_step_and_the_launch_ids():
    entries = [
        timeline_entry(
            instance_id="bd43f4de",
            repo="apps/chess-academy",
            session_id="csess_1",
            engine="scripted",
            step=turn_step(9227),
            index=index,
            output=output,
            at="2026-08-17T10:00:00.000Z",
        )
        for index, output in enumerate(
            [EngineOutput("chat_assistant", "hi"), EngineOutput("outcome", "done")]
        )
    ]

    assert [(e.entry_id, e.kind, e.content) for e in entries] == [
        ("csess_1:turn-9227:0", "chat_assistant", "hi"),
        ("csess_1:turn-9227:1", "outcome", "done"),
    ]
    assert {(e.instance_id, e.repo, e.session_id, e.engine) for e in entries} == {
        ("bd43f4de", "apps/chess-academy", "csess_1", "scripted")
    }


def test_an_output_the_engines_transcript_names_keeps_that_id():
    named = EngineOutput("terminal", "ok", entry_id="claude:s-1:u-1:0")
    entry = timeline_entry(instance_id="bd43f4de", repo="apps/chess-academy", session_id="csess_1",
                           engine="claude", step=LAUNCH_STEP, index=3, output=named,
                           at="2026-08-17T10:00:00.000Z")

    assert entry.entry_id == "claude:s-1:u-1:0"
    assert entry.session_id == "csess_1"  # published on the platform's conversation


def test_the_end_of_a_step_is_its_end_mark_even_when_the_transcript_names_the_output():
    from seedline_runner.timeline_out import END_PART, end_entry_id

    named = EngineOutput("chat_assistant", "done", entry_id="claude:s-1:u-1:0", ends_turn=True)
    entry = timeline_entry(instance_id="bd43f4de", repo="apps/chess-academy", session_id="csess_1",
                           engine="claude", step=turn_step(12), index=END_PART, output=named,
                           at="2026-08-17T10:00:00.000Z")
    assert entry.entry_id == end_entry_id("csess_1", turn_step(12)) == "csess_1:turn-12:end"
    long_session = "csess_" + "x" * 200
    assert end_entry_id(long_session, LAUNCH_STEP) == entry_id(long_session, LAUNCH_STEP, END_PART)
