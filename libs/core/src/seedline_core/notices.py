"""Every text Seedline shows to a person: open notices, notifications and error messages.

People are told what happened to their conversation and what their next message will
do, in plain words and never in the vocabulary of processes (see FORBIDDEN_PATTERNS).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from seedline_core.ages import describe_duration
from seedline_core.outcome import Outcome

__all__ = [
    "BRIEF_NOT_GIVEN",
    "FORBIDDEN_PATTERNS",
    "Notice",
    "error_message",
    "offline_text",
    "launch_refused_for_instance",
    "not_woken_text",
    "wake_offline_text",
    "open_notice",
    "resume_lost_text",
    "runner_offline_notice_text",
    "runner_restarted_text",
    "stopped_idle_text",
    "wording_violations",
]

Tone = Literal["info", "warning"]

FORBIDDEN_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"remember\w*", re.IGNORECASE),
    re.compile(r"restored", re.IGNORECASE),
    re.compile(r"as\s+if\s+it\s+never", re.IGNORECASE),
    re.compile(r"\bsessions?\b", re.IGNORECASE),
)


def wording_violations(text: str) -> list[str]:
    """Every forbidden word or phrase found in `text`, as written there."""
    return [match.group(0) for pattern in FORBIDDEN_PATTERNS for match in pattern.finditer(text)]


@dataclass(frozen=True)
class Notice:
    chat: str
    console: str
    mcp: str
    tone: Tone

    def to_wire(self) -> dict[str, str]:
        return {"chat": self.chat, "console": self.console, "mcp": self.mcp, "tone": self.tone}


_BRIEF_GIVEN = "The engine was given a brief of what happened earlier on this repo"
_RECONSTRUCTED = (
    "its context was reconstructed from the timeline, not carried over: it has not seen "
    "file contents, tool state or anything worked out but never said"
)


def _resumed(reason: str) -> Notice:
    return Notice(
        chat=(
            f"Picked up where you left off: {reason}. The engine continued its own earlier "
            "conversation."
        ),
        console=f"Continued the earlier conversation: {reason}.",
        mcp=f"The engine continued its own earlier conversation on this repo: {reason}.",
        tone="info",
    )


def _briefed(reason: str) -> Notice:
    return Notice(
        chat=f"A fresh start: {reason}. {_BRIEF_GIVEN}, so {_RECONSTRUCTED}.",
        console=(
            f"Fresh start with a brief: {reason}. The engine was given a brief; its context "
            "was reconstructed, not carried over."
        ),
        mcp=f"The conversation started fresh: {reason}. {_BRIEF_GIVEN}, and {_RECONSTRUCTED}.",
        tone="warning",
    )


def _resume_unconfirmed_briefed(reason: str) -> Notice:
    not_confirmed = (
        f"Tried to continue the earlier conversation: {reason}. The machine did not confirm "
        "it, so the engine started fresh."
    )
    return Notice(
        chat=f"{not_confirmed} {_BRIEF_GIVEN}, so {_RECONSTRUCTED}.",
        console=(
            f"Continuing was not confirmed by the machine: {reason}. The engine started fresh "
            "and was given a brief; its context was reconstructed, not carried over."
        ),
        mcp=f"{not_confirmed} {_BRIEF_GIVEN}, and {_RECONSTRUCTED}.",
        tone="warning",
    )


def _resume_unconfirmed_fresh(reason: str) -> Notice:
    told = (
        f"Tried to continue the earlier conversation: {reason}. The machine did not confirm "
        "it, so the engine started fresh without any earlier context."
    )
    return Notice(
        chat=told,
        console=(
            f"The machine did not confirm continuing: {reason}. The engine started fresh "
            "without earlier context."
        ),
        mcp=told,
        tone="warning",
    )


def _unbriefed(reason: str) -> Notice:
    offered = (
        f"A fresh start: {reason}. A brief of what happened earlier on this repo was "
        "offered, but the machine did not confirm using it"
    )
    return Notice(
        chat=f"{offered}, so expect the engine to have no earlier context.",
        console=(
            f"Fresh start: {reason}. A brief was offered, but the machine did not confirm using it."
        ),
        mcp=f"{offered}, so the engine may have no earlier context.",
        tone="warning",
    )


def _fresh(reason: str) -> Notice:
    return Notice(
        chat=f"A fresh start without earlier context: {reason}.",
        console=f"Fresh start, no earlier context: {reason}.",
        mcp=f"The conversation started fresh; the engine has no earlier context: {reason}.",
        tone="warning",
    )


_OPEN_NOTICES = {
    Outcome.RESUMED: _resumed,
    Outcome.BRIEFED: _briefed,
    Outcome.RESUME_UNCONFIRMED_BRIEFED: _resume_unconfirmed_briefed,
    Outcome.RESUME_UNCONFIRMED_FRESH: _resume_unconfirmed_fresh,
    Outcome.UNBRIEFED: _unbriefed,
    Outcome.FRESH: _fresh,
}


def open_notice(outcome: Outcome, reason: str, carried: str | None = None) -> Notice:
    """What an open did, told three ways; each names the decision's reason sentence, and
    what came along from another machine when something did (`carried`)."""
    notice = _OPEN_NOTICES[Outcome(outcome)](reason)
    if carried is None:
        return notice
    return Notice(chat=f"{notice.chat} {carried}", console=f"{notice.console} {carried}",
                  mcp=f"{notice.mcp} {carried}", tone=notice.tone)


_NOT_APPLIED = {
    "own_changes": "were not applied: the checkout here has changes of its own, which were "
                   "left as they are",
    "base_missing": "were not applied: the checkout here does not have the commit they were "
                    "made on",
    "conflict": "were not applied: they conflict with what the checkout here holds, so "
                "nothing was changed",
    "over_limit": "did not come along: they were over the size limits of a saved tree",
    "no_checkout": "were not applied: there is no checkout of the repo here",
    "unreadable": "could not be read here, so nothing was changed",
}


def carried_sentence(carried) -> str:
    """What came along with a conversation that moved machines, for people (its working
    tree, its engine's record), from a reply's `carried`."""
    saved = f"The uncommitted changes saved on {carried.from_label}"
    if carried.applied and carried.files == 0:
        told = (f"The checkout here was put at the commit it was at on {carried.from_label}; "
                "it had no uncommitted changes.")
    elif carried.applied:
        files = f"{carried.files:,} file{'' if carried.files == 1 else 's'}"
        told = f"{saved} ({files}) came along and were applied here."
    else:
        told = f"{saved} {_NOT_APPLIED.get(carried.reason or '', _NOT_APPLIED['unreadable'])}."
    if carried.left_out:
        n = len(carried.left_out)
        told += (f" {n} secret file{' was' if n == 1 else 's were'} left out: "
                 f"{', '.join(carried.left_out[:5])}{' and more' if n > 5 else ''}.")
    if carried.record_placed:
        told += " The engine's own record of the conversation came along too."
    return told


# (CONTRACT.md 3.2) Every receipt of a brief the engine was not given says so.
BRIEF_NOT_GIVEN = "offered; not given: the engine continued its own conversation"


def resume_lost_text(brief_offered: bool) -> str:
    """The engine refused to continue after the open said it had (CONTRACT.md 7)."""
    lost = ("The engine could not continue its earlier conversation after all, although "
            "the open first said it had.")
    if not brief_offered:
        return f"{lost} It goes on without any earlier context."
    return (f"{lost} It was given a brief of what happened earlier on this repo with your "
            f"next message instead, so {_RECONSTRUCTED}.")


def _machine(label: str | None, node_id: str | None) -> str:
    label = (label or "").strip()
    if label:
        return f"your {label}"
    return f"the machine {node_id}" if node_id else "the machine"


def _sentence_start(text: str) -> str:
    return text[:1].upper() + text[1:]


def offline_text(label: str | None, node_id: str) -> str:
    """The machine by its label ("Your Mac mini is offline."), else by its node id."""
    return f"{_sentence_start(_machine(label, node_id))} is offline."


def stopped_idle_text(idle: timedelta, label: str | None) -> str:
    return (
        f"To free {_machine(label, None)}, this conversation was stopped after "
        f"{describe_duration(idle)} without activity. Your next message continues it, with "
        "a brief of what happened so far."
    )


def runner_offline_notice_text(label: str | None, node_id: str) -> str:
    return (
        f"{offline_text(label, node_id)} The conversation running on it has stopped; once "
        "the machine is back online, your next message continues it with a brief of what "
        "happened so far."
    )


def runner_restarted_text(label: str | None, node_id: str) -> str:
    """A machine came back without the conversation it was running (CONTRACT.md 4.1)."""
    return (
        f"{_sentence_start(_machine(label, node_id))} restarted and is no longer running this "
        "conversation, so it was stopped. Your next message continues it, with a brief of "
        "what happened so far."
    )


def not_woken_text(repo: str) -> str:
    """A message for a repo no machine has worked on yet (CONTRACT.md 4)."""
    return (
        f"No machine has worked on {repo} yet, so nothing was started for this message. "
        "Open a conversation on it once, on the machine and engine you want; later messages "
        "then continue there by themselves."
    )


def wake_offline_text(offline: str) -> str:
    """A person's message could not wake a conversation: its machine is offline (CONTRACT.md
    4). `offline` is the error's own sentence, "Your Mac mini is offline."."""
    return (
        f"{offline} Your message is kept in the timeline, but nothing was started for it. Once "
        "the machine is back online, your next message to this repo starts a conversation "
        "there, with a brief of what happened so far that includes this message."
    )


