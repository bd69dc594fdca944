"""The lifecycle of a conversation the platform opened (CONTRACT.md 4.1), as one pure machine.

| state   | entered by                    | leaves by                                        |
|---------|-------------------------------|--------------------------------------------------|
| opening | requested                     | opened (-> live) or open_failed (-> failed)      |
| live    | opened, relocated to N        | stopped (any reason), relocated to another node  |
| stopped | stopped, reaped               | relocated (-> live), nothing else                |
| failed  | open_failed                   | nothing                                          |

Every service that needs to know "is it live, where, on which engine" folds the
events of SEEDLINE_SESSIONS through ``apply``; none keeps its own reading of live.
Only ``opened`` and ``relocated`` make facts about the engine (its name, its machine,
its resume key), and ``engine_bound`` updates the resume key of a live conversation
reported by the machine it is live on; a failed open makes no fact at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

__all__ = [
    "Conversation",
    "EngineBound",
    "Event",
    "OpenFailed",
    "Opened",
    "Relocated",
    "RelocationVerdict",
    "Requested",
    "ResumeLost",
    "Saved",
    "State",
    "Stopped",
    "apply",
    "confirms",
    "corrects",
    "judge_relocation",
    "may_be_earlier",
    "newest",
]


RESUMED = "resumed"  # seedline_core.outcome.Outcome.RESUMED


class State(StrEnum):
    OPENING = "opening"
    LIVE = "live"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass(frozen=True)
class Conversation:
    session_id: str
    instance_id: str
    repo: str
    state: State
    # Order of creation among the platform's conversations (the open's stream seq).
    created_seq: int
    # The machine it is live on when live; the one it last ran on otherwise.
    node_id: str | None = None
    engine: str | None = None
    resume_key: str | None = None
    resume_node_id: str | None = None
    # When the last successful open or relocation was confirmed (RFC 3339), if ever.
    confirmed_at: str | None = None
    # The last launch's outcome as the machine finally had it (CONTRACT.md 3.2, 7).
    outcome: str | None = None
    # What its machine saved of its checkout when it last stopped (CONTRACT.md 6), as the
    # recorded bytes; a later launch of it takes it along and clears it.
    saved: str | None = None

    @property
    def live_node(self) -> str | None:
        return self.node_id if self.state is State.LIVE else None


@dataclass(frozen=True)
class Requested:
    session_id: str
    instance_id: str
    repo: str
    seq: int
    node_id: str
    engine: str
    wake_seq: int | None = None  # a wake's: the person's message that asked for it


@dataclass(frozen=True)
class Opened:
    node_id: str
    engine: str
    resume_key: str | None
    at: str
    outcome: str | None = None


@dataclass(frozen=True)
class OpenFailed:
    pass


@dataclass(frozen=True)
class Relocated:
    to_node_id: str
    engine: str | None
    resume_key: str | None
    at: str
    outcome: str | None = None


@dataclass(frozen=True)
class Stopped:
    """`stopped` with any reason, and `reaped`."""

    reason: str


@dataclass(frozen=True)
class EngineBound:
    node_id: str
    resume_key: str


@dataclass(frozen=True)
class Saved:
    """`worktree_saved`: what the machine saved of the checkout when it stopped."""

    node_id: str
    saved: str


@dataclass(frozen=True)
class ResumeLost:
    """The engine refused the resume after the reply said it resumed: the outcome
    becomes the machine's final word. Only a resumed launch can lose its resume, and only
    the machine it ran on speaks for it."""

    node_id: str
    outcome: str


Event = (Requested | Opened | OpenFailed | Relocated | Stopped | EngineBound | ResumeLost
         | Saved)


def apply(conversation: Conversation | None, event: Event) -> Conversation | None:
    """The conversation after `event`; an event its state does not allow changes nothing."""
    if isinstance(event, Requested):
        if conversation is not None:
            return conversation  # a repeated or echoed request
        return Conversation(
            session_id=event.session_id, instance_id=event.instance_id, repo=event.repo,
            state=State.OPENING, created_seq=event.seq, node_id=event.node_id,
            engine=None,
        )
    if conversation is None:
        return None
    state = conversation.state
    if isinstance(event, Opened) and state is State.OPENING:
        return replace(
            conversation, state=State.LIVE, node_id=event.node_id, engine=event.engine,
            resume_key=event.resume_key,
            resume_node_id=event.node_id if event.resume_key else None,
            confirmed_at=event.at, outcome=event.outcome,
        )
    if isinstance(event, OpenFailed) and state is State.OPENING:
        return replace(conversation, state=State.FAILED)
    if isinstance(event, Relocated) and state in (State.LIVE, State.STOPPED):
        if state is State.LIVE and event.to_node_id == conversation.node_id:
            return conversation
        moved = replace(
            conversation, state=State.LIVE, node_id=event.to_node_id,
            engine=event.engine or conversation.engine, confirmed_at=event.at,
            outcome=event.outcome or conversation.outcome, saved=None,
        )
        if event.resume_key:
            moved = replace(moved, resume_key=event.resume_key, resume_node_id=event.to_node_id)
        return moved
    if isinstance(event, Stopped) and state is State.LIVE:
        return replace(conversation, state=State.STOPPED)
    if isinstance(event, Saved) and state in (State.LIVE, State.STOPPED):
        # Recorded after the stop that saved it (or, from the machine's own word, just
        # before): either way it is this live period's.
        return replace(conversation, saved=event.saved)
    if isinstance(event, ResumeLost) and conversation.outcome == RESUMED:
        if event.node_id != conversation.node_id:
            return conversation
        return replace(conversation, outcome=event.outcome)
    if isinstance(event, EngineBound) and state is State.LIVE:
        if event.node_id != conversation.node_id:
            return conversation  # only the machine it is live on speaks for its engine
        return replace(conversation, resume_key=event.resume_key, resume_node_id=event.node_id)
    return conversation


def confirms(event: Event) -> bool:
    """Whether the reply an event carries is the conversation's current state."""
    return isinstance(event, (Opened, Relocated, ResumeLost))


