"""Conversation lifecycle events in SEEDLINE_SESSIONS (CONTRACT.md section 7).

Each event is published on seedline.session.<session>.<type> with a body that
starts ``{"type", "session_id", "at", ...}``. Events are past tense; the launch
plan travels with them so each service needs only the event it reacts to.
"""

from __future__ import annotations

import typing

import msgspec

from .errors import ErrorBody
from .runner import ResumeExpect
from .sessions import BriefStats, BriefSummary, Continuity, OpenReply
from .subjects import session_event_subject
from .worktrees import AppliedTree, SavedTree, SavedWork


class LaunchPlan(msgspec.Struct):
    """Everything the gateway needs to launch, decided once by the resolver."""

    instance_id: str
    repo: str
    engine: str
    node_id: str
    continuity: Continuity
    resume_key: str | None
    instruction: str | None
    clean_slate: bool
    request_id: str | None = None
    relocation_from: str | None = None
    wake_seq: int | None = None
    # A relocation (CONTRACT.md 4): the launch moves an existing conversation.
    relocation: bool = False
    # With a resume: the newest turn the engine's own record must hold, decided
    # with the resume from the resolver's projection and recorded here, so the launch
    # (and any redelivery of it) sends what the decision saw (CONTRACT.md 6).
    resume_expect: ResumeExpect | None = None
    # The repo's previous conversation stopped on another machine and its tree (and the
    # engine's record) were saved: the launch carries them (CONTRACT.md 6).
    carry: SavedWork | None = None


class _Event(msgspec.Struct, tag_field="type", kw_only=True):
    session_id: str
    at: str


class OpenRequested(_Event, tag="open_requested"):
    instance_id: str
    repo: str
    engine: str
    node_id: str
    request_id: str | None
    force_fresh: bool
    clean_slate: bool
    has_instruction: bool
    wake_seq: int | None = None


class ContinuityDecided(_Event, tag="continuity_decided"):
    continuity: Continuity
    seed_source: str | None
    # The newest repo entry the brief may include, and how many repo entries
    # exist up to it; null/0 when the repo has no entries.
    until_seq: int | None
    entries_upto: int
    plan: LaunchPlan


class SeedComposed(_Event, tag="seed_composed"):
    brief: BriefStats | None
    plan: LaunchPlan
    # The brief's exact text: the launch is made from this event, and a
    # replay checks these bytes.
    text: str | None = None
    summary: BriefSummary | None = None
    # The stream seq of the continuity_decided it answers (a redelivered decision is
    # answered by the seed_composed already recorded, never composed again).
    decided_seq: int | None = None
    # The secret detector set the brief was composed with, so a replay leaves out
    # the same spans; None: composed before secrets were left out.
    redaction: int | None = None
    # How the brief's preamble was framed (seedline_core.brief_layout.FRAMING), so a
    # replay frames it alike; None: before a relocation or a carried tree was said.
    framing: int | None = None


class Opened(_Event, tag="opened"):
    reply: OpenReply
    plan: LaunchPlan
    engine_session_id: str | None = None


class OpenFailed(_Event, tag="open_failed"):
    error: ErrorBody
    plan: LaunchPlan


class EngineBound(_Event, tag="engine_bound"):
    node_id: str
    engine_session_id: str


class Relocated(_Event, tag="relocated"):
    from_node_id: str | None
    to_node_id: str
    # What the machine confirmed for the relocation's launch (additive).
    reply: OpenReply | None = None
    engine: str | None = None
    engine_session_id: str | None = None


class ResumeLost(_Event, tag="resume_lost"):
    """The engine refused the resume after the launch reply said it resumed
    (CONTRACT.md 6, 7): recorded by the gateway from the runner's `resume_lost`.

    `reply` is the open's reply as the machine finally had it (not resumed; the brief,
    when one was offered, goes with the next message): every read of the open shows it
    from then on. None when the open's reply could not be read back.
    """

    node_id: str
    reason: str | None = None
    reply: OpenReply | None = None


class BriefGiven(_Event, tag="brief_given"):
    """The engine has answered a turn with the brief a launch held for its first message
    (the launch's reply said `spent: false`): recorded by the gateway from the machine's
    `brief_given`, and every read of that open's receipt says the brief was given."""

    node_id: str
    sha256: str


class WakeRequested(_Event, tag="wake_requested"):
    """A person's message reached a repo with no live conversation (CONTRACT.md 4).

    Recorded by the runner-gateway with the new conversation's id; the resolver opens
    it on the machine and engine of the repo's most recent successful open, with the
    message at `wake_seq` as its instruction.
    """

    instance_id: str
    repo: str
    engine: str
    node_id: str
    wake_seq: int
    request_id: str


class WorktreeSaved(_Event, tag="worktree_saved"):
    """What a machine saved of the conversation's checkout when it stopped (CONTRACT.md 6)."""

    node_id: str
    # The machine's label, as the brief names it.
    label: str
    instance_id: str
    repo: str
    engine: str | None
    worktree: SavedTree


class WorktreeApplied(_Event, tag="worktree_applied"):
    """What the machine a launch carried a tree to did with it (CONTRACT.md 6)."""

    node_id: str
    from_node: str
    worktree: AppliedTree | None
    record_placed: bool


class Stopped(_Event, tag="stopped"):
    reason: str
    node_id: str | None = None


class Reaped(_Event, tag="reaped"):
    node_id: str
    idle_seconds: int


SessionEvent = (
    OpenRequested
    | ContinuityDecided
    | SeedComposed
    | Opened
    | OpenFailed
    | EngineBound
    | Relocated
    | Stopped
    | Reaped
    | WakeRequested
    | ResumeLost
    | BriefGiven
    | WorktreeSaved
    | WorktreeApplied
)

# The union above is the one list of event types; everything else derives from it.
EVENT_TYPES: tuple[type[_Event], ...] = typing.get_args(SessionEvent)


def event_subject(event: _Event) -> str:
    """Where an event is recorded: seedline.session.<session>.<type>."""
    return session_event_subject(event.session_id, type(event).__struct_config__.tag)
