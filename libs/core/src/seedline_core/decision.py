"""The continuity decision: continue the engine's own conversation, or start fresh.

The branches are one ordered list, checked top to bottom; the first that holds
decides. Every branch declares where the new conversation's brief comes from, and
only the branch for an explicit fresh start declines one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Literal

from seedline_core.ages import describe_age, describe_window

__all__ = [
    "BRANCHES",
    "DEFAULT_SETTINGS",
    "Branch",
    "Decision",
    "DecisionSettings",
    "Mode",
    "OpenRequest",
    "SavedRecord",
    "PreviousConversation",
    "ReasonCode",
    "SeedSource",
    "Situation",
    "Turn",
    "newest_turn",
    "decide",
    "entry_activity_at",
    "relocation_decision",
]

Mode = Literal["resume", "fresh"]


class ReasonCode(StrEnum):
    FORCE_FRESH = "force_fresh"
    NO_PREVIOUS = "no_previous"
    NO_ACTIVITY = "no_activity"
    PAST_WINDOW = "past_window"
    ENGINE_CHANGED = "engine_changed"
    ENGINE_STATELESS = "engine_stateless"
    NO_RESUME_KEY = "no_resume_key"
    RESUME_MOVED = "resume_moved"
    OTHER_MACHINE = "other_machine"
    RESUME = "resume"


class SeedSource(StrEnum):
    """Where the brief for a new conversation comes from."""

    REPO_TIMELINE = "repo_timeline"


@dataclass(frozen=True)
class OpenRequest:
    engine: str
    node_id: str
    force_fresh: bool = False
    runner_stateless_engines: frozenset[str] = frozenset()


# The kinds an engine is given (a person's message) or produces (its answer): the turns
# its own record must hold for a resume to count (CONTRACT.md 3.2).
TURN_KINDS = ("chat_user", "chat_assistant")
EXCERPT_CHARS = 200


@dataclass(frozen=True)
class Turn:
    """The newest turn of a conversation: what a resume must find in the engine's own
    record (the launch's `resume.expect`, CONTRACT.md 6)."""

    seq: int
    kind: str
    excerpt: str


def newest_turn(current: Turn | None, seq: int, kind: str, content: str) -> Turn | None:
    """The conversation's newest turn after an entry (entries come in seq order)."""
    if kind not in TURN_KINDS or (current is not None and seq <= current.seq):
        return current
    return Turn(seq, kind, content[:EXCERPT_CHARS])


@dataclass(frozen=True)
class SavedRecord:
    """The engine's own record of a conversation, saved when it stopped on `node_id`
    (CONTRACT.md 6): it can travel to another machine with the conversation."""

    node_id: str
    engine: str
    engine_session_id: str | None


@dataclass(frozen=True)
class PreviousConversation:
    session_id: str
    last_activity_at: datetime | None
    engine: str | None
    resume_key: str | None
    resume_node_id: str | None
    newest_turn: Turn | None = None
    # Its newest save, when that holds the engine's record.
    saved_record: SavedRecord | None = None
    # Its newest save as recorded (the decision reads only `saved_record` of it; a launch
    # on another machine carries it).
    saved: str | None = None


@dataclass(frozen=True)
class DecisionSettings:
    resume_window: timedelta = timedelta(days=4)
    stateless_engines: frozenset[str] = frozenset({"raw", "openai"})


DEFAULT_SETTINGS = DecisionSettings()


@dataclass(frozen=True)
class Decision:
    mode: Mode
    reason_code: ReasonCode
    reason: str
    resume_from: str | None
    resume_key: str | None
    seed: SeedSource | None
    # What the engine's record must hold for the resume to count (None: nothing beyond
    # the resume key, the conversation has no turn yet).
    resume_expect: Turn | None = None

    def to_continuity(self) -> dict[str, str | None]:
        """The wire `continuity` object."""
        return {
            "mode": self.mode,
            "resume_from": self.resume_from,
            "reason_code": self.reason_code.value,
            "reason": self.reason,
        }


def _as_utc(moment: datetime) -> datetime:
    # Naive times are taken as UTC so that mixing them with aware ones never raises.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def entry_activity_at(at: datetime, accepted_at: datetime | None) -> datetime:
    """When an entry counts as activity (CONTRACT.md 3.1): the earlier of its `at`
    and the time the writer accepted it. A producer may date an entry up to a day ahead;
    counted at its `at`, one such entry made its conversation "the earlier conversation"
    for a day. A backfill's older `at` still counts as written."""
    if accepted_at is None:
        return at
    return min(_as_utc(at), _as_utc(accepted_at))


@dataclass(frozen=True)
class Situation:
    """Everything a branch may look at."""

    request: OpenRequest
    previous: PreviousConversation | None
    now: datetime
    settings: DecisionSettings

    @property
    def age(self) -> timedelta | None:
        if self.previous is None or self.previous.last_activity_at is None:
            return None
        return _as_utc(self.now) - _as_utc(self.previous.last_activity_at)

    @property
    def last_touched(self) -> str | None:
        age = self.age
        if age is None:
            return None
        return f"the previous conversation on this repo was last touched {describe_age(age)}"

    @property
    def engine_is_stateless(self) -> bool:
        engine = self.request.engine
        return (
            engine in self.settings.stateless_engines
            or engine in self.request.runner_stateless_engines
        )


@dataclass(frozen=True, kw_only=True)
class Branch:
    reason_code: ReasonCode
    mode: Mode
    seed: SeedSource | None
    applies: Callable[[Situation], bool]
    explain: Callable[[Situation], str]


def _with_age(sentence: str, situation: Situation) -> str:
    last_touched = situation.last_touched
    return sentence if last_touched is None else f"{sentence}; {last_touched}"


def _past_window(situation: Situation) -> bool:
    age = situation.age
    return age is not None and age > situation.settings.resume_window


def _engine_changed(situation: Situation) -> bool:
    previous = situation.previous
    return (
        previous is not None
        and previous.engine is not None
        and previous.engine != situation.request.engine
    )


def _explain_past_window(situation: Situation) -> str:
    window = describe_window(situation.settings.resume_window)
    return f"{situation.last_touched}, past the {window} window"


def _explain_engine_changed(situation: Situation) -> str:
    earlier_engine = situation.previous.engine if situation.previous else None
    changed = (
        f"the previous conversation on this repo ran on {earlier_engine} "
        f"rather than {situation.request.engine}"
    )
    age = situation.age
    return changed if age is None else f"{changed} and was last touched {describe_age(age)}"


def _record_moves(situation: Situation) -> bool:
    previous = situation.previous
    record = previous.saved_record if previous is not None else None
    return (previous is not None and previous.resume_node_id != situation.request.node_id
            and record is not None and record.engine == situation.request.engine)


def _explain_resume_moved(situation: Situation) -> str:
    record = situation.previous.saved_record if situation.previous else None
    where = record.node_id if record is not None else "another machine"
    sentence = (
        f"the {situation.request.engine} engine's own record of the previous conversation was "
        f"saved on {where} when it stopped and goes with it to {situation.request.node_id}"
    )
    return _with_age(sentence, situation)


def _explain_other_machine(situation: Situation) -> str:
    holder = situation.previous.resume_node_id if situation.previous else None
    where = "another machine" if holder is None else holder
    sentence = (
        f"the {situation.request.engine} engine's own memory of the previous conversation "
        f"is on {where}, not on {situation.request.node_id}"
    )
    return _with_age(sentence, situation)


BRANCHES: tuple[Branch, ...] = (
    Branch(
        reason_code=ReasonCode.FORCE_FRESH,
        mode="fresh",
        seed=None,
        applies=lambda s: s.request.force_fresh,
        explain=lambda s: _with_age("a fresh start was asked for", s),
    ),
    Branch(
        reason_code=ReasonCode.NO_PREVIOUS,
        mode="fresh",
        seed=SeedSource.REPO_TIMELINE,
        applies=lambda s: s.previous is None,
        explain=lambda s: "there is no earlier conversation on this repo",
    ),
    Branch(
        reason_code=ReasonCode.NO_ACTIVITY,
        mode="fresh",
        seed=SeedSource.REPO_TIMELINE,
        applies=lambda s: s.age is None,
        explain=lambda s: "the earlier conversation on this repo has no recorded activity time",
    ),
    Branch(
        reason_code=ReasonCode.PAST_WINDOW,
        mode="fresh",
        seed=SeedSource.REPO_TIMELINE,
        applies=_past_window,
        explain=_explain_past_window,
    ),
    Branch(
        reason_code=ReasonCode.ENGINE_CHANGED,
        mode="fresh",
        seed=SeedSource.REPO_TIMELINE,
        applies=_engine_changed,
        explain=_explain_engine_changed,
    ),
    Branch(
        reason_code=ReasonCode.ENGINE_STATELESS,
        mode="fresh",
        seed=SeedSource.REPO_TIMELINE,
        applies=lambda s: s.engine_is_stateless,
        explain=lambda s: _with_age(
            f"the {s.request.engine} engine keeps no conversation of its own", s
        ),
    ),
    Branch(
        reason_code=ReasonCode.NO_RESUME_KEY,
        mode="fresh",
        seed=SeedSource.REPO_TIMELINE,
        applies=lambda s: s.previous is not None and s.previous.resume_key is None,
        explain=lambda s: _with_age(
            f"the {s.request.engine} engine never reported a conversation to continue", s
        ),
    ),
    Branch(
        reason_code=ReasonCode.RESUME_MOVED,
        mode="resume",
        seed=SeedSource.REPO_TIMELINE,
        applies=_record_moves,
        explain=_explain_resume_moved,
    ),
    Branch(
        reason_code=ReasonCode.OTHER_MACHINE,
        mode="fresh",
        seed=SeedSource.REPO_TIMELINE,
        applies=lambda s: s.previous is not None and s.previous.resume_node_id != s.request.node_id,
        explain=_explain_other_machine,
    ),
    Branch(
        reason_code=ReasonCode.RESUME,
        mode="resume",
        seed=SeedSource.REPO_TIMELINE,
        applies=lambda s: True,
        explain=lambda s: s.last_touched or "the previous conversation on this repo can continue",
    ),
)


def decide(
    request: OpenRequest,
    previous: PreviousConversation | None,
    now: datetime,
    settings: DecisionSettings = DEFAULT_SETTINGS,
) -> Decision:
    """Resume or fresh, with the reason; the first branch of BRANCHES that holds decides."""
    situation = Situation(request=request, previous=previous, now=now, settings=settings)
    branch = next(b for b in BRANCHES if b.applies(situation))
    resume_from = resume_key = expect = None
    if branch.mode == "resume" and previous is not None:
        resume_from, resume_key = previous.session_id, previous.resume_key
        expect = previous.newest_turn
        record = previous.saved_record
        if branch.reason_code is ReasonCode.RESUME_MOVED and record and record.engine_session_id:
            resume_key = record.engine_session_id  # the id the moved record holds
    return Decision(
        mode=branch.mode,
        reason_code=branch.reason_code,
        reason=branch.explain(situation),
        resume_from=resume_from,
        resume_key=resume_key,
        seed=branch.seed,
        resume_expect=expect,
    )


def relocation_decision(
    session_id: str, previous_node_id: str | None, new_node_id: str, engine: str | None,
    resume_key: str | None, newest: Turn | None, record: SavedRecord | None = None,
) -> Decision:
    """A conversation moved to another machine (CONTRACT.md 4): when the engine's own
    record was saved as it stopped, for the engine it runs on, the engine there may
    continue its own conversation from the record (the machine proves it); otherwise it
    starts fresh with a brief."""
    moved = (
        f"the conversation moved from {previous_node_id} to {new_node_id}"
        if previous_node_id and previous_node_id != new_node_id
        else f"the conversation moved to {new_node_id}"
    )
    key = record.engine_session_id or resume_key if record is not None else None
    if record is not None and record.engine == engine and key:
        return Decision(
            mode="resume", reason_code=ReasonCode.RESUME_MOVED,
            reason=(f"{moved} with the {engine} engine's own record, where the engine "
                    "continues its own conversation when the record proves it, and is given "
                    "a brief of what happened so far when it does not"),
            resume_from=session_id, resume_key=key, seed=SeedSource.REPO_TIMELINE,
            resume_expect=newest,
        )
    return Decision(
        mode="fresh",
        reason_code=ReasonCode.OTHER_MACHINE,
        reason=f"{moved}, where the engine starts fresh and will be given a brief of what "
               "happened so far",
        resume_from=None,
        resume_key=None,
        seed=SeedSource.REPO_TIMELINE,
    )
