"""What happened at an open, as the machine confirmed it (not what was intended)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Outcome", "decide_outcome"]


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
