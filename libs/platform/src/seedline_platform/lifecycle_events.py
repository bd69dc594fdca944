"""The one reading of SEEDLINE_SESSIONS: what each recorded event means (CONTRACT.md 4.1, 7).

Two folds are made from it, and every service and surface uses these instead of a
reading of its own:
- ``lifecycle_steps``: each event as a step of the pure lifecycle machine of
  ``seedline_core.lifecycle`` (the resolver's ``conversations``, the gateway's
  ``gateway_conversations``), with the reply it settles or corrects;
- ``fold_opens``: each conversation's opens as they were decided and answered, with
  the outcome as the machine finally had it (the web's console projection, the CLI's
  ``timeline`` open lines, MCP);
- ``conversation_record``: both at once for one conversation read whole (the console's
  page, MCP, the HTTP API's receipts), from events read with their sealed text opened
  (seedline_platform.session_reads).

A new event type is added here, in ``seedline_contracts.events`` and, when it moves
the lifecycle, in ``seedline_core.lifecycle``; nothing else reads event types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import msgspec

from seedline_contracts import events as ev
from seedline_contracts.codec import decoder, encode
from seedline_contracts.errors import ErrorBody
from seedline_contracts.sessions import Continuity, NoticeBody, OpenReply
from seedline_contracts.worktrees import SavedWork
from seedline_core import lifecycle as lc
from seedline_core import notices
from seedline_core.notices import no_brief_reason, open_notice
from seedline_core.outcome import Outcome, outcome_after_resume_lost

from .bounded import trim_oldest
from .sealing import sealed_instance


# The events that move a conversation's lifecycle, each given its meaning below. The folds
# of it (the resolver's, the gateway's) take only these from SEEDLINE_SESSIONS: a decision,
# a brief and a receipt change no row of theirs, and would cost each fold a delivery and an
# ack apiece (bench.durable_work).
LIFECYCLE_EVENTS: tuple[type[ev.SessionEvent], ...] = (
    ev.OpenRequested, ev.WakeRequested, ev.Opened, ev.OpenFailed, ev.Relocated, ev.Stopped,
    ev.Reaped, ev.EngineBound, ev.ResumeLost, ev.WorktreeSaved,
)


def lifecycle_event(event: ev.SessionEvent, seq: int) -> lc.Event | None:
    """The lifecycle meaning of a recorded event (None: it changes no state)."""
    if not isinstance(event, LIFECYCLE_EVENTS):
        return None
    if isinstance(event, (ev.OpenRequested, ev.WakeRequested)):
        return lc.Requested(event.session_id, event.instance_id, event.repo, seq,
                            event.node_id, event.engine, event.wake_seq)
    if isinstance(event, ev.Opened):
        return lc.Opened(event.plan.node_id, event.plan.engine, event.engine_session_id,
                         event.at, event.reply.outcome)
    if isinstance(event, ev.OpenFailed):
        return lc.OpenFailed()
    if isinstance(event, ev.Relocated):
        return lc.Relocated(event.to_node_id, event.engine, event.engine_session_id, event.at,
                            event.reply.outcome if event.reply else None)
    if isinstance(event, (ev.Stopped, ev.Reaped)):
        return lc.Stopped(event.reason if isinstance(event, ev.Stopped) else "idle")
    if isinstance(event, ev.EngineBound):
        return lc.EngineBound(event.node_id, event.engine_session_id)
    if isinstance(event, ev.ResumeLost):
        outcome = event.reply.outcome if event.reply else Outcome.RESUME_UNCONFIRMED_BRIEFED
        return lc.ResumeLost(event.node_id, str(outcome))
    if isinstance(event, ev.WorktreeSaved):
        return lc.Saved(event.node_id, encode(saved_work(event)).decode())
    return None


def saved_work(event: ev.WorktreeSaved) -> SavedWork:
    """What a decision takes of a save: whose it was, where, and what it holds."""
    return SavedWork(session_id=event.session_id, node_id=event.node_id, label=event.label,
                     engine=event.engine, worktree=event.worktree)


def saved_work_of(saved: str | None) -> SavedWork | None:
    """A conversation's save as its fold keeps it (lc.Conversation.saved)."""
    return decoder(SavedWork).decode(saved) if saved else None


