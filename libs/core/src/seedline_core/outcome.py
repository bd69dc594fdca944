"""What happened at an open, as the machine confirmed it (not what was intended)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Outcome", "decide_outcome", "outcome_after_resume_lost"]


class Outcome(StrEnum):
    RESUMED = "resumed"
    BRIEFED = "briefed"
    RESUME_UNCONFIRMED_BRIEFED = "resume_unconfirmed_briefed"
    RESUME_UNCONFIRMED_FRESH = "resume_unconfirmed_fresh"
    UNBRIEFED = "unbriefed"
    FRESH = "fresh"


def decide_outcome(
    resumed: bool | None, seeded: bool | None, brief_offered: bool, mode: str
) -> tuple[Outcome, bool, bool]:
    """The outcome and the effective (resumed, seeded) for the runner's report.

    A missing report counts as false, a brief reported as used when none was offered
    counts as unused, and a confirmed resume wins whatever else was reported: the
    engine then drops the brief unread, so seeded reads false.
    """
    if resumed is True:
        return Outcome.RESUMED, True, False
    used_brief = seeded is True and brief_offered
    asked_to_resume = mode == "resume"
    if used_brief:
        outcome = Outcome.RESUME_UNCONFIRMED_BRIEFED if asked_to_resume else Outcome.BRIEFED
    elif not brief_offered:
        outcome = Outcome.FRESH
    elif asked_to_resume:
        outcome = Outcome.RESUME_UNCONFIRMED_FRESH
    else:
        outcome = Outcome.UNBRIEFED
    return outcome, False, used_brief


def outcome_after_resume_lost(brief_offered: bool, mode: str) -> tuple[Outcome, bool, bool]:
    """The machine's final word on an open whose engine refused the resume after the launch
    reply (CONTRACT.md 7): not resumed, and the brief, when one was offered, goes
    with the next message, so it counts as given."""
    return decide_outcome(False, True, brief_offered, mode)
