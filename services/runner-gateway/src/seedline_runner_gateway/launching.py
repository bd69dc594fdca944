"""Deliver the launch each seed_composed asks for; launch_outcomes.py records what the
machine confirmed.

The event carries everything the launch needs, the brief's text included, so a launch
is one request to the machine and no other round trip. The outcome is recorded as
`opened`, `relocated` (a relocation) or `open_failed`; a conversation this one replaces
on its repo is stopped (`superseded`).

One live engine per repo (CONTRACT.md 4): launches of one (instance, repo) go out
one at a time across every copy (`RepoTurns`), and each is fenced by its decision's
place in SEEDLINE_SESSIONS (`decided_seq`). A launch whose repo has seen a newer open
since its decision is never sent (`superseded`); otherwise the conversations it
replaces are stopped before it reaches its machine (a relocation's own engine on the
machine it leaves, too), and the machine is given the fence so that it refuses anything
older it may still be sent.

Across machines that a network cuts off the same holds: a launch goes out only when no
other machine may still run a conversation of its repo. A machine that did not answer the
stop of one, or whose own presence still lists one and that does not answer its stop, keeps
the launch from going out (`runner_unreachable`, naming it): it may be cut off with the
engine running. A runner ends its engines once it has been out of touch longer than its
lease (seedline_runner.runner.LEASE_SECONDS, shorter than the presence TTL), and it counts
as offline only after the TTL; from then on, or once it answers, the repo can move. (The
fault harness found a relocation landing while the machine it left was cut off mid-turn.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec

from seedline_contracts.events import LaunchPlan, SeedComposed
from seedline_contracts.runner import (
    CARRY_PROTOCOL,
    FIRST_RELEASE,
    LaunchReply,
    LaunchRequest,
    LaunchResume,
    Seed,
    protocol_needed,
)
from seedline_contracts.worktrees import Carry
from seedline_contracts.sessions import NoticeBody, OpenReply
from seedline_core import lifecycle as lc
from seedline_core.notices import (
    carried_sentence,
    error_message,
    launch_refused_for_instance,
    nats_away_text,
    no_brief_reason,
    offline_text,
    open_notice,
    runner_too_old_text,
)
from seedline_core.outcome import decide_outcome
from seedline_platform.logging import get_logger

from .forgetting import NOT_LAUNCHED, ForgetHere
from .launch_outcomes import LaunchFailed, LaunchOutcomes, carried_of
from .machine_calls import MachineUnreachable, NatsAway
from .presence import PresenceView
from .reconcile import Reconciler
from .state import AtLaunch, Held
from .stopping import Stopper

if TYPE_CHECKING:
    from .bootstrap import Ports

log = get_logger(__name__)

# What a launch needs of a newer runner, as a person is told it.
NEEDS = {CARRY_PROTOCOL: "the working tree this conversation brings from another machine"}


class Launcher:
    def __init__(
        self, ports: Ports, presence: PresenceView, stopper: Stopper, reconciler: Reconciler,
        outcomes: LaunchOutcomes, caught_up: Callable[[int | None, int | None], Awaitable[bool]],
        forget_here: ForgetHere,
    ) -> None:
        self._state = ports.state
        self._machines = ports.machines
        self._publisher = ports.publisher
        self._sealer = ports.sealer
        self._clock = ports.clock
        self._turns = ports.repo_turns
        self._presence = presence
        self._stopper = stopper
        self._reconciler = reconciler
        self._outcomes = outcomes
        self._caught_up = caught_up
        self._forget_here = forget_here

    async def _opened(self, text: str | None) -> str | None:
        """Brief text and the instruction are recorded sealed; the machine is given them
        plain."""
        return None if text is None else await self._sealer.open(None, text)

    async def handle(self, composed: SeedComposed, msg) -> None:
        await self.launch(composed, msg.metadata.sequence.stream)

    async def launch(self, composed: SeedComposed, seq: int | None = None) -> None:
        """Launch under the repo's turn, fenced by its decision's place.

        The fold is waited for up to this seed_composed (`seq`), not to the stream's end:
        it has almost always got that far, so no launch waits for its own event's fold.
        An older decision still never lands after a newer one: a newer launch that went
        out first had waited for the fold past its own decision, so this one's turn finds
        that decision folded and is refused; a newer decision not folded yet comes to the
        repo's turn after this launch, and replaces it.
        """
        plan = composed.plan
        async with self._turns.hold(plan.instance_id, plan.repo) as stored:
            if composed.decided_seq is not None:  # else recorded before decisions were fenced
                await self._caught_up(None if seq is None else seq - 1, stored)
            repo = await self._state.at_launch(composed.session_id, plan.instance_id, plan.repo)
            held = repo.held
            if held is not None and _already_done(held, plan.node_id, plan.relocation):
                log.info("launch_already_done", session_id=composed.session_id)
                return
            replaced: list[Held] = []
            try:
                if self._forget_here.covers(plan):
                    raise LaunchFailed("not_found", NOT_LAUNCHED)
                _fence(composed, repo)
                reply = await self._deliver(composed, repo, replaced)
            except LaunchFailed as failure:
                await self._outcomes.failed(composed, failure,
                                            moved=_moved(composed, held, replaced))
                return
            at = await self._outcomes.confirmed(composed, held, reply, seq, replaced)
        await self._forget_here.confirmed(composed.session_id, plan, at)

    async def _deliver(
        self, composed: SeedComposed, repo: AtLaunch, replaced: list[Held],
    ) -> tuple[OpenReply, LaunchReply]:
        plan = composed.plan
        sighting = await self._presence.get(plan.node_id)
        if sighting is None:
            label = await self._state.label(plan.node_id)
            raise LaunchFailed("runner_offline", offline_text(label, plan.node_id))
        presence = sighting.presence
        if presence.instances and plan.instance_id not in presence.instances:
            raise LaunchFailed("launch_refused", error_message(
                "launch_refused", label=presence.label, node_id=plan.node_id,
                reason=launch_refused_for_instance(presence.label, plan.node_id)))
        seed = (
            Seed(text=await self._opened(composed.text), sha256=composed.brief.sha256)
            if composed.brief is not None and composed.text is not None else None
        )
        resume = (
            LaunchResume(plan.resume_key, expect=plan.resume_expect)
            if plan.continuity.mode == "resume" and plan.resume_key else None
        )
        request = LaunchRequest(
            session_id=composed.session_id, instance_id=plan.instance_id, repo=plan.repo,
            engine=plan.engine, resume=resume, seed=seed,
            instruction=await self._opened(plan.instruction),
            fence=composed.decided_seq, carry=await self._carry(plan),
            # What the machine saves of this conversation is sealed with this key.
            seal=await self._sealer.object_key(plan.instance_id, composed.session_id),
        )
        needed = protocol_needed(request)
        if presence.protocol < needed:
            # An older runner would drop what it does not know: refused, and said why.
            raise LaunchFailed("launch_refused", runner_too_old_text(
                presence.label, plan.node_id, presence.version, FIRST_RELEASE[needed],
                NEEDS[needed]))
        if plan.engine in presence.engines:
            # The machine can take it: what it replaces ends first, so no moment has two.
            stopped, unanswered = await self._stop_replaced(composed, repo)
            replaced += stopped
            await self._not_running_elsewhere(plan, stopped, unanswered)
        try:
            launch = await self._machines.launch(plan.node_id, request)
        except NatsAway:
            raise LaunchFailed("unavailable", nats_away_text(presence.label)) from None
        except MachineUnreachable:
            raise LaunchFailed("runner_unreachable", error_message(
                "runner_unreachable", label=presence.label, node_id=plan.node_id)) from None
        if not launch.accepted:
            raise LaunchFailed("launch_refused", error_message(
                "launch_refused", label=presence.label, node_id=plan.node_id,
                reason=launch.reason or "no reason given"))
        self._reconciler.launched(plan.node_id, composed.session_id,
                                  await self._presence.latest_revision(plan.node_id))
        outcome, resumed, seeded = decide_outcome(
            launch.resumed_conversation, launch.seeded, seed is not None, plan.continuity.mode
        )
        carried = carried_of(plan, launch, presence.label)
        # With no message to give it with, the brief waits for the first one: the machine
        # says when the engine has it (`brief_given`), and only then is it spent.
        waits = seeded and bool(launch.brief_held)
        notice = open_notice(outcome, plan.continuity.reason,
                             carried=carried_sentence(carried) if carried else None,
                             brief_waits=waits)
        return OpenReply(
            session_id=composed.session_id, node_id=plan.node_id, resumed=resumed, seeded=seeded,
            outcome=outcome.value, continuity=plan.continuity,
            brief=(msgspec.structs.replace(composed.brief, spent=seeded and not waits)
                   if seed else None),
            notice=NoticeBody(**notice.to_wire()), carried=carried,
            no_brief=None if composed.brief is not None else no_brief_reason(
                plan.continuity.reason_code, plan.clean_slate),
        ), launch

    async def _carry(self, plan: LaunchPlan) -> Carry | None:
        """What the launch takes along of the repo's previous conversation (CONTRACT.md 6):
        its saved tree, and its engine's record when it ran on the same engine; with the
        key the machine opens them with."""
        work = plan.carry
        if work is None:
            return None
        tree = work.worktree
        key = None
        if tree.key_version is not None:
            key = await self._sealer.object_key(plan.instance_id, work.session_id,
                                                tree.key_version)
        same_engine = work.engine == plan.engine
        return Carry(from_node=work.node_id, from_label=work.label, worktree=tree,
                     engine_record=tree.engine_record if same_engine else None, key=key)

    async def _stop_replaced(
        self, composed: SeedComposed, repo: AtLaunch
    ) -> tuple[list[Held], list[Held]]:
        """Stop the repo's other live conversations (`superseded`) before the launch; a
        relocation stops its own engine on the machine it leaves (`relocated`) first.
        Returns what was stopped, and those of them whose machine, another than the
        launch's, did not answer the stop."""
        plan, held = composed.plan, repo.held
        if plan.relocation:
            if held is None or held.state is not lc.State.LIVE or held.node_id == plan.node_id:
                return [], []
            answered = await self._stopper.tell_machine(held, "relocated")
            return [held], ([] if answered else [held])
        if composed.decided_seq is None:
            return [], []
        replaced = [previous for previous in repo.live
                    if previous.session_id != composed.session_id]
        if not replaced:
            return [], []
        now = self._clock()
        await self._publisher.publish(
            [self._stopper.record(previous, "superseded", now) for previous in replaced])
        unanswered = []
        for previous in replaced:
            if not await self._stopper.tell_machine(previous, "superseded") \
                    and previous.node_id != plan.node_id:
                unanswered.append(previous)
        return replaced, unanswered

    async def _not_running_elsewhere(
        self, plan: LaunchPlan, stopped: list[Held], unanswered: list[Held]
    ) -> None:
        """Raise unless no machine but the launch's may still run a conversation of its
        repo: a stop just made that its machine did not answer, or a machine whose own
        presence lists one of the repo's conversations and does not answer its stop.
        (The launch's own machine ends them itself: the launch's fence.)"""
        if unanswered:
            raise await self._still_runs(unanswered[0].node_id)
        just_stopped = {(h.node_id, h.session_id) for h in stopped}
        listed: list[tuple[str, str]] = []  # (machine, conversation) its presence lists
        for node_id in self._presence.known():
            if node_id == plan.node_id:
                continue
            try:
                sighting = await self._presence.get(node_id)
            except Exception:  # unread only when not renewed past its TTL: it has fenced
                continue
            if sighting is not None:
                listed += [(node_id, s) for s in sighting.presence.live or []
                           if (node_id, s) not in just_stopped]
        of_repo = {h.session_id: h for h in await self._state.of_repo(
            plan.instance_id, plan.repo, {s for _, s in listed})}
        for node_id, session_id in listed:
            other = of_repo.get(session_id)
            if other is not None and \
                    not await self._stopper.tell_machine(other, "superseded", node_id=node_id):
                raise await self._still_runs(node_id)

    async def _still_runs(self, node_id: str | None) -> LaunchFailed:
        label = await self._state.label(node_id) if node_id else None
        return LaunchFailed("runner_unreachable", error_message(
            "runner_unreachable", label=label, node_id=node_id, still_runs=True))


