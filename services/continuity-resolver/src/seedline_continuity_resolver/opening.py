"""Opening, waking and relocating: decide, record, wait for what the machine confirmed.

Each handler loads what the pure core needs, calls it, and records the result in
one publish: the person's instruction to ingest (a trusted producer), then
`open_requested` and `continuity_decided`. The composer and the gateway react to the
events; nothing here talks to a machine. A wake is the same open, started by the
gateway's `wake_requested` event instead of a request, with no one waiting on it.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

import msgspec
from nats.aio.msg import Msg

from seedline_contracts import subjects
from seedline_contracts.codec import decode, encode
from seedline_contracts.errors import error_reply
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
from seedline_contracts.times import format_utc, utc_now
from seedline_contracts.tokens import name_problem
from seedline_core import decision as core
from seedline_core import lifecycle as lc
from seedline_core.notices import error_message
from seedline_platform.logging import get_logger
from seedline_platform.publishing import Outgoing, Publisher
from seedline_platform.sealing import InMemoryKeyStore, Sealer
from seedline_timeline_view import RepoHead, TimelineView

from .before_message import previous_before
from .machines import MachineDirectory
from .pending import PendingOpens
from .repository import SESSIONS, TIMELINE, ConversationRepository

log = get_logger(__name__)

CATCH_UP_SECONDS = 2.0
MAX_UNLANDED = 10_000


def new_session_id() -> str:
    return "csess_" + secrets.token_hex(8)


def _error(code: str, message: str) -> bytes:
    return encode(error_reply(code, message))


def _invalid(field: str) -> bytes:
    return _error("invalid_request", error_message("invalid_request", field=field))


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


@dataclass(frozen=True)
class OpenerSettings:
    open_timeout: float
    decision: core.DecisionSettings


class Opener:
    def __init__(
        self, *, repo: ConversationRepository, view: TimelineView, publisher: Publisher,
        machines: MachineDirectory, pending: PendingOpens, settings: OpenerSettings,
        stream_ends: Callable[[], Awaitable[dict[str, int]]] | None = None,
        reached: Callable[[str, int, float], Awaitable[bool]] | None = None,
        clock: Callable[[], datetime] = utc_now, new_id: Callable[[], str] = new_session_id,
        count_decision: Callable[[str], None] | None = None,
        sealer: Sealer | None = None,
    ) -> None:
        self._repo = repo
        # The person's words go sealed into the launch plan, as into the timeline (1.2).
        self._sealer = sealer or Sealer(InMemoryKeyStore(), enabled=False)
        self._view = view
        self._publisher = publisher
        self._machines = machines
        self._pending = pending
        self._settings = settings
        self._stream_ends = stream_ends
        self._reached = reached or self._poll_reached
        self._clock = clock
        self._new_id = new_id
        self._count_decision = count_decision or (lambda reason: None)
        # The instruction each repo's last open put into ingest, until the timeline holds
        # it: the writer moves it there asynchronously, and the next decision on that repo
        # (a relocation a moment later, another open) must brief from it.
        self._unlanded: dict[tuple[str, str], str] = {}

    # -- open -----------------------------------------------------------------------

    async def open(self, msg: Msg) -> bytes:
        try:
            request = decode(msg.data, OpenRequest)
        except msgspec.ValidationError as exc:
            asked_again = await self._asked_again(msg.data)
            if asked_again is not None:
                return asked_again
            return _error("invalid_request", f"The open request is not valid: {exc}.")
        except msgspec.DecodeError:
            return _error("not_json", error_message("not_json"))
        bad = validate_open(request)
        if bad:
            return _invalid(bad)
        session_id = self._new_id()
        if request.request_id is not None:
            first = await self._repo.claim_request(
                request.instance_id, request.request_id, session_id
            )
            if first is not None:
                return await self._first_reply(first, request.request_id)
        return await self._decide_and_wait(request, session_id)

    async def _asked_again(self, data: bytes) -> bytes | None:
        """A body naming only an instance and a request_id asks for that open's answer
        (`seedline open --request-id`, 1.2): the first reply, never a second open."""
        try:
            again = decode(data, OpenAnswerRequest)  # the guarded decode: deep nesting is invalid
        except msgspec.MsgspecError:
            return None
        if name_problem(again.instance_id) or not 1 <= len(again.request_id) <= MAX_ENTRY_ID_CHARS:
            return None
        first = await self._repo.session_for_request(again.instance_id, again.request_id)
        if first is None:
            return _error("not_found", (
                "No open with that request_id is known on this instance; check the id, or "
                "send the whole open request to start one."
            ))
        return await self._first_reply(first, again.request_id)

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
        if await self._repo.claim_request(event.instance_id, event.request_id, event.session_id):
            return  # woken before (a redelivered message)
        ends = None if event_seq is None else {TIMELINE: event.wake_seq, SESSIONS: event_seq - 1}
        await self._record(await self._decision_events(request, event.session_id, ends))

    async def _decide_and_wait(self, request: OpenRequest, session_id: str) -> bytes:
        messages = await self._decision_events(request, session_id)
        return await self._record_and_wait(session_id, messages, request)

    async def _decision_events(self, request: OpenRequest, session_id: str,
                               ends: dict[str, int] | None = None) -> list[Outgoing]:
        await self._own_instruction_landed(request.instance_id, request.repo)
        await self._catch_up(request.wake_seq, ends)
        now = self._clock()
        if request.wake_seq is None:
            previous = await self._repo.previous(request.instance_id, request.repo)
        else:
            previous = await previous_before(self._repo, self._view, request.instance_id,
                                             request.repo, request.wake_seq, session_id)
        decided = core.decide(
            core.OpenRequest(
                engine=request.engine, node_id=request.node_id, force_fresh=request.force_fresh,
                runner_stateless_engines=await self._machines.stateless_engines(request.node_id),
            ),
            previous, now, self._settings.decision,
        )
        head = await self._view.repo_head(request.instance_id, request.repo, request.wake_seq)
        instruction = request.instruction
        if request.wake_seq is not None:
            woken_by = await self._view.entry(request.wake_seq)
            instruction = woken_by.content if woken_by else None
        plan = LaunchPlan(
            instance_id=request.instance_id, repo=request.repo, engine=request.engine,
            node_id=request.node_id, continuity=Continuity(**decided.to_continuity()),
            resume_key=decided.resume_key,
            instruction=(await self._sealer.seal(request.instance_id, instruction)
                         if instruction is not None else None),
            clean_slate=request.clean_slate, request_id=request.request_id,
            wake_seq=request.wake_seq, resume_expect=await self._resume_expect(decided),
        )
        at = format_utc(now)
        messages: list[Outgoing] = []
        if request.instruction is not None and request.wake_seq is None:
            messages.append(_instruction_entry(request, session_id, at))
            self._expect_landing(request.instance_id, request.repo, session_id)
        messages.append(_event(OpenRequested(
            session_id=session_id, at=at, instance_id=request.instance_id, repo=request.repo,
            engine=request.engine, node_id=request.node_id, request_id=request.request_id,
            force_fresh=request.force_fresh, clean_slate=request.clean_slate,
            has_instruction=instruction is not None, wake_seq=request.wake_seq,
        )))
        messages.append(_event(_decided(session_id, at, plan, decided.seed, head)))
        self._count_decision(plan.continuity.reason_code)
        log.info("continuity_decided", session_id=session_id, request_id=request.request_id,
                 reason_code=plan.continuity.reason_code)
        return messages

    # -- relocate -------------------------------------------------------------------

    async def relocate(self, msg: Msg) -> bytes:
        try:
            request = decode(msg.data, RelocateRequest)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return _error("invalid_request", f"The relocation request is not valid: {exc}.")
        for name in ("session_id", "node_id"):
            if name_problem(getattr(request, name)):
                return _invalid(name)
        # Relocation judges the conversation's state as it is now, so read to the end.
        await self._catch_up(None)
        row = await self._repo.platform(request.session_id)
        target = row.platform if row else None
        siblings = await self._repo.platform_of_repo(row.instance_id, row.repo) if row else []
        verdict = lc.judge_relocation(target, siblings, request.node_id)
        if verdict.kind == "not_platform":
            return _error("not_found", (
                "No conversation the platform opened has that id; to continue work that is "
                "only in the timeline, open its repo instead."
            ))
        if verdict.kind == "not_newest":
            return _error("invalid_request", (
                f"A newer conversation, {verdict.newer_session_id}, was opened on this repo "
                "since; relocate that one instead."
            ))
        if verdict.kind == "never_ran":
            still = "is still opening; try again in a moment" if (
                target.state is lc.State.OPENING) else "never started, so there is nothing to move"
            return _error("invalid_request", f"That conversation {still}.")
        if verdict.kind == "unchanged" and row.last_reply is not None:
            return row.last_reply
        await self._own_instruction_landed(row.instance_id, row.repo)
        head = await self._view.repo_head(row.instance_id, row.repo)
        decided = core.relocation_decision(target.node_id, request.node_id)
        plan = LaunchPlan(
            instance_id=row.instance_id, repo=row.repo, engine=target.engine or "unknown",
            node_id=request.node_id, continuity=Continuity(**decided.to_continuity()),
            resume_key=None, instruction=None, clean_slate=False,
            relocation_from=target.node_id, relocation=True,
        )
        event = _decided(request.session_id, format_utc(self._clock()), plan, decided.seed, head)
        self._count_decision(plan.continuity.reason_code)
        return await self._record_and_wait(request.session_id, [_event(event)])

    # -- shared -----------------------------------------------------------------------

    async def _resume_expect(self, decided: core.Decision) -> ResumeExpect | None:
        """The turn the engine's record must hold (CONTRACT.md 6, 1.2). The projection keeps
        no excerpt of content sealed at rest (1.2): it is read then through the view, which
        opens it."""
        turn = decided.resume_expect
        if turn is None:
            return None
        excerpt = turn.excerpt
        if not excerpt:
            entry = await self._view.entry(turn.seq)
            excerpt = entry.content[:core.EXCERPT_CHARS] if entry is not None else ""
        return ResumeExpect(turn.seq, turn.kind, excerpt)

    def _expect_landing(self, instance_id: str, repo: str, session_id: str) -> None:
        self._unlanded.pop((instance_id, repo), None)
        self._unlanded[(instance_id, repo)] = subjects.instruction_entry_id(session_id)
        while len(self._unlanded) > MAX_UNLANDED:
            del self._unlanded[next(iter(self._unlanded))]  # the oldest has long landed

    async def _own_instruction_landed(self, instance_id: str, repo: str) -> None:
        """Read your own writes: the repo's last instruction is in the timeline view."""
        entry_id = self._unlanded.pop((instance_id, repo), None)
        if entry_id is not None and not await self._view.wait_until_stored(
                entry_id, CATCH_UP_SECONDS):
            log.warning("instruction_not_in_timeline", entry_id=entry_id, repo=repo)

    async def _catch_up(self, wake_seq: int | None, ends: dict[str, int] | None = None) -> None:
        """Decide on every event recorded before this moment (read your own writes): the
        projection holds each stream up to where it ended when the request came, or up to
        `ends` where the caller knows them (no round trip to the server)."""
        if ends is None:
            ends = await self._stream_ends() if self._stream_ends is not None else {}
        if wake_seq is not None:
            # The message itself counts as activity of the conversation it was written in.
            ends[TIMELINE] = max(ends.get(TIMELINE, 0), wake_seq)
        waits = [self._reached(projection, seq, CATCH_UP_SECONDS) for projection, seq in ends.items()]
        if wake_seq is not None:
            waits.append(self._view.wait_until_applied(wake_seq, CATCH_UP_SECONDS))
        for projection, ok in zip(ends, await asyncio.gather(*waits)):
            if not ok:
                log.warning("projection_behind", projection=projection, target=ends[projection])

    async def _poll_reached(self, projection: str, seq: int, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while await self._repo.applied(projection) < seq:
            if loop.time() > deadline:
                return False
            await asyncio.sleep(0.002)
        return True

    async def _record(self, messages: list[Outgoing]) -> None:
        await self._publisher.publish(messages)

    async def _record_and_wait(self, session_id: str, messages: list[Outgoing],
                               request: OpenRequest | None = None) -> bytes:
        future = self._pending.expect(session_id)
        try:
            await self._record(messages)
            return await asyncio.wait_for(future, self._settings.open_timeout)
        except TimeoutError:
            stored = await self._repo.reply_for_request(session_id)
            return stored or await self._still_going(session_id, request)
        finally:
            self._pending.forget(session_id)

    async def _still_going(self, session_id: str, request: OpenRequest | None) -> bytes:
        """The `timeout` of an open that goes on (1.2): it names the request_id that gets its
        answer. An open sent without one is given its conversation's id as its request_id."""
        if request is None:
            return _error("timeout", error_message("timeout"))
        request_id = request.request_id
        if request_id is None:
            request_id = session_id
            await self._repo.claim_request(request.instance_id, request_id, session_id)
        return _error("timeout", error_message("timeout", request_id=request_id))

    async def _first_reply(self, session_id: str, request_id: str | None = None) -> bytes:
        """The first request's reply, waiting while it is still in flight."""
        future = self._pending.expect(session_id)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._settings.open_timeout
            while loop.time() < deadline:
                stored = await self._repo.reply_for_request(session_id)
                if stored:
                    return stored
                try:
                    return await asyncio.wait_for(asyncio.shield(future), 0.2)
                except TimeoutError:
                    continue
            return _error("timeout", error_message("timeout", request_id=request_id))
        finally:
            self._pending.forget(session_id)


def _event(event) -> Outgoing:
    tag = event.__struct_config__.tag
    return subjects.session_event_subject(event.session_id, tag), encode(event), None


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
