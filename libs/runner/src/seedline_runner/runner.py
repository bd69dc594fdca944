"""The runner process: presence, launches, turns and stops for one machine.

Launch replies are sent as soon as the runner knows what it reports: the platform is
waiting on that reply to answer a person. Usually that is once the engine has started,
before the first instruction runs. A resume the engine's record proved that its
command line has yet to accept, with an instruction to run, waits for the first line
of that run (it tells), but never longer than ``SEEDLINE_RESUME_PROOF_SECONDS``; not
told by then, the reply says "not resumed" and the brief goes with the instruction.
Before a launch or a stop is answered, the presence is put again with the conversations
this machine now hosts: from the platform's view, the machine's own word never leaves out
a conversation it was told runs here, nor lists one it was told ended. A launch whose
presence cannot be put is refused (and ended).

A machine cut off from the platform cannot be told to stop anything, and the platform takes
it for offline once its presence key expires (RUNNERS_TTL_SECONDS after its last put) and
may then start its conversations elsewhere. So a runner whose presence has not been renewed
for LEASE_SECONDS, well inside that TTL, ends every conversation it hosts (it is fenced
off), and one out of touch for two presence intervals refuses launches (a launch that was
held up by the network reaches it after the platform gave up on it) until a put lands.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import structlog
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from seedline_contracts.codec import decode, encode
from seedline_contracts.runner import (
    LaunchReply,
    LaunchRequest,
    RunnerEvent,
    RunnerStopRequest,
    TurnRequest,
)
from seedline_contracts.worktrees import SavedTree
from seedline_contracts.subjects import runner_subject
from seedline_contracts.tokens import escape_token

from .checkouts import Checkouts
from .containment import (
    Containment,
    bind_pen,
    choose_containment,
    default_identity,
    runner_key,
    unbind_pen,
)
from .pens import Pens
from seedline_contracts.times import now_text
from .engines.base import Engine
from .framing import background
from .engines.base import StartResult
from .launch_plan import launch_refusal, plan_seed, store_proof
from .live import ConversationWorker, LiveConversation, ResumeCheck, Step
from .presence import PresenceHeartbeat, presence_of
from .publishing import RETRY_DELAYS_SECONDS, Publisher
from .store import ConversationStore, SeedMessage, seed_if_empty
from .tracing import request_span
from .timeline_out import LAUNCH_STEP, turn_step
from .worktree.carrying import Carrier
from .worktree.recovery import recover_checkouts
from .worktree.snapshot import Limits
from .worktree.store import SavedObjects

log = structlog.get_logger(__name__)

DEFAULT_PRESENCE_INTERVAL_SECONDS = 5.0
RESUME_PROOF_SECONDS_VARIABLE = "SEEDLINE_RESUME_PROOF_SECONDS"
DEFAULT_RESUME_PROOF_SECONDS = 5.0


# Longest a launch's or a stop's reply waits for the presence that says it.
REPLY_PRESENCE_SECONDS = 2.0
# Out of touch this long, a runner ends its conversations: well inside the presence TTL
# (30 s), after which the platform may start them elsewhere.
LEASE_SECONDS = 20.0


def resume_proof_seconds_setting(environ: Mapping[str, str] = os.environ) -> float:
    """How long a launch reply waits for an engine to accept a resume (a setting)."""
    configured = environ.get(RESUME_PROOF_SECONDS_VARIABLE, "").strip()
    if not configured:
        return DEFAULT_RESUME_PROOF_SECONDS
    try:
        seconds = float(configured)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(
            f"{RESUME_PROOF_SECONDS_VARIABLE} must be a number of seconds above 0, "
            f"not {configured!r}."
        )
    return seconds


class Runner:
    def __init__(
        self,
        nc: Client,
        node_id: str,
        label: str,
        engines: Mapping[str, Engine],
        *,
        presence_interval: float = DEFAULT_PRESENCE_INTERVAL_SECONDS,
        store: ConversationStore | None = None,
        clock: Callable[[], str] = now_text,
        publish_retry_delays: tuple[float, ...] = RETRY_DELAYS_SECONDS,
        instances: Sequence[str] = (),
        checkouts: Checkouts = Checkouts(),
        resume_proof_seconds: float | None = None,
        containment: Containment | None = None,
        state_dir: Path | None = None,
        worktree_limits: Limits = Limits(),
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        """``state_dir``: where this runner keeps what a run started again must know
        (None: nothing; then a restart cannot find what a dead run left)."""
        escape_token(node_id)  # refuses a node id that cannot name subjects
        self.resume_proof_seconds = (
            resume_proof_seconds
            if resume_proof_seconds is not None
            else resume_proof_seconds_setting()
        )
        self.node_id = node_id
        self.label = label
        self.engines = dict(engines)
        self.instances = list(instances)
        self.checkouts = checkouts
        self.store = store if store is not None else ConversationStore()
        self._nc = nc
        js = nc.jetstream()
        self._clock = clock
        self._publisher = Publisher(nc, js, node_id, retry_delays=publish_retry_delays)
        # Every process an engine starts is held in its conversation's pen.
        self.containment = containment or choose_containment(
            runner_key(default_identity(node_id, state_dir))
        )
        self._pens = Pens(self.containment, state_dir, self.engines, self._publisher.entry, clock)
        self._worker = ConversationWorker(self._publisher, clock)
        # What a conversation leaves in its checkout travels with it (CONTRACT.md 6).
        self._carrier = Carrier(SavedObjects(js), worktree_limits)
        self._live: dict[str, LiveConversation] = {}
        # The newest launch fence taken per (instance, repo).
        self._fences: dict[tuple[str, str], int] = {}
        self._presence = PresenceHeartbeat(
            js,
            node_id,
            lambda: presence_of(
                node_id,
                label,
                self.engines,
                list(self._live),
                self.instances,
                containment=self.containment.name,
            ),
            presence_interval,
            hosting=lambda: bool(self._live),
        )
        self._lease_seconds = lease_seconds
        self._fencing: asyncio.Task[None] | None = None
        self._hosting = asyncio.Event()  # set when a conversation goes live here
        self._subscriptions: list[Subscription] = []
        self._started = False

    @property
    def live_conversations(self) -> list[str]:
        return list(self._live)

    async def start(self) -> None:
        """Answer requests, then announce presence: once seen, this machine can answer."""
        if self._started:
            return
        self._started = True
        # Before anything is answered or announced: what a dead run left is ended and
        # what its engines recorded meanwhile is published (CONTRACT.md 6), and a carried
        # tree it was applying when it died is rolled back (nothing stays half-applied).
        await self._pens.start()
        await recover_checkouts(self.checkouts)
        for verb, handler in (
            ("launch", self._on_launch),
            ("turn", self._on_turn),
            ("stop", self._on_stop),
        ):
            subscription = await self._nc.subscribe(runner_subject(self.node_id, verb), cb=handler)
            self._subscriptions.append(subscription)
        await self._nc.flush()
        await self._presence.start()
        self._fencing = asyncio.create_task(self._fence_when_out_of_touch(), name="fencing")
        log.info(
            "runner_started",
            node_id=self.node_id,
            engines=list(self.engines),
            containment=self.containment.name,
        )

    async def run(self, stopping: asyncio.Event | None = None) -> None:
        """Run until cancelled or `stopping` is set, then stop cleanly."""
        await self.start()
        try:
            await (stopping or asyncio.Event()).wait()
        finally:
            await asyncio.shield(self.stop())

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        for subscription in self._subscriptions:
            try:
                await subscription.unsubscribe()
            except Exception as error:
                log.warning("unsubscribe_failed", error=str(error))
        self._subscriptions.clear()
        if self._fencing is not None:
            self._fencing.cancel()
            await asyncio.gather(self._fencing, return_exceptions=True)
            self._fencing = None
        for session_id in list(self._live):
            await self._end(session_id)
        await self._pens.stop()
        await self._presence.stop()
        try:
            await self._nc.flush()
        except Exception as error:
            log.warning("flush_failed", error=str(error))
        log.info("runner_stopped", node_id=self.node_id)

    # Launch

    async def _on_launch(self, msg: Msg) -> None:
        launched: LiveConversation | None = None
        with request_span("runner launch", msg.headers, node_id=self.node_id):
            try:
                reply, launched = await self._launch(msg)
            except Exception as error:
                log.exception("launch_failed")
                reply = _launch_refused(f"This machine could not take the launch: {error}.")
            if launched is not None and not await self._say_hosted():
                await self._end(launched.session_id)
                launched, reply = None, _launch_refused(
                    "This machine could not tell the platform it runs the conversation; "
                    "ask again in a moment.")
            await _answer(msg, reply)
        if launched is None:
            return
        if self._live.get(launched.session_id) is not launched:
            return  # stopped while the reply was on its way
        if launched.launch_reply is not None:
            # Bound before the engine can name a newer id of its own.
            await self._worker.note_engine_session(
                launched, launched.launch_reply.engine_session_id
            )
        # Usually only now does the first instruction start: the reply goes out before
        # any engine work (a resume check started it already).
        self._start_worker(launched)

    async def _say_hosted(self) -> bool:
        """The presence put as it is now, before a reply; whether it landed in time."""
        try:
            return await asyncio.wait_for(self._presence.beat(), REPLY_PRESENCE_SECONDS)
        except asyncio.TimeoutError:
            return False

    async def _fence_when_out_of_touch(self) -> None:
        while True:
            if not self._live:
                # Nothing to fence: an idle machine does not wake every second for it.
                self._hosting.clear()
                await self._hosting.wait()
            await asyncio.sleep(min(1.0, self._lease_seconds / 4))
            out = self._presence.out_of_touch_for()
            if self._live and out > self._lease_seconds:
                log.warning("fenced_off", out_of_touch_seconds=round(out, 1),
                            ending=list(self._live))
                for session_id in list(self._live):
                    await self._end(session_id)

    async def _launch(self, msg: Msg) -> tuple[LaunchReply, LiveConversation | None]:
        try:
            request = decode(msg.data, LaunchRequest)
        except msgspec.DecodeError as error:
            return _launch_refused(f"The launch request could not be read: {error}."), None
        refusal = launch_refusal(
            request, self.engines, label=self.label, instances=self.instances
        ) or self.checkouts.refusal(request.repo, self.label)
        if refusal is not None:
            return _launch_refused(refusal), None
        out = self._presence.out_of_touch_for()
        # Two puts missed, or out of touch past its lease: the launch would be fenced off.
        if out > min(2 * self._presence.interval, self._lease_seconds):
            return _launch_refused(
                f"This machine has been out of touch with the platform for {int(out)} "
                "seconds; ask again once it shows it is online."), None
        already = self._live.get(request.session_id)
        if already is not None:
            # A repeated launch (the first reply got lost) must not start or instruct twice.
            await already.replied.wait()
            assert already.launch_reply is not None
            return already.launch_reply, None
        if request.fence is not None:
            stale = await self._fenced(request)
            if stale is not None:
                return _launch_refused(stale), None
        return await self._start_conversation(request)

    async def _fenced(self, request: LaunchRequest) -> str | None:
        """One engine per repo on this machine (CONTRACT.md 4): a launch older than
        one already taken for its repo is refused; a newer one ends the older first."""
        repo = (request.instance_id, request.repo)
        newest = self._fences.get(repo)
        if newest is not None and request.fence < newest:
            return "a later open of this repo reached this machine first"
        self._fences[repo] = request.fence
        for live in list(self._live.values()):
            if (live.request.instance_id, live.request.repo) == repo:
                await self._end(live.request.session_id)
        return None

    async def _start_conversation(
        self, request: LaunchRequest
    ) -> tuple[LaunchReply, LiveConversation | None]:
        engine = self.engines[request.engine]
        resume = request.resume
        workdir = self.checkouts.locate(request.repo)
        # The tree and the record arrive before the engine starts: it reads the record to
        # prove a resume, and works in the tree.
        arrival = (await self._carrier.arrive(request.carry, request, workdir, engine)
                   if request.carry is not None else None)
        try:
            started = await engine.start(
                request.session_id,
                resume.engine_session_id if resume else None,
                workdir,
                expect=resume.expect if resume else None,
            )
        except Exception as error:
            refusal = f"{request.engine} could not be started on this machine: {error}"
            return _launch_refused(refusal), None
        if engine.stateless:
            # Its record is this runner's store: only a conversation held there resumes.
            proof = store_proof(self.store.get(request.session_id), resume)
            started = StartResult(resumed=proof.holds, engine_session_id=started.engine_session_id)
        seed_text = request.seed.text if request.seed else None
        plan = plan_seed(seed_text, started, stateless=engine.stateless)
        conversation = self.store.get_or_create(request.session_id)
        seeded = plan.brief_for_first_prompt is not None
        if plan.brief_for_history is not None:
            history = [SeedMessage(role="user", content=background(plan.brief_for_history))]
            seeded = seed_if_empty(conversation, history) > 0
        live = LiveConversation(
            request=request,
            engine_name=request.engine,
            engine=engine,
            conversation=conversation,
            engine_session_id=started.engine_session_id,
            workdir=workdir,
            pending_brief=plan.brief_for_first_prompt,
            held_brief=plan.held_brief,
            pending_note=arrival.worktree.sentence if arrival and arrival.worktree else None,
            awaiting_acceptance=plan.resumed and started.acceptance_pending,
        )
        self._live[request.session_id] = live
        self._hosting.set()
        if request.instruction:
            # Queued ahead of any turn that arrives before the worker starts.
            live.queue.put_nowait(Step(LAUNCH_STEP, request.instruction))
        resumed = plan.resumed
        if live.awaiting_acceptance and request.instruction:
            resumed = await self._first_line_verdict(live)
            seeded = seeded or (not resumed and plan.held_brief is not None)
        # No message to give the brief with: it waits for the first one, and the platform
        # is told when the engine has answered it (live.py).
        held = seeded and not request.instruction
        if held and request.seed is not None:
            live.brief_owed = request.seed.sha256
        reply = LaunchReply(
            accepted=True,
            resumed_conversation=resumed,
            seeded=seeded,
            engine_session_id=_reported_engine_session(live, resumed),
            worktree=arrival.worktree if arrival else None,
            record_placed=arrival.record_placed if arrival else None,
            brief_held=True if held else None,
        )
        live.reply_with(reply)
        log.info(
            "conversation_launched",
            session_id=request.session_id,
            engine=request.engine,
            resumed=resumed,
            seeded=seeded,
        )
        return reply, live

    def _start_worker(self, live: LiveConversation) -> None:
        """Start the conversation's worker (once) inside its pen: the worker task inherits
        the pen its engine's processes are started into."""
        if live.worker is not None:
            return
        token = bind_pen(self._pens.open(live))
        try:
            self._worker.start(live)
        finally:
            unbind_pen(token)

    async def _first_line_verdict(self, live: LiveConversation) -> bool:
        """Run the instruction now and wait, bounded, for the engine to accept the resume."""
        check = live.resume_check = ResumeCheck()
        self._start_worker(live)
        try:
            await asyncio.wait_for(asyncio.shield(check.verdict), self.resume_proof_seconds)
        except TimeoutError:
            log.info("resume_not_told_in_time", session_id=live.session_id)
        check.decide(False)  # a no-op once the engine has told
        return check.accepted

    # Turns

    async def _on_turn(self, msg: Msg) -> None:
        try:
            reply = self._accept_turn(msg)
        except Exception as error:
            log.exception("turn_failed")
            reason = f"This machine could not take the message: {error}."
            reply = {"accepted": False, "reason": reason}
        await _answer(msg, reply)

    def _accept_turn(self, msg: Msg) -> dict[str, Any]:
        try:
            request = decode(msg.data, TurnRequest)
        except msgspec.DecodeError as error:
            return {"accepted": False, "reason": f"The message could not be read: {error}."}
        live = self._live.get(request.session_id)
        if live is None:
            return {
                "accepted": False,
                "reason": f"No conversation {request.session_id} is running on this machine; "
                "open it again to continue.",
            }
        if request.seq not in live.accepted_turns:
            live.accepted_turns.add(request.seq)
            live.queue.put_nowait(Step(turn_step(request.seq), request.content))
        return {"accepted": True}

    # Stop

    async def _on_stop(self, msg: Msg) -> None:
        try:
            request = decode(msg.data, RunnerStopRequest)
        except msgspec.DecodeError as error:
            reason = f"The stop request could not be read: {error}."
            await _answer(msg, {"stopped": False, "reason": reason})
            return
        ended = await self._end(request.session_id)
        # With the reply the platform may launch the repo on another machine: this one's
        # own word must not list it then (a relocation showed both hosting one repo).
        if ended is not None and not await self._say_hosted():
            log.warning("presence_not_put_before_stop_reply", session_id=request.session_id)
        # `worktree` null: it did not run in a checkout, or was not running here.
        await _answer(msg, {"stopped": ended is not None,
                            "worktree": ended.worktree if ended else None})

    async def _end(self, session_id: str) -> Ended | None:
        """End the conversation, every process of it, and save what its checkout holds;
        None when it was not live here."""
        live = self._live.pop(session_id, None)
        if live is None:
            return None
        if live.resume_check is not None:
            live.resume_check.decide(False)  # a launch reply still waiting goes out now
        await self._worker.stop(live)
        try:
            await live.engine.end(session_id)
        except Exception as error:
            log.warning("engine_end_failed", session_id=session_id, error=str(error))
        await self._pens.end(session_id)
        self.store.discard(session_id)
        worktree = await self._save(live)
        await self._publisher.event(
            RunnerEvent(
                type="exited",
                session_id=session_id,
                at=self._clock(),
                engine_session_id=live.engine_session_id,
                worktree=worktree,
            )
        )
        log.info("conversation_ended", session_id=session_id)
        return Ended(worktree)

    async def _save(self, live: LiveConversation):
        """What its checkout holds, saved now that nothing of it runs (CONTRACT.md 6)."""
        n = live.request.fence if live.request.fence is not None else int(time.time() * 1000)
        try:
            return await self._carrier.save(live.request, live.workdir, live.engine,
                                            live.engine_session_id, n)
        except Exception as error:  # NATS away, a disk error: the stop still stops
            log.warning("worktree_not_saved", session_id=live.session_id, error=str(error))
            return None


@dataclass(frozen=True)
class Ended:
    worktree: SavedTree | None


def _reported_engine_session(live: LiveConversation, resumed: bool) -> str | None:
    # A resume key the engine did not take up is never reported as the engine's own id.
    if not resumed and live.engine_session_id == live.resume_key:
        return None
    return live.engine_session_id


def _launch_refused(reason: str) -> LaunchReply:
    return LaunchReply(accepted=False, reason=reason)


async def _answer(msg: Msg, body: Any) -> None:
    if not msg.reply:
        return
    try:
        await msg.respond(encode(body))
    except Exception as error:
        log.warning("reply_not_sent", subject=msg.subject, error=str(error))