def _fence(composed: SeedComposed, repo: AtLaunch) -> None:
    """Refuse a launch whose repo was opened again after its decision, and a relocation of a
    conversation the repo has a newer one than."""
    fence, plan, held = composed.decided_seq, composed.plan, repo.held
    if fence is None:
        return  # recorded before decisions were fenced
    newest = repo.newest_requested
    if newest is not None and newest > fence:
        raise LaunchFailed("superseded", error_message("superseded"))
    # A move decided after a newer conversation of the repo was asked for would run both
    # once that one opens: the newer one is the repo's (fault harness, seed 50704078: a
    # stopped conversation moved while the next was opening). A newer one that failed never
    # opens, so it does not stand in the way (model-based test, seed 1627730389: a stopped
    # conversation moved after a wake of its repo had failed on an offline machine was
    # refused as superseded).
    may_open = repo.newest_not_failed
    if plan.relocation and held is not None and may_open is not None \
            and may_open > held.conversation.created_seq:
        raise LaunchFailed("superseded", error_message("superseded"))


def _moved(composed: SeedComposed, held: Held | None, replaced: list[Held]) -> Held | None:
    """The relocating conversation, when its engine was stopped on the machine it left."""
    if composed.plan.relocation and held is not None and held in replaced:
        return held
    return None


def _already_done(held, node_id: str, relocation: bool) -> bool:
    """A redelivered seed_composed whose launch was already confirmed changes nothing."""
    if relocation:
        return held.state is lc.State.LIVE and held.node_id == node_id
    return held.state in (lc.State.LIVE, lc.State.STOPPED, lc.State.FAILED)