def reply_of(event: object) -> bytes | None:
    """The reply an event settles a waiting request with, or corrects (resume_lost)."""
    if isinstance(event, (ev.Opened, ev.ResumeLost)) and event.reply is not None:
        return encode(event.reply)
    if isinstance(event, ev.Relocated) and event.reply is not None:
        return encode(event.reply)
    if isinstance(event, ev.OpenFailed):
        return encode({"ok": False, "error": event.error})
    return None


class Step(NamedTuple):
    seq: int
    session_id: str
    event: lc.Event
    reply: bytes | None  # the reply to keep for the conversation and its request
    request_id: str | None  # whose request that reply answers

    @property
    def corrects(self) -> bool:
        """A reply that replaces the one kept before (the machine's final word)."""
        return lc.corrects(self.event)


def session_events(msgs: Sequence) -> list[tuple[ev.SessionEvent, object]]:
    """SEEDLINE_SESSIONS messages read raw (a replay), decoded as a typed batch's are."""
    events = decoder(ev.SessionEvent)
    return [(events.decode(msg.data), msg) for msg in msgs]


def lifecycle_steps(items: Sequence[tuple[ev.SessionEvent, object]]) -> list[Step]:
    """The lifecycle steps of decoded SEEDLINE_SESSIONS messages (event, msg), in stream
    order."""
    steps: list[Step] = []
    for event, msg in items:
        seq = msg.metadata.sequence.stream
        meaning = lifecycle_event(event, seq)
        if meaning is None:
            continue
        plan = getattr(event, "plan", None)
        request_id = plan.request_id if plan is not None else None
        if request_id is None and isinstance(event, (ev.Opened, ev.OpenFailed)):
            # An open sent without a request_id that timed out was given its conversation's
            # id as one (the resolver's opening.py): its answer is kept under that claim.
            request_id = event.session_id
        steps.append(Step(seq, event.session_id, meaning, reply_of(event), request_id))
    return steps


class RequestedHere:
    """The conversations a fold of this copy has folded a request of. Another request of
    one changes nothing (seedline_core.lifecycle.apply: a repeated or echoed request), and
    every wake records two (wake_requested, then the decision's open_requested): left out
    of the steps, a batch of that alone moves only the offset, with no transaction.
    The newest `limit` are kept; one forgotten, or folded by a sibling copy, is folded as
    before."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._seen: dict[str, None] = {}  # in the order folded, oldest first

    def news(self, steps: Sequence[Step]) -> list[Step]:
        return [step for step in steps if not (
            isinstance(step.event, lc.Requested) and step.session_id in self._seen)]

    def folded(self, steps: Sequence[Step]) -> None:
        """After the steps are committed: each requested conversation is held now."""
        for step in steps:
            if isinstance(step.event, lc.Requested):
                self._seen[step.session_id] = None
        trim_oldest(self._seen, self._limit)


def reply_after_resume_lost(reply: OpenReply) -> OpenReply:
    """An open's reply once its engine refused the resume (CONTRACT.md 7): the brief,
    when one was offered, goes with the next message, so it counts as given."""
    offered = reply.brief is not None
    outcome, resumed, seeded = outcome_after_resume_lost(offered, reply.continuity.mode)
    notice = open_notice(outcome, reply.continuity.reason)
    return msgspec.structs.replace(
        reply, resumed=resumed, seeded=seeded, outcome=outcome.value,
        brief=msgspec.structs.replace(reply.brief, spent=seeded) if offered else None,
        notice=NoticeBody(**notice.to_wire()),
    )


def brief_receipt(reply: OpenReply, ended: bool = False) -> str:
    """What a receipt says of the reply's brief and the engine (CONTRACT.md 3.2): given, or
    why not. `ended`: the conversation stopped (or was opened again) since this open."""
    spent = reply.brief.spent if reply.brief is not None else None
    return notices.brief_receipt_words(spent, reply.seeded, reply.resumed, ended)
def no_brief_of(reply: OpenReply, plan: ev.LaunchPlan | None = None) -> str | None:
    """Why an open's reply has no brief (seedline_core.notices.NO_BRIEF_REASONS): as the
    reply records it, else from the open's plan, else what its decision alone tells."""
    if reply.brief is not None:
        return None
    if reply.no_brief is not None:
        return reply.no_brief
    if plan is not None:
        return no_brief_reason(plan.continuity.reason_code, plan.clean_slate)
    return "force_fresh" if reply.continuity.reason_code == "force_fresh" else None


