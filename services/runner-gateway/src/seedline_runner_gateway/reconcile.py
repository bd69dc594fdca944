"""What the gateway holds live, held against what machines report (CONTRACT.md 4.1).

A machine that goes offline ends every conversation live on it (``runner_offline``);
one that is online but leaves a conversation out of two successive presence puts made
after its launch was accepted no longer hosts it (``runner_restarted``). Either way
the person is told, and ``sessions.list`` never shows a conversation no machine hosts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seedline_core import lifecycle as lc
from seedline_core.presence import PresencePut, reconcile
from seedline_platform.logging import get_logger

from .notify import machine_offline, machine_restarted
from .presence import Sighting
from .state import GatewayState, Held
from .stopping import Stopper

if TYPE_CHECKING:
    from .fold import LifecycleFold

log = get_logger(__name__)


class Reconciler:
    def __init__(self, state: GatewayState, stopper: Stopper, fold: LifecycleFold) -> None:
        self._state = state
        self._stopper = stopper
        # Before ending a conversation it folds what is recorded (`caught_up`): one the
        # gateway has just stopped itself (superseded, say) is left out of the machine's next
        # puts, and was then stopped again with a notice that its machine had restarted or
        # gone. What it made live on each machine says which puts are news.
        self._fold = fold
        # Per machine, the presence revision newest when each launch there was accepted;
        # only later puts count. Kept for what the machine's last put listed or left out
        # while held live there: a conversation done with leaves at the next put.
        self._accepted: dict[str, dict[str, int]] = {}
        self._misses: dict[str, dict[str, int]] = {}
        # Per machine, the last put held against the state that hosted all the gateway held
        # live there (what it listed, and how many this copy's fold had made live there by
        # then). What the gateway holds live there since is at most that and what the fold
        # made live there after (a stop only shrinks it; a sibling copy's fold is held
        # against the puts by that copy): a put listing all of it changes nothing and is
        # taken without a read. A machine puts every few seconds, and at each launch and
        # stop: most puts are such.
        self._agreed: dict[str, tuple[frozenset[str], int]] = {}

    def launched(self, node_id: str, session_id: str, revision: int) -> None:
        self._accepted.setdefault(node_id, {})[session_id] = revision

    async def seen(self, node_id: str, sighting: Sighting) -> None:
        live = sighting.presence.live
        if live is None:
            return  # protocol 1: says nothing about what it hosts
        listed = frozenset(live)
        went_live = self._fold.went_live_on(node_id)
        if self._hosts_all_held(node_id, listed):
            self._agreed[node_id] = (listed, went_live)
            return
        accepted = self._accepted.get(node_id, {})
        # A conversation first met on this put (the gateway restarted) starts counting
        # from the next one.
        for session_id in listed:
            accepted.setdefault(session_id, sighting.revision)
        # Only what the put leaves out can be missing, so only that is read: a machine
        # hosting many conversations is not read whole at every put (in a storm of
        # launches each put lists one more).
        here = await self._state.live_on(node_id, besides=listed)
        hosted = {h.session_id: accepted.setdefault(h.session_id, sighting.revision)
                  for h in here}
        # What the put neither lists nor leaves out while held live here is done with.
        self._accepted[node_id] = {s: r for s, r in accepted.items()
                                   if s in listed or s in hosted}
        counts, gone = reconcile(
            PresencePut(sighting.revision, listed), hosted, self._misses.get(node_id, {})
        )
        self._misses[node_id] = counts
        if not hosted:  # the machine and the gateway agree
            self._agreed[node_id] = (listed, went_live)
        else:
            self._agreed.pop(node_id, None)
        label = sighting.presence.label
        for held in here:
            if held.session_id not in gone or not (held := await self._still_live(held)):
                continue
            log.info("not_hosted_any_more", session_id=held.session_id, node_id=node_id)
            await self._stopper.end(held, "runner_restarted", ask_machine=False,
                                    notice=machine_restarted(held.session_id, node_id, label))

    async def gone(self, node_id: str) -> None:
        label = await self._state.label(node_id)
        await self._fold.caught_up()
        for held in await self._state.live_on(node_id):
            await self._stopper.end(
                held, "runner_offline", notice=machine_offline(held.session_id, node_id, label)
            )
        self._accepted.pop(node_id, None)
        self._misses.pop(node_id, None)
        self._agreed.pop(node_id, None)

    def _hosts_all_held(self, node_id: str, listed: frozenset[str]) -> bool:
        """Whether a put lists all the machine listed when it last agreed with the state,
        and all this copy's fold made live there since."""
        agreed = self._agreed.get(node_id)
        if agreed is None:
            return False
        listed_then, went_live_then = agreed
        since = self._fold.made_live_since(node_id, went_live_then)
        return since is not None and listed_then <= listed and since <= listed

    async def _still_live(self, held: Held) -> Held | None:
        """The conversation as now recorded, when it is still live on the same machine."""
        await self._fold.caught_up()
        now = await self._state.held(held.session_id)
        if now is None or now.state is not lc.State.LIVE or now.node_id != held.node_id:
            return None
        return now