def launch_refused_for_instance(label: str | None, node_id: str) -> str:
    """A machine that serves only some instances was asked to launch for another."""
    return (
        f"{_sentence_start(_machine(label, node_id))} does not serve this instance; choose a "
        "machine that does, or add the instance to its list"
    )


def error_message(code: str, **details: object) -> str:
    """The one sentence an error reply carries, for a person to act on."""

    def detail(name: str, default: str = "") -> str:
        value = details.get(name)
        return default if value is None or value == "" else str(value)

    machine = _sentence_start(_machine(detail("label"), detail("node_id")))
    field = detail("field", "a field")
    match code:
        case "invalid_request":
            return (
                f"The request has a missing or invalid value in {field}; correct it and send "
                "the request again."
            )
        case "invalid_entry":
            return f"The entry's {field} is missing or invalid; correct it and publish it again."
        case "bad_token":
            return (
                f"The value of {field} cannot be used as a name: it must not be empty and must "
                "fit in 255 bytes once escaped, so shorten or correct it."
            )
        case "not_json":
            return "The message is not valid JSON; send a UTF-8 JSON object instead."
        case "unavailable":
            return "Seedline cannot store or read this right now; try again in a moment."
        case "not_found":
            what = detail("what", "conversation")
            return f"No {what} with that id is known here; check the id and try again."
        case "timeout":
            request_id = detail("request_id")
            if request_id:
                return (
                    f"No answer yet: the open goes on. Send the same request_id "
                    f"({request_id}) again to get its answer; that never opens a second "
                    "conversation."
                )
            return "The request took too long to answer; try again in a moment."
        case "superseded":
            return (
                "A later open of this repo replaced this one before it reached the machine, "
                "so nothing was started for it; the later one is the conversation to use."
            )
        case "runner_unreachable" if details.get("still_runs"):
            return (
                f"{machine} may still run this repo's conversation and did not answer the "
                "stop, so nothing was started elsewhere; open it again once that machine "
                "answers, or in a minute, when it counts as offline."
            )
        case "runner_unreachable":
            return (
                f"{machine} did not answer the launch in time; check that Seedline is running "
                "on it and try again."
            )
        case "launch_refused":
            # A machine's reason is often a sentence of its own: one full stop, not two.
            reason = detail("reason", "no reason given").rstrip(". ") or "no reason given"
            return f"{machine} refused to start the conversation: {reason}."
        case "not_yet_visible":
            return "That entry is not readable yet; try the read again in a moment."
        case "runner_offline":
            return f"{machine} is offline."
        case _:
            return f"Something went wrong ({code}); try again in a moment."
