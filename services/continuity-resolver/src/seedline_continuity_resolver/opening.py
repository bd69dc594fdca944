"""Opening, waking and relocating: decide and record.

Each loads what the pure core needs, calls it, and records the result in one publish:
the person's instruction to ingest (a trusted producer), then `open_requested` and
`continuity_decided`. The composer and the gateway react to the events; nothing here talks
to a machine. A wake is the same open, started by the gateway's `wake_requested` event
instead of a request, with no one waiting on it. Requests are decoded and checked before
they come here (opening_api.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.events import ContinuityDecided, LaunchPlan, OpenRequested, WakeRequested
from seedline_contracts.runner import ResumeExpect
from seedline_contracts.sessions import (
    Continuity,
    OpenAnswerRequest,
    OpenRequest,
    RelocateRequest,
)
from seedline_contracts.timeline import (
    MAX_CONTENT_CHARS,
    MAX_ENGINE_CHARS,
    MAX_ENTRY_ID_CHARS,
    TimelineEntryIn,
)
from seedline_contracts.times import format_utc
from seedline_contracts.tokens import name_problem
from seedline_core import decision as core
from seedline_core import lifecycle as lc
from seedline_platform.erasure import Forgotten
from seedline_platform.logging import get_logger
from seedline_contracts.worktrees import SavedWork
from seedline_platform.lifecycle_events import saved_work_of
from seedline_platform.publishing import Outgoing, event_message
from seedline_timeline_view import RepoHead

from .answers import Answer, Answers, refused
from .before_message import previous_before
from .catch_up import CatchUp
from .machines import StatelessEngines
from .repository import SESSIONS, TIMELINE

if TYPE_CHECKING:
    from .bootstrap import Ports

log = get_logger(__name__)


def validate_open(request: OpenRequest) -> str | None:
    """The first invalid field, or None."""
    for name in ("instance_id", "repo", "node_id"):
        if name_problem(getattr(request, name)):
            return name
    if not 1 <= len(request.engine) <= MAX_ENGINE_CHARS or name_problem(request.engine):
        return "engine"
    if request.request_id is not None and not 1 <= len(request.request_id) <= MAX_ENTRY_ID_CHARS:
        return "request_id"
    if request.instruction is not None and len(request.instruction) > MAX_CONTENT_CHARS:
        return "instruction"
    if request.wake_seq is not None and request.wake_seq < 1:
        return "wake_seq"
    return None


class Opener:
    """Decides and records: loads what the pure core needs, calls it, publishes the result in
    one go. The request arrives checked (opening_api.py); what it waits on before deciding is
    catch_up.py's, the answer it waits for answers.py's."""

    def __init__(self, ports: Ports, *, catch_up: CatchUp, answers: Answers,
                 decision: core.DecisionSettings, forgotten: Forgotten | None = None) -> None:
        self._repo = ports.repo
        self._forgotten = forgotten or Forgotten()
        self._view = ports.view
        self._publisher = ports.publisher
        self._machines = ports.machines
        self._stateless_engines = StatelessEngines(ports.machines)
        # The person's words go sealed into the launch plan, as into the timeline.
        self._sealer = ports.sealer
        self._clock = ports.clock
        self._new_id = ports.new_id
        self._catch_up = catch_up
        self._answers = answers
        self._decision = decision
        self._stop = ports.stop
        self._decision_recorded = ports.decision_recorded
        self._deciding: set[str] = set()  # conversations this copy is deciding now
        self._decisions = ports.metrics.counter(
            "seedline_continuity_decided_total", "Continuity decisions, by reason_code.",
            ["reason_code"])

    # -- open -----------------------------------------------------------------------

    async def open(self, request: OpenRequest) -> Answer:
        """A checked open request (opening_api.py): the reply once the machine confirmed."""
        session_id = self._new_id()
        if request.request_id is not None:
            first = await self._repo.claim_request(
                request.instance_id, request.request_id, session_id
            )
            if first is not None:
                if await self._decided_or_deciding(first):
                    return await self._answers.first(first, request.request_id)
                # The first ask recorded no decision (the streams were away while it read
                # them): this one makes it, for the same conversation.
                session_id = first
        return await self._answers.after(session_id, self._decide_and_record(request, session_id),
                                         request)

    async def answer_again(self, again: OpenAnswerRequest) -> Answer:
        """An open's answer asked for again: the first reply, never a second open."""
        first = await self._repo.session_for_request(again.instance_id, again.request_id)
        if first is None:
            return refused("not_found", (
                "No open with that request_id is known on this instance; check the id, or "
                "send the whole open request to start one."
            ))
        if not await self._decided_or_deciding(first):
            return refused("unavailable", (
                "No decision is recorded yet for the open with that request_id; if its first "
                "ask was answered `unavailable`, send the whole open request again with the "
                "same request_id."
            ))
        return await self._answers.first(first, again.request_id)

    async def wake(self, event: WakeRequested, event_seq: int | None = None) -> None:
        """Open the conversation a person's message woke; nobody waits for the reply.
        `event_seq`, the wake's place in SEEDLINE_SESSIONS, is how far this decision needs
        the streams: what was recorded before the wake, up to the person's message."""
        request = OpenRequest(
            instance_id=event.instance_id, repo=event.repo, engine=event.engine,
            node_id=event.node_id, request_id=event.request_id, wake_seq=event.wake_seq,
        )
        if validate_open(request) is not None:
            log.warning("wake_not_valid", session_id=event.session_id)
            return
        if event.session_id in self._deciding:
            return  # redelivered while this copy decides it
        if self._forgotten.covers(event.instance_id, event.wake_seq):
            log.info("forgotten_not_woken", session_id=event.session_id)
            return  # the message that woke it was forgotten (Erasure)
        ends = None if event_seq is None else {TIMELINE: event.wake_seq, SESSIONS: event_seq - 1}
        await self._decide_and_record(request, event.session_id, ends)

    async def _decided_or_deciding(self, session_id: str) -> bool:
        return session_id in self._deciding or await self._decision_recorded(session_id)

    async def _decide_and_record(self, request: OpenRequest, session_id: str,
                                 ends: dict[str, int] | None = None) -> None:
        """Decide and record an open. Its request_id is claimed before it is decided (an
        open's before this, a wake's with the read of its repo), so that two asks make one
        decision; when this fails (an outage), the claim stays with nothing recorded, and
        the next ask of the request_id (or the wake, redelivered) decides it for the same
        conversation. Were the first ask still deciding on another copy, the events'
        Nats-Msg-Ids have the stream keep one of each."""
        self._deciding.add(session_id)
        try:
            messages = await self._decision_events(request, session_id, ends)
            if messages:
                await self._record(messages)
        finally:
            self._deciding.discard(session_id)

    async def _decision_events(self, request: OpenRequest, session_id: str,
                               ends: dict[str, int] | None = None) -> list[Outgoing]:
        await self._catch_up.own_instruction_landed(request.instance_id, request.repo)
        woken_by = await self._catch_up.recorded_before(request.wake_seq, ends)
        now = self._clock()
        if request.wake_seq is None:
            previous = await self._repo.previous(request.instance_id, request.repo)
        else:
            # A wake's request_id is claimed with the read of its repo, after the catch-up.
            first, conversations = await self._repo.claim_reading_repo(
                request.instance_id, request.repo, request.request_id, session_id)
            if first is not None and (first != session_id
                                      or await self._decision_recorded(first)):
                return []  # woken before (a redelivered message)
            previous = await previous_before(conversations, self._view, request.instance_id,
                                             request.repo, request.wake_seq, session_id,
                                             woken_by)
        decided = core.decide(
            core.OpenRequest(
                engine=request.engine, node_id=request.node_id, force_fresh=request.force_fresh,
                runner_stateless_engines=await self._stateless_engines.of(request.node_id),
            ),
            previous, now, self._decision,
        )
        if woken_by is not None and woken_by.applied:  # read with the message
            head = woken_by.head_before
        else:
            head = await self._view.repo_head(request.instance_id, request.repo,
                                              request.wake_seq)
        instruction = request.instruction
        if request.wake_seq is not None:
            instruction = woken_by.entry.content if woken_by and woken_by.entry else None
        plan = LaunchPlan(
            instance_id=request.instance_id, repo=request.repo, engine=request.engine,
            node_id=request.node_id, continuity=Continuity(**decided.to_continuity()),
            resume_key=decided.resume_key,
            instruction=(await self._sealer.seal(request.instance_id, instruction)
                         if instruction is not None else None),
            clean_slate=request.clean_slate, request_id=request.request_id,
            wake_seq=request.wake_seq, resume_expect=await self._resume_expect(decided),
            # A clean slate takes nothing of the earlier conversation, its tree included.
            carry=None if request.clean_slate else carried(previous, request.node_id),
        )
        at = format_utc(now)
        messages: list[Outgoing] = []
        if request.instruction is not None and request.wake_seq is None:
            messages.append(_instruction_entry(request, session_id, at))
            self._catch_up.expect_landing(request.instance_id, request.repo, session_id)
        messages.append(event_message(OpenRequested(
            session_id=session_id, at=at, instance_id=request.instance_id, repo=request.repo,
            engine=request.engine, node_id=request.node_id, request_id=request.request_id,
            force_fresh=request.force_fresh, clean_slate=request.clean_slate,
            has_instruction=instruction is not None, wake_seq=request.wake_seq,
        ), msg_id=f"{session_id}:open_requested"))
        messages.append(event_message(_decided(session_id, at, plan, decided.seed, head),
                                      msg_id=f"{session_id}:open_decided"))
        self._decisions.labels(plan.continuity.reason_code).inc()
        log.info("continuity_decided", session_id=session_id, request_id=request.request_id,
                 reason_code=plan.continuity.reason_code)
        return messages

    # -- relocate -------------------------------------------------------------------

    async def relocate(self, request: RelocateRequest) -> Answer:
        """A checked relocation (opening_api.py): the reply once the new machine confirmed."""
        # Relocation judges the conversation's state as it is now, so read to the end.
        await self._catch_up.recorded_before(None)
        row = await self._repo.platform(request.session_id)
        target = row.platform if row else None
        siblings = await self._repo.platform_of_repo(row.instance_id, row.repo) if row else []
        verdict = lc.judge_relocation(target, siblings, request.node_id)
        if verdict.kind == "not_platform":
            return refused("not_found", (
                "No conversation the platform opened has that id; to continue work that is "
                "only in the timeline, open its repo instead."
            ))
        if verdict.kind == "not_newest":
            return refused("invalid_request", (
                f"A newer conversation, {verdict.newer_session_id}, was opened on this repo "
                "since; relocate that one instead."
            ))
        if verdict.kind == "never_ran":
            still = "is still opening; try again in a moment" if (
                target.state is lc.State.OPENING) else "never started, so there is nothing to move"
            return refused("invalid_request", f"That conversation {still}.")
        if verdict.kind == "unchanged" and row.last_reply is not None:
            return msgspec.Raw(row.last_reply)
        if target.state is lc.State.LIVE and await self._machines.presence(request.node_id):
            # Stopped first (when it can go: a relocation to a machine that is offline
            # fails and leaves it where it is): its machine saves the checkout and the engine's record as it
            # stops, and the decision, the brief and the launch are made from that save
            # (CONTRACT.md 4, 6). The old machine is always stopped before the new launch.
            await self._stop(request.session_id, "relocated")
            await self._catch_up.recorded_before(None)
            row = await self._repo.platform(request.session_id)
            target = row.platform
        await self._catch_up.own_instruction_landed(row.instance_id, row.repo)
        head = await self._view.repo_head(row.instance_id, row.repo)
        saved = row.previous()
        decided = core.relocation_decision(
            request.session_id, target.node_id, request.node_id, target.engine,
            target.resume_key, row.newest_turn, saved.saved_record)
        plan = LaunchPlan(
            instance_id=row.instance_id, repo=row.repo, engine=target.engine or "unknown",
            node_id=request.node_id, continuity=Continuity(**decided.to_continuity()),
            resume_key=decided.resume_key, instruction=None, clean_slate=False,
            relocation_from=target.node_id, relocation=True,
            resume_expect=await self._resume_expect(decided),
            carry=carried(saved, request.node_id),
        )
        event = _decided(request.session_id, format_utc(self._clock()), plan, decided.seed, head)
        self._decisions.labels(plan.continuity.reason_code).inc()
        return await self._answers.after(request.session_id, self._record([event_message(event)]))

    # -- shared -----------------------------------------------------------------------

    async def _resume_expect(self, decided: core.Decision) -> ResumeExpect | None:
        """The turn the engine's record must hold (CONTRACT.md 6). The projection keeps
        no excerpt of content sealed at rest: it is read then through the view, which
        opens it."""
        turn = decided.resume_expect
        if turn is None:
            return None
        excerpt = turn.excerpt
        if not excerpt:
            entry = await self._view.entry(turn.seq)
            excerpt = entry.content[:core.EXCERPT_CHARS] if entry is not None else ""
        return ResumeExpect(turn.seq, turn.kind, excerpt)

    async def _record(self, messages: list[Outgoing]) -> None:
        await self._publisher.publish(messages)