def corrects(event: Event) -> bool:
    """Whether the reply an event carries replaces the one its open was answered with:
    every later read of that open shows the machine's final word (CONTRACT.md 7)."""
    return isinstance(event, ResumeLost)


def may_be_earlier(conversation: Conversation | None) -> bool:
    """Whether a conversation may be "the earlier conversation" of a decision (CONTRACT.md
    3.1). One whose only open failed never is: its instruction is in the timeline
    (and in the brief), but no engine ever held it, and counted it took the resume from
    the conversation before it. None is one only seen in the timeline."""
    return conversation is None or conversation.state is not State.FAILED


def newest(conversations: Iterable[Conversation]) -> Conversation | None:
    """The repo's newest platform conversation that ever ran (live or stopped)."""
    ran = [c for c in conversations if c.state in (State.LIVE, State.STOPPED)]
    return max(ran, key=lambda c: c.created_seq, default=None)


@dataclass(frozen=True)
class RelocationVerdict:
    """What a relocation request may do (CONTRACT.md 4.1)."""

    kind: str  # "move" | "unchanged" | "not_platform" | "not_newest" | "never_ran"
    newer_session_id: str | None = None


def judge_relocation(
    target: Conversation | None, repo_conversations: Iterable[Conversation], to_node_id: str
) -> RelocationVerdict:
    """Relocate applies to the repo's newest platform conversation, live or stopped;
    a relocation to the machine it is live on changes nothing."""
    if target is None:
        return RelocationVerdict("not_platform")
    if target.state not in (State.LIVE, State.STOPPED):
        return RelocationVerdict("never_ran")
    latest = newest(repo_conversations)
    if latest is not None and latest.session_id != target.session_id:
        return RelocationVerdict("not_newest", newer_session_id=latest.session_id)
    if target.live_node == to_node_id:
        return RelocationVerdict("unchanged")
    return RelocationVerdict("move")
