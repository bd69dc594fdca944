"""Ending a live conversation, for any reason, the one way: record it, tell the machine,
tell the person.

The event is recorded first, so every service's fold agrees the conversation is no
longer live even when the machine cannot be reached; the machine is still asked to
stop (it may be alive although its presence lapsed), and the person is told in the
notice rules of CONTRACT.md 3.3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections.abc import Callable

import hashlib

from seedline_contracts.codec import encode
from seedline_contracts.events import Reaped, Stopped, WorktreeSaved
from seedline_contracts.worktrees import SavedTree
from seedline_core import lifecycle as lc
from seedline_contracts.sessions import Notification
from seedline_platform.logging import get_logger
from seedline_platform.publishing import Outgoing, event_message

from .saved_objects import SavedObjectsKept
from .state import Held

if TYPE_CHECKING:
    from .bootstrap import Ports

log = get_logger(__name__)


class Stopper:
    def __init__(self, ports: Ports, saves: SavedObjectsKept) -> None:
        self._state = ports.state
        self._publisher = ports.publisher
        self._machines = ports.machines
        self._notifier = ports.notifier
        self._clock = ports.clock
        self._saves = saves

    async def end(
        self, held: Held, reason: str, notice: Callable[[str], Notification] | None = None,
        idle_seconds: int | None = None, ask_machine: bool = True,
    ) -> None:
        """`notice(at)` builds the person's notification, when there is one to send."""
        at = self._clock()
        (seq,) = await self._publisher.publish([self.record(held, reason, at, idle_seconds)])
        if seq == 0:
            # Another copy of the gateway ended it first (both saw the machine go, say):
            # the machine and the person were told once, by that copy.
            log.info("stop_already_recorded", session_id=held.session_id, reason=reason)
            return
        await self.tell_machine(held, reason, ask_machine)
        if notice is not None:
            await self._notifier.notify(held.conversation.instance_id, notice(at))

    def record(
        self, held: Held, reason: str, at: str | None = None, idle_seconds: int | None = None,
    ) -> Outgoing:
        """The event that ends it, for a caller that records it with events of its own."""
        at = at or self._clock()
        c = held.conversation
        if idle_seconds is not None:
            event = Reaped(session_id=c.session_id, at=at, node_id=c.node_id or "",
                           idle_seconds=idle_seconds)
        else:
            event = Stopped(session_id=c.session_id, at=at, reason=reason, node_id=c.node_id)
        # One stop per live period: a redelivered cause records it once.
        return event_message(event, f"stopped:{c.session_id}:{c.confirmed_at}")

    async def tell_machine(
        self, held: Held, reason: str, ask_machine: bool = True, node_id: str | None = None,
    ) -> bool:
        """After the record: the machine (`node_id`, or the one it is held on) is asked to
        stop the engine, and what it saved of the checkout as it stopped is recorded.
        Whether the machine answered (True when it was not asked)."""
        c = held.conversation
        node_id = node_id or c.node_id
        answered = True
        if ask_machine and node_id:
            reply = await self._machines.stop(node_id, c.session_id, reason)
            answered = reply is not None
            if reply is not None and reply.worktree is not None:
                await self.saved(c, node_id, reply.worktree)
        log.info("conversation_stopped", session_id=c.session_id, reason=reason)
        return answered

    async def saved(self, c: lc.Conversation, node_id: str, tree: SavedTree) -> None:
        """Record what a machine saved of a conversation's checkout (CONTRACT.md 6): told in
        its stop reply and again in its `exited` event, recorded once."""
        label = await self._state.label(node_id) or node_id
        event = WorktreeSaved(session_id=c.session_id, at=self._clock(), node_id=node_id,
                              label=label, instance_id=c.instance_id, repo=c.repo,
                              engine=c.engine, worktree=tree)
        once = hashlib.sha256(encode(tree)).hexdigest()[:32]
        await self._publisher.publish([event_message(event, f"worktree_saved:{once}")])
        await self._saves.keep_newest(c.instance_id, c.repo, c.session_id)
