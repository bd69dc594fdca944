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
    "BRIEF_GIVEN",
    "BRIEF_NEVER_GIVEN",
    "BRIEF_NOT_CONFIRMED",
    "BRIEF_NOT_GIVEN",
    "BRIEF_NOT_YET_GIVEN",
    "brief_receipt_words",
    "FORBIDDEN_PATTERNS",
    "Notice",
    "error_message",
    "offline_text",
    "launch_refused_for_instance",
    "machine_removed_text",
    "nats_away_text",
    "next_message_text",
    "no_brief_reason",
    "no_brief_receipt",
    "no_brief_text",
    "no_such_conversation_text",
    "not_answering_text",
    "runner_too_old_text",
    "wake_refused_text",
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
# A launch with no message to give it with holds the brief for the first one.
_BRIEF_WAITS = ("The engine is given a brief of what happened earlier on this repo with "
                "your first message")
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


def _briefed(reason: str, waits: bool = False) -> Notice:
    brief = _BRIEF_WAITS if waits else _BRIEF_GIVEN
    given = "will be given a brief with your first message" if waits else "was given a brief"
    return Notice(
        chat=f"A fresh start: {reason}. {brief}, so {_RECONSTRUCTED}.",
        console=(
            f"Fresh start with a brief: {reason}. The engine {given}; its context "
            "was reconstructed, not carried over."
        ),
        mcp=f"The conversation started fresh: {reason}. {brief}, and {_RECONSTRUCTED}.",
        tone="warning",
    )


