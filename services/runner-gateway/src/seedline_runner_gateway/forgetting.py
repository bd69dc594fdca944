"""Nothing of a forgotten instance runs on (CONTRACT.md Erasure).

The timeline-writer stops the instance's live conversations before it records the
erasure, but a person's message sent meanwhile lies inside the erasure and may still wake
one. So, once an erasure is recorded:
- a wake it covers is never launched (`Forgotten.covers`, checked under the repo's turn);
- each copy, following the record, stops what its fold holds live of the instance, having
  folded everything recorded until then, and only then drops its rows (`ForgetHere`). An
  instance may be used again after it was forgotten, and every copy follows each record
  again when it starts: only conversations confirmed by the time the record was made are
  stopped, and only while the record is recent (`ACTED_ON_WITHIN`);
- a wake this copy launched as the record was being made is stopped as soon as it is
  confirmed when the copy has taken the record in, and otherwise once it does: each copy
  keeps the wakes it confirmed lately (`ForgetHere.confirmed`), because another copy may have
  dropped the rows before the launch was confirmed, so no fold holds it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from seedline_contracts.instances import Erasure
from seedline_contracts.events import LaunchPlan
from seedline_contracts.times import now_text, parse_rfc3339
from seedline_core import lifecycle as lc
from seedline_platform.bounded import trim_oldest
from seedline_platform.erasure import Forgotten, covers
from seedline_platform.logging import get_logger

from .state import GatewayState, Held
from .stopping import Stopper

log = get_logger(__name__)

STOP_REASON = "forgotten"
NOT_LAUNCHED = "Its instance was forgotten: nothing of it is launched."
# An erasure older than this was acted on when it was recorded; followed again (as every copy
# does when it starts), it only has the rows dropped, so a conversation of the instance used
# again since is not stopped.
ACTED_ON_WITHIN = timedelta(minutes=10)
# How many of the wakes it confirmed lately a copy keeps for an erasure it has yet to take in
# (the newest; a minute of a storm of 200 wakes a second is 12,000).
KEPT_WAKES = 10_000


@dataclass(frozen=True)
class _Woken:
    plan: LaunchPlan
    confirmed_at: str


class ForgetHere:
    """The gateway's `on_forgotten`: stop what runs of the instance, then drop its rows."""

    def __init__(self, state: GatewayState, stopper: Stopper, forgotten: Forgotten,
                 caught_up: Callable[[], Awaitable[bool]],
                 drop: Callable[[Erasure], Awaitable[None]] | None,
                 clock: Callable[[], str] = now_text) -> None:
        self._state = state
        self._stopper = stopper
        self._forgotten = forgotten
        self._caught_up = caught_up
        self._drop = drop
        self._clock = clock
        self._woken: dict[str, _Woken] = {}  # by session_id, oldest first

    def covers(self, plan: LaunchPlan) -> bool:
        """Whether the plan is a wake by a message an erasure taken in covers."""
        return self._forgotten.covers(plan.instance_id, plan.wake_seq)

    async def confirmed(self, session_id: str, plan: LaunchPlan, confirmed_at: str) -> None:
        """A launch this copy just confirmed: a wake an erasure taken in covers is stopped
        now; any other wake is kept, for an erasure taken in later (`__call__`). The check
        and the keeping are one step of the loop, so an erasure taken in meanwhile finds it
        kept."""
        if plan.wake_seq is None:
            return
        if not self.covers(plan):
            self._woken[session_id] = _Woken(plan, confirmed_at)
            trim_oldest(self._woken, KEPT_WAKES)
            return
        log.info("forgotten_on_launch", session_id=session_id)
        await self._stopper.end(_held(session_id, plan, confirmed_at), STOP_REASON)

    async def __call__(self, record: Erasure) -> None:
        """Taken in by `forgotten` before it is called (erasure.ErasureFollower)."""
        for session_id, woken in list(self._woken.items()):
            if woken.plan.instance_id == record.instance_id and \
                    covers(record, woken.plan.wake_seq):
                del self._woken[session_id]
                log.info("forgotten_on_launch", session_id=session_id)
                await self._stopper.end(_held(session_id, woken.plan, woken.confirmed_at),
                                        STOP_REASON)
        recorded = parse_rfc3339(record.at)
        if parse_rfc3339(self._clock()) - recorded <= ACTED_ON_WITHIN:
            await self._caught_up()
            for held in await self._state.all_live(record.instance_id):
                confirmed = held.conversation.confirmed_at
                if confirmed is None or parse_rfc3339(confirmed) <= recorded:
                    log.info("forgotten_still_live", session_id=held.session_id)
                    await self._stopper.end(held, STOP_REASON)
        if self._drop is not None:
            await self._drop(record)


def _held(session_id: str, plan: LaunchPlan, confirmed_at: str) -> Held:
    """A wake as its launch left it: its row may be gone already."""
    return Held(lc.Conversation(
        session_id=session_id, instance_id=plan.instance_id, repo=plan.repo,
        state=lc.State.LIVE, created_seq=0, node_id=plan.node_id, engine=plan.engine,
        confirmed_at=confirmed_at), None)
