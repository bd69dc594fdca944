"""Where the timeline draws each open, wake and relocation, with the decision made then.

Every open attempt of a conversation is a continuity_decided event in SEEDLINE_SESSIONS,
followed by opened, relocated (a relocation's answer) or open_failed. Its ``until_seq`` is the newest repo entry when the
decision was made, so the line goes just after that entry; a wake goes after the message
that woke it. A later relocation of the same conversation is a line of its own at its own
place, and never changes what the earlier lines say.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from nats.aio.client import Client
from nats.js.errors import NotFoundError

from seedline_contracts import subjects

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
    """The open attempts of one conversation, from its events in stream order."""
    marks: list[OpenMark] = []
    for event in events:
        kind = event.get("type")
        if kind == "continuity_decided":
            plan = event.get("plan") or {}
            if plan.get("relocation") or plan.get("relocation_from"):
                what, after = "relocation", event.get("until_seq") or 0
            elif plan.get("wake_seq"):
                what, after = "wake", plan["wake_seq"]
            else:
                what, after = "open", event.get("until_seq") or 0
            marks.append(OpenMark(
                session_id=event.get("session_id", ""), kind=what, after_seq=int(after),
                at=event.get("at", ""), continuity=event.get("continuity") or {},
                node_id=plan.get("node_id", ""), from_node_id=plan.get("relocation_from"),
            ))
        elif marks and kind == "relocated":
            # 1.1: the relocated event carries the machine's reply; before, opened did.
            marks[-1].from_node_id = event.get("from_node_id") or marks[-1].from_node_id
            if event.get("reply") and marks[-1].outcome is None:
                marks[-1].outcome = event["reply"].get("outcome")
        elif marks and kind == "opened" and marks[-1].outcome is None:
            marks[-1].outcome = (event.get("reply") or {}).get("outcome")
        elif marks and kind == "open_failed" and marks[-1].error is None:
            marks[-1].error = event.get("error") or {}
    return marks


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
