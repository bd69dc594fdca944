"""Where the timeline draws each open, wake and relocation, with the decision made then.

Every open attempt of a conversation is a continuity_decided event in SEEDLINE_SESSIONS,
followed by opened, relocated (a relocation's answer) or open_failed, and corrected by a
resume_lost (read through the platform's one fold of that stream). Its ``until_seq`` is the newest repo entry when the
decision was made, so the line goes just after that entry; a wake goes after the message
that woke it. A later relocation of the same conversation is a line of its own at its own
place, and never changes what the earlier lines say.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import msgspec
from nats.aio.client import Client
from nats.js.errors import NotFoundError

from seedline_contracts import subjects
from seedline_contracts.codec import decoder
from seedline_contracts.events import SessionEvent
from seedline_platform.lifecycle_events import OpenView, fold_opens

_events = decoder(SessionEvent)

# A conversation's events are a handful per open; this bounds a pathological one.
MAX_EVENTS_PER_CONVERSATION = 2000


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


def marks_from_events(events: list[dict]) -> list[OpenMark]:
    """The open attempts of one conversation, from its events in stream order: the one
    fold of the platform (seedline_platform.lifecycle_events), so an outcome a
    `resume_lost` corrected reads corrected here too. An event this CLI cannot read (a
    newer type, a malformed body) changes nothing."""
    return [_mark(view) for view in opens_of_events(events)]


def opens_of_events(events: list[dict]) -> tuple[OpenView, ...]:
    """One conversation's opens, folded from its events (as read, oldest first)."""
    opens: tuple[OpenView, ...] = ()
    for seq, body in enumerate(events, 1):
        try:
            event = _events.decode(msgspec.json.encode(body))
        except msgspec.MsgspecError:
            continue
        opens = fold_opens(opens, event, seq)
    return opens


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


async def conversation_events(nc: Client, session_id: str) -> list[dict]:
    """Every event of one conversation, oldest first (next-by-subject reads)."""
    js = nc.jetstream()
    subject = subjects.session_event_subject(session_id, "*")
    events: list[dict] = []
    seq = 1
    while len(events) < MAX_EVENTS_PER_CONVERSATION:
        try:
            msg = await js.get_msg(subjects.SESSIONS_STREAM, seq=seq, subject=subject, next=True)
        except NotFoundError:
            break
        try:
            body = json.loads(msg.data or b"")
        except ValueError:
            body = None
        if isinstance(body, dict):
            events.append(body)
        seq = (msg.seq or seq) + 1
    return events


async def read_marks(nc: Client, session_ids: set[str]) -> list[OpenMark]:
    marks: list[OpenMark] = []
    for session_id in sorted(session_ids):
        try:
            events = await conversation_events(nc, session_id)
        except Exception:
            continue  # the stream does not exist yet, or is not readable from here
        marks += marks_from_events(events)
    return marks
