"""Follow a person's messages on the timeline: each is activity of its conversation, a turn
delivered to the live conversation, or a wake when none is live (CONTRACT.md 4). The
other entries (an engine's output) are not taken here: the idle sweep reads the newest of
them when it looks (activity.py).

Entries are handled in stream order, one at a time, so turns reach a machine in the
order people wrote them. A turn is acknowledged only after the machine accepted it;
the machine ignores a (session_id, seq) it has seen, so a redelivery after a gateway
restart is harmless. A wake is an event (`wake_requested`) that the resolver acts
on: nothing here waits for an open.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from nats.aio.msg import Msg

from seedline_contracts import subjects
from seedline_contracts.events import WakeRequested
from seedline_contracts.runner import TurnRequest
from seedline_contracts.sessions import NotWokenNotification
from seedline_contracts.timeline import TimelineEntry
from seedline_contracts.times import parse_rfc3339
from seedline_core import lifecycle as lc
from seedline_core.notices import not_woken_text
from seedline_platform.consumer import Batch
from seedline_platform.logging import get_logger
from seedline_platform.outage import Outage
from seedline_platform.publishing import event_message

from .fold import LifecycleFold
from .machine_calls import MachineUnreachable
from .notify import machine_offline, machine_restarted
from .presence import PresenceView
from .state import Held, RepoNow
from .stopping import Stopper

if TYPE_CHECKING:
    from .bootstrap import Ports

log = get_logger(__name__)

# A chat_user entry wakes a conversation only when written within this long of
# reaching the timeline: backfilled history never starts anything.
WAKE_FRESHNESS = timedelta(minutes=2)
# How long a message waits for a conversation that is still opening on its repo.
OPENING_WAIT_SECONDS = 40.0
# A burst of messages to a repo no machine has worked on gets one not_woken notice per
# this window, by the messages' own times (CONTRACT.md 4), not one per message.
NOT_WOKEN_WINDOW = timedelta(minutes=10)


class MachineBusy(Outage):
    """The machine is online but did not take the turn: wait and try again."""


class TimelineFollower:
    def __init__(self, ports: Ports, presence: PresenceView, stopper: Stopper,
                 fold: LifecycleFold) -> None:
        self._state = ports.state
        self._machines = ports.machines
        self._publisher = ports.publisher
        self._notifier = ports.notifier
        self._sealer = ports.sealer
        self._clock = ports.clock
        self._new_id = ports.new_id
        self._presence = presence
        self._stopper = stopper
        # Whether a read holds what is recorded; a wait for an opening to settle wakes when
        # that conversation's events are folded.
        self._fold = fold
        # Whether the last read of a repo found the fold behind what was recorded (`_read`).
        self._fold_was_behind = False

    async def handle(self, batch: Batch[TimelineEntry]) -> None:
        activity: dict[str, datetime] = {}
        for entry, _ in batch.items:
            at = parse_rfc3339(entry.at)
            activity[entry.session_id] = max(at, activity.get(entry.session_id, at))
        await self._state.touch(activity)
        for entry, msg in batch.items:
            # An imported message is history, whatever its `at` (CONTRACT.md 2.1).
            if entry.kind == "chat_user" and entry.origin != "import" and (
                entry.entry_id != subjects.instruction_entry_id(entry.session_id)
            ):
                await self._on_person_message(msg, entry)

    async def _on_person_message(self, msg: Msg, entry: TimelineEntry) -> None:
        seq = msg.metadata.sequence.stream
        found = await self._settled(msg, entry)
        current = found.current
        if current is not None and current.state is lc.State.LIVE:
            # Stored sealed; the machine is given it plain.
            content = await self._sealer.open_or_none(entry.instance_id, entry.content)
            if content is None:
                return  # its instance was forgotten
            if await self._deliver_turn(current, seq, content):
                return
            # It was stopped: the wake goes where the repo last opened as of now.
            found = await self._state.repo_now(entry.instance_id, entry.repo)
        arrived = msg.metadata.timestamp
        if arrived is None or abs(arrived - parse_rfc3339(entry.at)) > WAKE_FRESHNESS:
            log.info("backfill_not_woken", seq=seq)
            return
        await self._wake(entry, seq, found.last_open)

    async def _settled(self, msg: Msg, entry: TimelineEntry) -> RepoNow:
        """The repo's live conversation, once any that is opening has settled, and where a
        wake would go."""
        found = await self._read(entry)
        current = found.current
        if current is None or current.state is not lc.State.OPENING:
            return found
        current = await self._fold.until(
            current.session_id, lambda held: held is None or held.state is not lc.State.OPENING,
            asyncio.get_running_loop().time() + OPENING_WAIT_SECONDS,
            between=lambda: _extend(msg))
        if current is not None and current.state is lc.State.OPENING:
            current = None  # it did not open in time
        if current is not None and current.state is lc.State.LIVE:
            return RepoNow(current, found.last_open)  # the turn goes to it
        # It did not open: a wake goes where the repo last opened as of now.
        return RepoNow(current, (await self._state.repo_now(entry.instance_id,
                                                            entry.repo)).last_open)

    async def _read(self, entry: TimelineEntry) -> RepoNow:
        """The repo as read with the events recorded so far folded in where it matters: a
        read that finds nothing live is read again when the fold was behind it. In a burst of
        wakes the fold is most often behind, so after a read found it so, the next is made
        once the fold has caught up: one read per message, not two."""
        if self._fold_was_behind:
            self._fold_was_behind = await self._fold.caught_up_if_behind()
            return await self._state.repo_now(entry.instance_id, entry.repo)
        found = await self._state.repo_now(entry.instance_id, entry.repo)
        if found.current is None and not await self._fold.read_holds_everything(found.applied):
            # Read the events recorded so far before concluding nothing is live.
            self._fold_was_behind = True
            found = await self._state.repo_now(entry.instance_id, entry.repo)
        return found

    async def _deliver_turn(self, held: Held, seq: int, content: str) -> bool:
        """True when the machine took the turn; False when it no longer hosts it."""
        request = TurnRequest(session_id=held.session_id, seq=seq, content=content)
        try:
            reply = await self._machines.turn(held.node_id, request)
        except MachineUnreachable:
            if await self._presence.get(held.node_id) is not None:
                raise MachineBusy(held.node_id) from None
            label = await self._state.label(held.node_id)
            await self._stopper.end(
                held, "runner_offline", ask_machine=False,
                notice=machine_offline(held.session_id, held.node_id, label),
            )
            return False
        if reply.accepted:
            return True
        # The machine no longer runs it (it restarted, or ended it cut off from the
        # platform): the person is told, as when its presence says so, and the message
        # wakes a new one (found by the fault harness, seed 16: a stop never told).
        label = await self._state.label(held.node_id)
        await self._stopper.end(held, "runner_restarted", ask_machine=False,
                                notice=machine_restarted(held.session_id, held.node_id, label))
        return False

    async def _wake(self, entry: TimelineEntry, seq: int,
                    target: tuple[str, str] | None) -> None:
        if target is None:
            log.info("nothing_to_wake_on", instance_id=entry.instance_id, seq=seq)
            if not await self._state.tell_not_woken(
                    entry.instance_id, entry.repo, parse_rfc3339(entry.at), entry.entry_id,
                    NOT_WOKEN_WINDOW):
                return
            await self._notifier.notify(entry.instance_id, NotWokenNotification(
                repo=entry.repo, text=not_woken_text(entry.repo), at=self._clock()),
                notice_id=f"not_woken:{entry.instance_id}:{entry.entry_id}")
            return
        if self._fold.forgotten.covers(entry.instance_id, seq):
            log.info("forgotten_not_woken", seq=seq)
            return
        node_id, engine = target
        request_id = f"wake:{entry.entry_id}"[:128]
        event = WakeRequested(
            session_id=self._new_id(), at=self._clock(), instance_id=entry.instance_id,
            repo=entry.repo, engine=engine, node_id=node_id, wake_seq=seq,
            request_id=request_id,
        )
        await self._publisher.publish([event_message(event, request_id)])
        log.info("wake_requested", seq=seq, session_id=event.session_id, node_id=node_id)


async def _extend(msg: Msg) -> None:
    try:
        await msg.in_progress()
    except Exception:
        pass