def brief_given(reply: OpenReply) -> bool:
    """Whether the engine was given the reply's brief (CONTRACT.md 3.2): `brief.spent`,
    or `seeded` in a reply recorded before 1.2."""
    if reply.brief is not None and reply.brief.spent is not None:
        return reply.brief.spent
    return reply.seeded


# -- opens: each decision joined with its answer -------------------------------------------


@dataclass(frozen=True)
class OpenView:
    """One open, wake or relocation of a conversation: its decision and its answer."""

    session_id: str
    decided_seq: int
    at: str
    instance_id: str
    repo: str
    node_id: str
    engine: str
    continuity: Continuity
    until_seq: int | None
    wake_seq: int | None
    relocation: bool
    relocation_from: str | None  # "" for a relocation from a machine not known
    brief_text: str | None = None
    answered_seq: int | None = None
    answered_at: str | None = None
    reply: OpenReply | None = None  # as the machine finally had it
    error: ErrorBody | None = None
    # The conversation stopped, or was opened again, after this open.
    ended: bool = False

    @property
    def kind(self) -> str:
        if self.relocation:
            return "relocation"
        return "wake" if self.wake_seq else "open"

    @property
    def answered(self) -> bool:
        return self.answered_seq is not None

    @property
    def receipt(self) -> str | None:
        """Whether the engine was given this open's brief, or why not (None: none offered)."""
        if self.reply is None or self.reply.brief is None:
            return None
        return brief_receipt(self.reply, self.ended)


def _moved_from(plan: ev.LaunchPlan) -> str | None:
    if plan.relocation_from:
        return plan.relocation_from
    return "" if plan.relocation else None


def fold_opens(opens: tuple[OpenView, ...], event: ev.SessionEvent, seq: int
               ) -> tuple[OpenView, ...]:
    """One conversation's opens after one of its events (in stream order).

    A decision starts an open; the first answer (`opened`, `relocated` carrying its reply,
    or `open_failed`) ends it; a `resume_lost` corrects the newest resumed answer, and a
    `brief_given` the receipt of the brief the engine has now been given.
    """
    if isinstance(event, ev.ContinuityDecided):
        plan = event.plan
        return (*_ended(opens), OpenView(
            event.session_id, seq, event.at, plan.instance_id, plan.repo, plan.node_id,
            plan.engine, event.continuity, event.until_seq, plan.wake_seq,
            bool(plan.relocation or plan.relocation_from), _moved_from(plan)))
    if not opens:
        return opens
    last = opens[-1]
    if isinstance(event, ev.SeedComposed) and not last.answered:
        # Sealed text is not copied into a view: a reader asks the composer for it.
        text = None if sealed_instance(event.text or "") else event.text
        return (*opens[:-1], replace(last, brief_text=text))
    answer = _answer(event)
    if answer is not None and not last.answered:
        reply, error, moved_from = answer
        if moved_from:
            last = replace(last, relocation_from=moved_from)
        return (*opens[:-1], replace(last, answered_seq=seq, answered_at=event.at,
                                     reply=reply, error=error))
    if isinstance(event, (ev.Stopped, ev.Reaped)):
        return _ended(opens)
    if isinstance(event, ev.BriefGiven):
        for i in range(len(opens) - 1, -1, -1):
            reply = opens[i].reply
            if reply is not None and reply.brief is not None and reply.brief.sha256 == event.sha256:
                given = msgspec.structs.replace(reply.brief, spent=True)
                return (*opens[:i], replace(opens[i], reply=msgspec.structs.replace(
                    reply, brief=given)), *opens[i + 1:])
    if isinstance(event, ev.ResumeLost):
        for i in range(len(opens) - 1, -1, -1):
            reply = opens[i].reply
            if reply is not None and reply.outcome == Outcome.RESUMED:
                corrected = event.reply or reply_after_resume_lost(reply)
                return (*opens[:i], replace(opens[i], reply=corrected), *opens[i + 1:])
    return opens


