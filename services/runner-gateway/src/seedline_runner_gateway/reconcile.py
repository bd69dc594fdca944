"""What the gateway holds live, held against what machines report (CONTRACT.md 4.1).

A machine that goes offline ends every conversation live on it (``runner_offline``);
one that is online but leaves a conversation out of two successive presence puts made
after its launch was accepted no longer hosts it (``runner_restarted``). Either way
the person is told, and ``sessions.list`` never shows a conversation no machine hosts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from seedline_core import lifecycle as lc
from seedline_core.presence import PresencePut, reconcile
from seedline_platform.logging import get_logger

from .notify import machine_offline, machine_restarted
from .presence import Sighting
from .state import GatewayState, Held
from .stopping import Stopper

log = get_logger(__name__)


class Reconciler:
    def __init__(
        self, state: GatewayState, stopper: Stopper, caught_up: Callable[[], Awaitable[None]],
        went_live_on: Callable[[str], int] | None = None,
    ) -> None:
        self._state = state
        self._stopper = stopper
        # Before ending a conversation, fold what is recorded: one the gateway has just
        # stopped itself (superseded, say) is left out of the machine's next puts, and was
        # then stopped again with a notice that its machine had restarted or gone.
        self._caught_up = caught_up
        # Per machine, the presence revision newest when each launch there was accepted;
        # only later puts count. Kept for what the machine's last put listed or left out
        # while held live there: a conversation done with leaves at the next put.
        self._accepted: dict[str, dict[str, int]] = {}
        self._misses: dict[str, dict[str, int]] = {}
        # A put that repeats a machine's last one, which hosted all the gateway holds live
        # there, changes nothing until the fold makes another conversation live there
        # (one that stopped only shrinks what the machine must host): each such machine's
        # last (hosted set, how often the fold made one live there). A machine puts every
        # few seconds; most puts are such. None: every put is read against the state.
        self._went_live_on = went_live_on
        self._unchanged: dict[str, tuple[frozenset[str], int]] = {}

    def launched(self, node_id: str, session_id: str, revision: int) -> None:
        self._accepted.setdefault(node_id, {})[session_id] = revision

    async def seen(self, node_id: str, sighting: Sighting) -> None:
        live = sighting.presence.live
        if live is None:
            return  # protocol 1: says nothing about what it hosts
        listed = frozenset(live)
        went_live = self._went_live_on(node_id) if self._went_live_on is not None else -1
        if went_live >= 0 and self._unchanged.get(node_id) == (listed, went_live):
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
            self._unchanged[node_id] = (listed, went_live)
        else:
            self._unchanged.pop(node_id, None)
        label = sighting.presence.label
        for held in here:
            if held.session_id not in gone or not (held := await self._still_live(held)):
                continue
            log.info("not_hosted_any_more", session_id=held.session_id, node_id=node_id)
            await self._stopper.end(held, "runner_restarted", ask_machine=False,
                                    notice=machine_restarted(held.session_id, node_id, label))

    async def gone(self, node_id: str) -> None:
        label = await self._state.label(node_id)
        await self._caught_up()
        for held in await self._state.live_on(node_id):
            await self._stopper.end(
                held, "runner_offline", notice=machine_offline(held.session_id, node_id, label)
            )
        self._accepted.pop(node_id, None)
        self._misses.pop(node_id, None)
        self._unchanged.pop(node_id, None)

    async def _still_live(self, held: Held) -> Held | None:
        """The conversation as now recorded, when it is still live on the same machine."""
        await self._caught_up()
        now = await self._state.held(held.session_id)
        if now is None or now.state is not lc.State.LIVE or now.node_id != held.node_id:
            return None
        return now
