"""When an editor's turn is over, told by what the platform records, without I/O.

A person's message (the ``chat_user`` entry at ``seq``) is answered by one engine turn:
the turn the repo's live conversation runs for it (step ``turn-<seq>``), or, when no
conversation was live, the first turn of the conversation the message woke (the
``wake_requested`` event whose ``wake_seq`` is ``seq``; step ``launch``). The runner
records the engine's own end of that turn as the step's end mark (timeline_out), so the
turn is over exactly when that entry is read, however long the engine works and however
quiet it is meanwhile. Nothing here counts time.

The message goes unanswered only when the platform says so: the conversation it woke
could not open, nothing could be woken (a ``not_woken`` notice), or the conversation
answering it stopped. A conversation stopped because its machine was gone or started
again before it said anything of this turn gets the message again through a wake, so
that stop alone does not end the turn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from seedline_runner.timeline_out import LAUNCH_STEP, end_entry_id, turn_step

# Stops after which the gateway wakes another conversation with the same message.
_STOPS_THAT_WAKE = frozenset({"runner_restarted", "runner_offline"})
STOPPED_TEXT = "The conversation stopped before it finished answering this message."


def failed_to_wake_text(message: str | None) -> str:
    why = f" {message}" if message else ""
    return f"No conversation could be started to answer this message.{why}"


@dataclass
class TurnWatch:
    seq: int
    # The conversation live on the repo when the message was written (None: none was).
    answering: str | None = None
    woken: set[str] = field(default_factory=set)
    # Conversations seen saying something after the message: a stop then cut the answer.
    spoke: set[str] = field(default_factory=set)
    ended: bool = False
    # Why the turn ended without its end mark, for the person (None: it was answered).
    unanswered: str | None = None

    def read(self, entry: dict[str, Any]) -> bool:
        """Take an entry of the repo read after the message; True when it ends the turn."""
        session_id = str(entry.get("session_id") or "")
        entry_id = entry.get("entry_id")
        if self.ended or int(entry.get("seq") or 0) <= self.seq:
            return False
        if entry_id == end_entry_id(session_id, turn_step(self.seq)) or (
            session_id in self.woken and entry_id == end_entry_id(session_id, LAUNCH_STEP)
        ):
            self.ended = True
            return True
        if session_id == self.answering or session_id in self.woken:
            self.spoke.add(session_id)
        return False

    def event(self, body: dict[str, Any]) -> None:
        """Take a conversation event (SEEDLINE_SESSIONS) recorded after the message."""
        if self.ended:
            return
        kind, session_id = body.get("type"), body.get("session_id")
        if kind == "wake_requested" and body.get("wake_seq") == self.seq:
            self.woken.add(str(session_id))
        elif kind == "open_failed" and session_id in self.woken:
            error = body.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            self._unanswered(failed_to_wake_text(message))
        elif kind in ("stopped", "reaped") and (
            session_id == self.answering or session_id in self.woken
        ):
            redelivered = (body.get("reason") in _STOPS_THAT_WAKE
                           and session_id not in self.spoke and session_id not in self.woken)
            if not redelivered:
                self._unanswered(STOPPED_TEXT)

    def notice(self, body: dict[str, Any], repo: str) -> None:
        """Take a notice to the instance: nothing could be woken for this repo."""
        if not self.ended and body.get("kind") == "not_woken" and body.get("repo") == repo \
                and not self.woken:
            self._unanswered(str(body.get("text") or failed_to_wake_text(None)))

    def _unanswered(self, text: str) -> None:
        self.ended = True
        self.unanswered = text