def carried(previous: core.PreviousConversation | None, node_id: str) -> SavedWork | None:
    """What a launch on `node_id` carries of the repo's previous conversation: its newest
    save, when that was made on another machine (CONTRACT.md 6)."""
    work = saved_work_of(previous.saved if previous is not None else None)
    return work if work is not None and work.node_id != node_id else None


def _decided(
    session_id: str, at: str, plan: LaunchPlan, seed: core.SeedSource | None,
    head: RepoHead | None,
) -> ContinuityDecided:
    return ContinuityDecided(
        session_id=session_id, at=at, continuity=plan.continuity,
        seed_source=seed.value if seed else None, until_seq=head.seq if head else None,
        entries_upto=head.entries if head else 0, plan=plan,
    )


def _instruction_entry(request: OpenRequest, session_id: str, at: str) -> Outgoing:
    """The person's first message, into the new conversation's timeline (engine: none)."""
    entry_id = subjects.instruction_entry_id(session_id)
    entry = TimelineEntryIn(
        entry_id=entry_id, instance_id=request.instance_id, repo=request.repo,
        session_id=session_id, kind="chat_user", content=request.instruction or "", at=at,
        engine=None,
    )
    return (subjects.ingest_timeline_subject(request.instance_id), encode(entry),
            {"Nats-Msg-Id": entry_id})
