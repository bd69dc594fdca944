"""Where the timeline draws each open, wake and relocation, with the decision made then.

Every open attempt of a conversation is a continuity_decided event in SEEDLINE_SESSIONS,
followed by opened, relocated (a relocation's answer) or open_failed, and corrected by a
resume_lost (read through the platform's one fold of that stream). Its ``until_seq`` is the newest repo entry when the
decision was made, so the line goes just after that entry; a wake goes after the message
that woke it. A later relocation of the same conversation is a line of its own at its own
place, and never changes what the earlier lines say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import msgspec
from nats.aio.client import Client

from seedline_contracts.events import SessionEvent
from seedline_platform.lifecycle_events import OpenView, opens_of
from seedline_platform.session_reads import conversation_events


@dataclass
class OpenMark:
    session_id: str
    kind: str  # open | wake | relocation
    after_seq: int  # drawn before the first entry with a higher seq
    at: str
    continuity: dict
    node_id: str
    from_node_id: str | None = None
    outcome: str | None = None  # None while the machine has not answered
    error: dict | None = None

    def to_json(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        decided = f"{self.continuity.get('mode')}: {self.continuity.get('reason')}"
        if self.error is not None:
            # Nothing was opened: "opened fresh ... · failed" read as if something had been.
            attempt = {"relocation": f"relocation to {self.node_id}",
                       "wake": f"wake by #{self.after_seq}"}.get(self.kind, "open")
            return (f"{attempt} failed: {self.error.get('message')} "
                    f"(it had decided {decided})")
        if self.kind == "relocation":
            head = f"relocated to {self.node_id}, {decided}"
        elif self.kind == "wake":
            head = f"woken by #{self.after_seq}, {decided}"
        else:
            head = f"opened {decided}"
        if self.outcome is None:
            return f"{head} · no answer from the machine yet"
        return f"{head} · outcome {self.outcome}"


def marks_from_events(events: Sequence[tuple[int, SessionEvent]]) -> list[OpenMark]:
    """The open attempts of one conversation, from its events in stream order: the one
    fold of the platform (seedline_platform.lifecycle_events), so an outcome a
    `resume_lost` corrected reads corrected here too."""
    return [_mark(view) for view in opens_of(events)]


def _mark(view: OpenView) -> OpenMark:
    return OpenMark(
        session_id=view.session_id, kind=view.kind,
        after_seq=int(view.wake_seq if view.kind == "wake" else view.until_seq or 0),
        at=view.at, continuity=msgspec.to_builtins(view.continuity), node_id=view.node_id,
        from_node_id=view.relocation_from or None,
        outcome=view.reply.outcome if view.reply is not None else None,
        error=msgspec.to_builtins(view.error) if view.error is not None else None,
    )


def first_decisions(marks: list[OpenMark]) -> dict[str, dict]:
    """Each conversation's decision at the open that started it."""
    found: dict[str, dict] = {}
    for mark in marks:
        if mark.kind != "relocation":
            found.setdefault(mark.session_id, mark.continuity)
    return found


def interleave(
    entries: list[dict], marks: list[OpenMark], older_seq: int | None, before_seq: int | None
) -> list[dict | OpenMark]:
    """Entries and marks in the order they happened.

    ``older_seq`` is the seq of the newest entry just older than the view (None when there
    is none): a mark after it but before the first entry shown belongs to this view. A mark
    past the last entry shown belongs here unless a newer entry outside the view
    (``before_seq`` and up) comes before it.
    """
    floor = older_seq if older_seq is not None else -1
    pending = sorted((m for m in marks if m.after_seq >= floor), key=lambda m: m.after_seq)
    merged: list[dict | OpenMark] = []
    for entry in entries:
        while pending and pending[0].after_seq < entry["seq"]:
            merged.append(pending.pop(0))
        merged.append(entry)
    merged += [m for m in pending if before_seq is None or m.after_seq < before_seq]
    return merged


async def read_marks(nc: Client, session_ids: set[str]) -> list[OpenMark]:
    marks: list[OpenMark] = []
    for session_id in sorted(session_ids):
        try:
            # Read through the contract's types; an event this CLI cannot read (a newer
            # type, a malformed body) is left out and changes nothing.
            events = await conversation_events(nc.jetstream(), session_id, None)
        except Exception:
            continue  # the stream does not exist yet, or is not readable from here
        marks += marks_from_events(events)
    return marks