def _resume_unconfirmed_briefed(reason: str, waits: bool = False) -> Notice:
    not_confirmed = (
        f"Tried to continue the earlier conversation: {reason}. The machine did not confirm "
        "it, so the engine started fresh."
    )
    brief = _BRIEF_WAITS if waits else _BRIEF_GIVEN
    given = "will be given a brief with your first message" if waits else "was given a brief"
    return Notice(
        chat=f"{not_confirmed} {brief}, so {_RECONSTRUCTED}.",
        console=(
            f"Continuing was not confirmed by the machine: {reason}. The engine started fresh "
            f"and {given}; its context was reconstructed, not carried over."
        ),
        mcp=f"{not_confirmed} {brief}, and {_RECONSTRUCTED}.",
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


def open_notice(outcome: Outcome, reason: str, carried: str | None = None,
                brief_waits: bool = False) -> Notice:
    """What an open did, told three ways; each names the decision's reason sentence, and
    what came along from another machine when something did (`carried`). `brief_waits`:
    the brief goes with the first message (the launch had none), so it is not given yet."""
    outcome = Outcome(outcome)
    if brief_waits and outcome in (Outcome.BRIEFED, Outcome.RESUME_UNCONFIRMED_BRIEFED):
        notice = _OPEN_NOTICES[outcome](reason, waits=True)
    else:
        notice = _OPEN_NOTICES[outcome](reason)
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


# (CONTRACT.md 3.2) Every receipt of a brief says whether the engine was given it, and
# when it was not, why: seedline_platform.lifecycle_events.brief_receipt picks one.
BRIEF_GIVEN = "given to the engine"
BRIEF_NOT_GIVEN = "offered; not given: the engine continued its own conversation"
BRIEF_NOT_CONFIRMED = "offered; the machine did not confirm giving it to the engine"
BRIEF_NOT_YET_GIVEN = "offered; not yet given: it goes in front of the first message"
BRIEF_NEVER_GIVEN = "offered; never given: the conversation stopped before its first message"


def brief_receipt_words(spent: bool | None, seeded: bool, resumed: bool, ended: bool) -> str:
    """Whether the engine was given an open's brief, or why not, from its reply: `spent`
    (None in a reply of before 1.2: `seeded` says it), and whether the conversation stopped
    or was opened again since (`ended`)."""
    if seeded if spent is None else spent:
        return BRIEF_GIVEN
    if resumed:
        return BRIEF_NOT_GIVEN
    if not seeded:
        return BRIEF_NOT_CONFIRMED
    # Held for the first message (`brief_held`): given once the engine answers it.
    return BRIEF_NEVER_GIVEN if ended else BRIEF_NOT_YET_GIVEN


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


def next_message_text(machine: str | None = None, message: str = "Your next message") -> str:
    """What a person's next message to a repo with no live conversation does (CONTRACT.md 4),
    said without promising what only that open decides: a new conversation (a new id) on
    the repo's last machine and engine, which continues the engine's own conversation or
    is briefed, as the decision and the machine have it then."""
    where = f"on {machine}" if machine else "on the machine that last worked on it"
    return (f"{message} to this repo starts a new conversation {where} with the same "
            "engine; whether the engine continues its own earlier conversation or starts "
            "fresh with a brief of what happened so far is decided then, and the new "
            "conversation's notice says which.")


def stopped_idle_text(idle: timedelta, label: str | None) -> str:
    return (
        f"To free {_machine(label, None)}, this conversation was stopped after "
        f"{describe_duration(idle)} without activity. {next_message_text(_there(label))}"
    )


def _there(label: str | None) -> str | None:
    label = (label or "").strip()
    return f"your {label}" if label else None


def runner_offline_notice_text(label: str | None, node_id: str) -> str:
    return (
        f"{offline_text(label, node_id)} The conversation running on it has stopped. Once "
        f"the machine is back online: {_lower_first(next_message_text('it'))}"
    )


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def runner_restarted_text(label: str | None, node_id: str) -> str:
    """A machine came back without the conversation it was running (CONTRACT.md 4.1)."""
    return (
        f"{_sentence_start(_machine(label, node_id))} restarted and is no longer running this "
        f"conversation, so it was stopped. {next_message_text(_machine(label, node_id))}"
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
        f"{offline} Your message is kept in the timeline, but nothing was started for it and "
        "it is not delivered later by itself. Once the machine is back online, "
        f"{_lower_first(next_message_text('it'))} Send again what this message asked if it "
        "still matters."
    )


# Why an open was offered no brief (CONTRACT.md 3.1), as recorded: the open asked for a
# fresh start, or a clean slate, or the repo had no entries to brief with.
NO_BRIEF_REASONS = {
    "force_fresh": "a fresh start was asked for, and a fresh start has no brief",
    "clean_slate": "the open asked for a clean slate, which offers no brief",
    "no_entries": "the repo had no entries in its timeline yet, so there was nothing to brief "
                  "the engine with",
}


def no_brief_reason(reason_code: str, clean_slate: bool) -> str:
    """The recorded reason an open had no brief, from its decision: its key in
    NO_BRIEF_REASONS."""
    if reason_code == "force_fresh":
        return "force_fresh"
    return "clean_slate" if clean_slate else "no_entries"


def no_brief_receipt(why: str | None) -> str:
    """A receipt's line when an open was offered no brief; `why` is the recorded reason
    (None for an open recorded before it was)."""
    reason = NO_BRIEF_REASONS.get(why or "")
    return f"No brief was offered: {reason}." if reason else "No brief was offered."


def no_brief_text(session_id: str, why: str) -> str:
    """A conversation exists but was never offered a brief, said with the recorded reason
    (`why`: a key of NO_BRIEF_REASONS, or "opening" / "failed")."""
    if why == "opening":
        return (f"No brief was offered to {session_id} yet: its open is still being decided; "
                "ask again in a moment.")
    if why == "failed":
        return (f"No brief was offered to {session_id}, because its open failed before one "
                "was composed; `seedline timeline` shows why.")
    reason = NO_BRIEF_REASONS.get(why, "none was composed for it")
    return f"No brief was offered to {session_id}, because {reason}."


def no_such_conversation_text(session_id: str) -> str:
    """An id no conversation the platform opened has (on this instance)."""
    return (f"No conversation {session_id} was opened here; check the id (`seedline "
            "conversations`, the console and MCP's list_conversations show them).")


def not_answering_text(service: str, state: str | None) -> str:
    """A service nobody answers for, after the client asked again for a few seconds;
    `state` is what `seedline up` on this machine says of it (None: it does not run it, or
    no `seedline up` runs here, so a restart elsewhere cannot be told from a stop)."""
    if state in ("restarting", "running"):
        return f"The {service} is starting again; try again in a few seconds."
    if state == "crash loop":
        return (f"The {service} stopped too often, so `seedline up` no longer starts it; "
                "`seedline status` names its log.")
    if state is not None:
        return (f"The {service} waits for room on the disk before it starts again; "
                "`seedline status` says how much is needed.")
    return (f"The {service} is not answering: it is not running, or starting again; try "
            "again in a few seconds, and if it goes on, start it (`make run` or `seedline "
            "up` runs everything).")


def nats_away_text(label: str | None) -> str:
    """A launch that failed because the connection to NATS was lost, not the machine."""
    return (f"The launch did not reach {_machine(label, None)} because the connection to NATS "
            "was lost on the way and was not back in time; the machine is not the cause, so "
            "open again in a few seconds.")


def launch_refused_for_instance(label: str | None, node_id: str) -> str:
    """A machine that serves only some instances was asked to launch for another."""
    return (
        f"{_sentence_start(_machine(label, node_id))} does not serve this instance; choose a "
        "machine that does, or add the instance to its list"
    )


def runner_too_old_text(label: str | None, node_id: str, version: str | None,
                        release: str, what: str) -> str:
    """A launch needs more than the machine's runner speaks (CONTRACT.md 6, protocol):
    `release` is the first release of the runner that can do `what`."""
    runs = (f"runs Seedline's runner {version}" if version
            else "runs a Seedline runner too old to say its version")
    return (
        f"{_sentence_start(_machine(label, node_id))} {runs}, which cannot take {what}, so "
        f"nothing was started on it; install Seedline's runner {release} or later on "
        f"{node_id} and try again."
    )


def wake_refused_text(refused: str) -> str:
    """A person's message could not wake its conversation: `refused` says why."""
    return f"{refused} Your message is kept in the timeline, but nothing was started for it."


def machine_removed_text(label: str | None, node_id: str) -> str:
    """An operator took the machine a conversation was running on out of Seedline."""
    return (
        f"{_sentence_start(_machine(label, node_id))} was removed from Seedline by an "
        "operator, so the conversation running on it was stopped. Open it on another "
        "machine to go on: the engine there starts with a brief of what happened so far."
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
        case "unavailable" if details.get("still_opening"):
            return (
                "The conversation is still opening, so it could not be stopped yet; send the "
                "stop again in a moment."
            )
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
