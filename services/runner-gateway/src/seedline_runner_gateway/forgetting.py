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
- a wake launched as the record was being made is stopped as soon as it is confirmed,
  checked against the record itself (`stop_if_forgotten`): a copy whose fold had folded
  its launch may have dropped the rows before the launch was confirmed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from seedline_contracts.instances import Erasure
from seedline_contracts.events import LaunchPlan
from seedline_contracts.times import now_text, parse_rfc3339
from seedline_core import lifecycle as lc
from seedline_platform.erasure import covers
from seedline_platform.logging import get_logger
from seedline_platform.outage import NATS_AWAY

from .state import GatewayState, Held
from .stopping import Stopper

log = get_logger(__name__)

STOP_REASON = "forgotten"
NOT_LAUNCHED = "Its instance was forgotten: nothing of it is launched."
# An erasure older than this was acted on when it was recorded; followed again (as every copy
# does when it starts), it only has the rows dropped, so a conversation of the instance used
# again since is not stopped.
ACTED_ON_WITHIN = timedelta(minutes=10)


class ForgetHere:
    """The gateway's `on_forgotten`: stop what runs of the instance, then drop its rows."""

    def __init__(self, state: GatewayState, stopper: Stopper,
                 caught_up: Callable[[], Awaitable[bool]],
                 drop: Callable[[Erasure], Awaitable[None]] | None,
                 clock: Callable[[], str] = now_text) -> None:
        self._state = state
        self._stopper = stopper
        self._caught_up = caught_up
        self._drop = drop
        self._clock = clock

    async def __call__(self, record: Erasure) -> None:
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


async def stop_if_forgotten(
    erasure_of: Callable[[str], Awaitable[Erasure | None]], stopper: Stopper,
    session_id: str, plan: LaunchPlan, confirmed_at: str,
) -> bool:
    """Stop a wake just confirmed when an erasure recorded since covers its message;
    whether it did. Its row may be gone already: it is stopped as its launch left it."""
    if plan.wake_seq is None:
        return False
    try:
        record = await erasure_of(plan.instance_id)
    except NATS_AWAY as error:  # the launch stands; a follower's pass stops it if it can
        log.warning("erasure_not_read", session_id=session_id, error=str(error) or
                    type(error).__name__)
        return False
    if not covers(record, plan.wake_seq):
        return False
    log.info("forgotten_on_launch", session_id=session_id)
    await stopper.end(Held(lc.Conversation(
        session_id=session_id, instance_id=plan.instance_id, repo=plan.repo,
        state=lc.State.LIVE, created_seq=0, node_id=plan.node_id, engine=plan.engine,
        confirmed_at=confirmed_at), None), STOP_REASON)
    return True
