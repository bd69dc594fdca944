"""What a launch ends in, recorded: `opened` or `relocated` with the reply the machine
confirmed, or `open_failed`; the conversations it replaces on its repo stopped
(`superseded`) in the same publish, and the machines told after, so the person's reply does
not wait on them. A wake that could not go to its machine is told to the person."""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections.abc import Awaitable, Callable

from seedline_contracts.errors import ErrorBody
from seedline_contracts.events import (
    LaunchPlan,
    OpenFailed,
    Opened,
    Relocated,
    SeedComposed,
    WorktreeApplied,
)
from seedline_contracts.runner import LaunchReply
from seedline_contracts.sessions import (
    Carried,
    LaunchRefusedNotification,
    OpenReply,
    RunnerOfflineNotification,
)
from seedline_core import lifecycle as lc
from seedline_core.notices import wake_offline_text, wake_refused_text
from seedline_platform.logging import get_logger
from seedline_platform.publishing import event_message

from .state import Held
from .stopping import Stopper

if TYPE_CHECKING:
    from .bootstrap import Ports

log = get_logger(__name__)


class LaunchFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def carried_of(plan: LaunchPlan, launch: LaunchReply, to_label: str) -> Carried | None:
    """What came along with the launch, as its machine told (CONTRACT.md 6); None when it
    carried nothing."""
    work = plan.carry
    if work is None:
        return None
    tree, applied = work.worktree, launch.worktree
    return Carried(
        from_node=work.node_id, from_label=work.label,
        files=tree.snapshot.files if tree.snapshot else 0,
        left_out=[item.path for item in tree.left_out],
        applied=bool(applied and applied.applied),
        reason=applied.reason if applied else "unreadable",
        sentence=applied.sentence if applied and applied.sentence else
        f"{to_label} did not say what it did with the working tree saved on {work.label}.",
        record_placed=bool(launch.record_placed))


class LaunchOutcomes:
    def __init__(self, ports: Ports, stopper: Stopper,
                 caught_up: Callable[[int | None], Awaitable[None]]) -> None:
        self._state = ports.state
        self._machines = ports.machines
        self._publisher = ports.publisher
        self._notifier = ports.notifier
        self._clock = ports.clock
        self._stopper = stopper
        self._caught_up = caught_up
        self._opens = ports.metrics.counter(
            "seedline_opens_total", "Launches, by reason_code and outcome (or error code).",
            ["reason_code", "outcome"])

    async def failed(
        self, composed: SeedComposed, failure: LaunchFailed, moved: Held | None = None,
    ) -> None:
        plan = composed.plan
        log.info("open_failed", session_id=composed.session_id, code=failure.code)
        self._opens.labels(plan.continuity.reason_code, failure.code).inc()
        # A failed relocation leaves the conversation where it was (the lifecycle moves
        # only an opening conversation to failed); either way the request is answered.
        # When its engine there was already stopped for the move, that is recorded too.
        now = self._clock()
        await self._publisher.publish([
            *([self._stopper.record(moved, "relocation_failed", now)] if moved else []),
            event_message(OpenFailed(
                session_id=composed.session_id, at=now,
                error=ErrorBody(failure.code, failure.message), plan=plan)),
        ])
        if plan.wake_seq is None:
            return
        # Nobody waits on a wake's reply: the person is told where it could not go, or why
        # it was refused there.
        if failure.code == "runner_offline":
            await self._notifier.notify(plan.instance_id, RunnerOfflineNotification(
                session_id=composed.session_id, node_id=plan.node_id,
                text=wake_offline_text(failure.message), at=self._clock()))
        elif failure.code == "launch_refused":
            await self._notifier.notify(plan.instance_id, LaunchRefusedNotification(
                session_id=composed.session_id, node_id=plan.node_id,
                text=wake_refused_text(failure.message), at=self._clock()))

    async def confirmed(
        self, composed: SeedComposed, held, delivered: tuple[OpenReply, LaunchReply],
        seq: int | None, replaced: list[Held] = (),
    ) -> str:
        """Returns when it was confirmed, as recorded."""
        reply, launch = delivered
        plan = composed.plan
        now = self._clock()
        # One conversation is live per instance and repo: this one replaces any other
        # confirmed before it (every event recorded before this seed_composed is folded).
        await self._caught_up(seq - 1 if seq else None)
        stopped_before = {previous.session_id for previous in replaced}
        superseded = [
            previous for previous in await self._state.live_in_repo(plan.instance_id, plan.repo)
            if previous.session_id != composed.session_id
            and previous.session_id not in stopped_before
        ]
        if plan.relocation:
            moved_from = held.node_id if held is not None else plan.relocation_from
            if (held is not None and held.state is lc.State.LIVE and moved_from != plan.node_id
                    and composed.session_id not in stopped_before):
                await self._stopper.tell_machine(held, "relocated")
            event = Relocated(session_id=composed.session_id, at=now, from_node_id=moved_from,
                              to_node_id=plan.node_id, reply=reply, engine=plan.engine,
                              engine_session_id=launch.engine_session_id)
        else:
            event = Opened(session_id=composed.session_id, at=now, reply=reply, plan=plan,
                           engine_session_id=launch.engine_session_id)
        # The replaced ones' stops and this outcome in one window, in that order; the
        # machines are told after, so the person's reply does not wait on them.
        arrived = []
        if plan.carry is not None:
            arrived.append(event_message(WorktreeApplied(
                session_id=composed.session_id, at=now, node_id=plan.node_id,
                from_node=plan.carry.node_id, worktree=launch.worktree,
                record_placed=bool(launch.record_placed))))
        await self._publisher.publish([
            *(self._stopper.record(previous, "superseded", now) for previous in superseded),
            *arrived, event_message(event),
        ])
        for previous in superseded:
            await self._stopper.tell_machine(previous, "superseded")
        self._opens.labels(plan.continuity.reason_code, reply.outcome).inc()
        log.info("opened", session_id=composed.session_id, outcome=reply.outcome,
                 relocation=plan.relocation)
        return now
