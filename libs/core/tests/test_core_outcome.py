import pytest

from seedline_core.outcome import Outcome, decide_outcome


@pytest.mark.parametrize(
    ("resumed", "seeded", "brief_offered", "mode", "expected"),
    [
        # The table of CONTRACT 3.2, row by row.
        (True, False, True, "resume", (Outcome.RESUMED, True, False)),
        (False, True, True, "fresh", (Outcome.BRIEFED, False, True)),
        (False, True, True, "resume", (Outcome.RESUME_UNCONFIRMED_BRIEFED, False, True)),
        (False, False, True, "resume", (Outcome.RESUME_UNCONFIRMED_FRESH, False, False)),
        (False, False, True, "fresh", (Outcome.UNBRIEFED, False, False)),
        (False, False, False, "fresh", (Outcome.FRESH, False, False)),
        (False, False, False, "resume", (Outcome.FRESH, False, False)),
    ],
)
def test_contract_table(
    resumed: bool,
    seeded: bool,
    brief_offered: bool,
    mode: str,
    expected: tuple[Outcome, bool, bool],
) -> None:
    assert decide_outcome(resumed, seeded, brief_offered, mode) == expected


@pytest.mark.parametrize("seeded", [True, False, None])
@pytest.mark.parametrize("brief_offered", [True, False])
@pytest.mark.parametrize("mode", ["resume", "fresh"])
def test_resumed_wins_whatever_else_the_reply_says(
    seeded: bool | None, brief_offered: bool, mode: str
) -> None:
    assert decide_outcome(True, seeded, brief_offered, mode) == (Outcome.RESUMED, True, False)


def test_missing_fields_count_as_false() -> None:
    assert decide_outcome(None, None, True, "fresh") == (Outcome.UNBRIEFED, False, False)
    assert decide_outcome(None, None, True, "resume") == (
        Outcome.RESUME_UNCONFIRMED_FRESH,
        False,
        False,
    )
    assert decide_outcome(None, True, True, "fresh") == (Outcome.BRIEFED, False, True)
    assert decide_outcome(None, None, False, "fresh") == (Outcome.FRESH, False, False)


def test_seeded_without_a_brief_offered_counts_as_not_seeded() -> None:
    assert decide_outcome(False, True, False, "fresh") == (Outcome.FRESH, False, False)
    assert decide_outcome(None, True, False, "resume") == (Outcome.FRESH, False, False)


def test_outcome_values_are_the_wire_names() -> None:
    assert [o.value for o in Outcome] == [
        "resumed",
        "briefed",
        "resume_unconfirmed_briefed",
        "resume_unconfirmed_fresh",
        "unbriefed",
        "fresh",
    ]


def test_a_resume_lost_after_the_reply_is_briefed_or_fresh_never_resumed():
    from seedline_core.outcome import outcome_after_resume_lost

    assert outcome_after_resume_lost(True, "resume") == (
        Outcome.RESUME_UNCONFIRMED_BRIEFED, False, True)
    assert outcome_after_resume_lost(False, "resume") == (Outcome.FRESH, False, False)