def _ended(opens: tuple[OpenView, ...]) -> tuple[OpenView, ...]:
    if not opens or opens[-1].ended:
        return opens
    return (*opens[:-1], replace(opens[-1], ended=True))


def _answer(event) -> tuple[OpenReply | None, ErrorBody | None, str | None] | None:
    if isinstance(event, ev.Opened):
        return event.reply, None, None
    if isinstance(event, ev.Relocated) and event.reply is not None:
        # Before 1.1 a relocated event carried no reply; its opened event answered.
        return event.reply, None, event.from_node_id
    if isinstance(event, ev.OpenFailed):
        return None, event.error, None
    return None


def opens_of(events: Sequence[tuple[int, ev.SessionEvent]]) -> tuple[OpenView, ...]:
    """A conversation's opens from its events, oldest first."""
    opens: tuple[OpenView, ...] = ()
    for seq, event in events:
        opens = fold_opens(opens, event, seq)
    return opens


# -- one conversation, read whole --------------------------------------------------------


@dataclass(frozen=True)
class ConversationRecord:
    """A conversation's events as every surface reads them: its lifecycle (the one fold of
    seedline_core.lifecycle) and its opens, each as the machine finally had it."""

    events: tuple[tuple[int, ev.SessionEvent], ...]
    conversation: lc.Conversation | None  # None: the platform never opened it
    opens: tuple[OpenView, ...]

    @property
    def latest(self) -> OpenView | None:
        """The newest open that was answered."""
        return next((o for o in reversed(self.opens) if o.answered), None)

    def brief_given(self, sha256: str) -> bool | None:
        """Whether the engine was given the brief with this digest (CONTRACT.md 3.2), by the
        receipt of the launch that offered it as the machine finally had it; None when no
        launch offered it."""
        view = self._offering(sha256)
        return brief_given(view.reply) if view is not None else None

    def brief_receipt(self, sha256: str) -> str | None:
        """That receipt in words: given, or why not (None when no launch offered it)."""
        view = self._offering(sha256)
        return view.receipt if view is not None else None

    def _offering(self, sha256: str) -> OpenView | None:
        for view in reversed(self.opens):
            reply = view.reply
            if reply is not None and reply.brief is not None and reply.brief.sha256 == sha256:
                return view
        return None

    def why_no_brief(self) -> str:
        """Why no brief was offered to this conversation, as recorded: a key of
        seedline_core.notices.NO_BRIEF_REASONS from its newest composed open, else
        "failed" (its open failed before one was composed) or "opening" (not yet)."""
        composed = next((e for _, e in reversed(self.events)
                         if isinstance(e, ev.SeedComposed)), None)
        if composed is not None:
            return no_brief_reason(composed.plan.continuity.reason_code,
                                   composed.plan.clean_slate)
        failed = any(isinstance(e, ev.OpenFailed) for _, e in self.events)
        return "failed" if failed else "opening"


def conversation_record(events: Sequence[tuple[int, ev.SessionEvent]]) -> ConversationRecord:
    """A conversation's record from its events, oldest first."""
    conversation = None
    for seq, event in events:
        meaning = lifecycle_event(event, seq)
        if meaning is not None:
            conversation = lc.apply(conversation, meaning)
    return ConversationRecord(tuple(events), conversation, opens_of(events))
