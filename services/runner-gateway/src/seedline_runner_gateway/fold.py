"""The gateway's fold of each conversation's lifecycle (what runs where, CONTRACT.md 4.1),
and the wait every read of it makes to read its own writes: up to the end of
SEEDLINE_SESSIONS as it was when asked, or up to a seq the caller knows."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import deque
from collections.abc import Awaitable, Callable, Iterator

from seedline_contracts.events import SessionEvent
from seedline_core import lifecycle as lc
from seedline_platform.consumer import Batch
from seedline_platform.erasure import Forgotten
from seedline_platform.lifecycle_events import RequestedHere, lifecycle_steps
from seedline_platform.logging import get_logger
from seedline_platform.watermark import Watermark

from .state import GatewayState, Held

_UNKNOWN = object()  # no fold of this copy vouches for the conversation: read its row

log = get_logger(__name__)

# The fold's durable consumer: it takes only the events that move a lifecycle
# (seedline_platform.lifecycle_events.LIFECYCLE_EVENTS).
FOLD_DURABLE = "runner-gateway-sessions"
CATCH_UP_SECONDS = 5.0
RECHECK_SECONDS = 0.25  # how soon a wait on one conversation reads it again regardless
# How many of the conversations it made live on each machine the fold keeps the ids of, the
# newest: what a machine's presence put must list for the reconciler to take it without a read.
KEPT_LIVE_IDS = 64


class LifecycleFold:
    def __init__(self, state: GatewayState, stream_end: Callable[[], Awaitable[int]],
                 drained: Callable[[], Awaitable[bool]] | None = None,
                 forgotten: Forgotten | None = None) -> None:
        self._state = state
        # The erasures this copy has taken in: no conversation a wake they cover asks for
        # is folded (seedline_platform.erasure.Forgotten).
        self.forgotten = forgotten or Forgotten()
        self._stream_end = stream_end
        self.folded = Watermark(state.applied, drained=drained)
        # How many times this copy's fold made a conversation live on each machine, and the
        # newest of those conversations: a presence put is news only when it leaves out
        # one of them, or what the machine listed before (reconcile.py).
        self._went_live: dict[str, int] = {}
        self._live_ids: dict[str, deque[str]] = {}
        self._requested = RequestedHere()
        # Waits for an event of one conversation to be folded, by its session_id.
        self._watches: dict[str, set[_Watch]] = {}

    async def apply_sessions(self, batch: Batch[SessionEvent]) -> None:
        self.folded.taking(batch.last_seq)
        async with self.forgotten.folding():
            steps = self.forgotten.kept_steps(self._requested.news(lifecycle_steps(batch.items)))
            folded = await self._state.apply_lifecycle(steps, batch.last_seq)
        self._requested.folded(steps)
        for step in steps:
            node_id = _made_live_on(step.event)
            if node_id is not None:
                self._went_live[node_id] = self._went_live.get(node_id, 0) + 1
                self._live_ids.setdefault(node_id, deque(maxlen=KEPT_LIVE_IDS)).append(
                    step.session_id)
        for session_id in {step.session_id for step in steps}:
            for watch in self._watches.get(session_id, ()):
                watch.tell(folded.get(session_id, _UNKNOWN))
        await self.folded.advance(batch.last_seq, more=batch.more)

    @contextlib.contextmanager
    def watching(self, session_id: str, timeout: float = RECHECK_SECONDS) -> Iterator[_Watch]:
        """The conversation now (`await watch.now()`), and again after this copy's fold
        next applies an event of it (`await watch.next()`), as that fold left it: no read.
        After `timeout` (a sibling copy may have folded it), or when the fold had applied
        those events before, `next` reads the row. Folds between entering and waiting are
        not missed; folds of other conversations do not wake it."""
        watch = _Watch(functools.partial(self._state.held, session_id), timeout)
        self._watches.setdefault(session_id, set()).add(watch)
        try:
            yield watch
        finally:
            watches = self._watches[session_id]
            watches.discard(watch)
            if not watches:
                del self._watches[session_id]

    async def until(self, session_id: str, settled: Callable[[Held | None], bool],
                    deadline: float,
                    between: Callable[[], Awaitable[None]] | None = None,
                    read_first: bool = True) -> Held | None:
        """The conversation as read now, then as each fold of it leaves it (`watching`),
        until `settled` says so of it or the loop's clock passes `deadline`; `between` runs
        before each wait. Not `read_first`: the first look is the next fold of it, or a read
        RECHECK_SECONDS later (for a caller that most often comes just before that fold)."""
        loop = asyncio.get_running_loop()
        with self.watching(session_id) as watch:
            held = await (watch.now() if read_first else watch.next())
            while not settled(held) and loop.time() < deadline:
                if between is not None:
                    await between()
                held = await watch.next()
        return held

    def went_live_on(self, node_id: str) -> int:
        return self._went_live.get(node_id, 0)

    def made_live_since(self, node_id: str, count: int) -> frozenset[str] | None:
        """The conversations this copy's fold made live on the machine since it had made
        `count` live there (`went_live_on`); None when it no longer keeps all their ids."""
        newer = self._went_live.get(node_id, 0) - count
        kept = self._live_ids.get(node_id, ())
        if newer > len(kept) or newer < 0:
            return None
        return frozenset(list(kept)[len(kept) - newer:])

    async def caught_up(self, upto: int | None = None, stored: int | None = None) -> bool:
        """Wait until the fold holds every event up to `upto` (default: recorded so far);
        whether it did within CATCH_UP_SECONDS (a caller that must not act on a stale read
        says so; the others go on with what is folded). `stored`: the fold's offset as the
        caller has just read it, instead of a read of its own."""
        if upto is None and await self.folded.holds_everything():
            return True
        return await self._reached(upto if upto is not None else await self._stream_end(),
                                   stored)

    async def caught_up_if_behind(self) -> bool:
        """Whether the fold's consumer had something left now; when it had, the fold is
        brought up to what is recorded (`caught_up`) before this returns, so that a read
        after it holds everything recorded before this was asked."""
        if await self.folded.holds_everything():
            return False
        # What this copy's mark holds (folded here, or proved by an ask) stands for a first
        # read of the stored offset: in a burst, the fold waited for is most often this
        # copy's own.
        await self._reached(await self._stream_end(), stored=self.folded.seq, behind=True)
        return True

    async def read_holds_everything(self, applied: int) -> bool:
        """Whether a read that found the fold's stored offset at `applied` holds every event
        recorded before now: the fold's consumer has nothing left, the last event it took
        at or before `applied`. When not, the fold is brought up to what is recorded
        (`caught_up`) before this returns, so that a read after it holds it."""
        settled = await self.folded.settled()
        if settled is not None:
            return settled <= applied
        await self._reached(await self._stream_end(), stored=applied, behind=True)
        return False

    async def _reached(self, target: int, stored: int | None = None,
                       behind: bool = False) -> bool:
        if await self.folded.reached(target, CATCH_UP_SECONDS, stored, behind):
            return True
        log.warning("fold_behind", target=target, applied=self.folded.seq)
        return False


def _made_live_on(event: lc.Event) -> str | None:
    if isinstance(event, lc.Opened):
        return event.node_id
    if isinstance(event, lc.Relocated):
        return event.to_node_id
    return None


class _Watch:
    """One waiter's news of one conversation: the newest fold of it not yet taken."""

    def __init__(self, read: Callable[[], Awaitable[Held | None]], timeout: float) -> None:
        self._read = read
        self._timeout = timeout
        self._news = asyncio.Event()
        self._seen: Held | None | object = _UNKNOWN

    def tell(self, seen: Held | None | object) -> None:
        # Two folds before the waiter looks: it takes the later.
        self._seen = seen
        self._news.set()

    async def now(self) -> Held | None:
        return await self._read()

    async def next(self) -> Held | None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._news.wait(), self._timeout)
        seen, self._seen = self._seen, _UNKNOWN
        self._news.clear()
        return await self._read() if seen is _UNKNOWN else seen
