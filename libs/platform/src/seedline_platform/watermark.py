"""How far a projection has applied its stream, for read-your-writes without polling.

The projection's consumer calls ``advance`` after each committed batch; a handler
that must see everything up to a seq awaits ``reached``. In one process that wakes
at the commit. Copies of a service share a durable consumer, so a copy may not see
every batch itself: ``reached`` then asks the stored offset (``read``) as well, a few
times a second, so the answer is right with any number of copies.

A projection whose consumer takes only some of a stream's events (``drained`` given) may
never fold the seq a wait names: the stream can end in events it does not take. Such a
wait also asks whether the consumer has anything left to deliver or to hear acknowledged;
when it has not, everything the projection takes up to the stream's end is applied, the
last of it at the seq the consumer last delivered (``settled``).

What an ask that found the consumer with nothing left proves stays proved: the seq a wait
named is then held, and a wait for it or less later is answered with no ask. Nor is the
consumer asked while this copy's last batch came with more behind it (``advance(more=True)``,
the delivery's own count of what is pending): it is not drained before the next batch; a
recheck asks all the same, since another copy may take that batch.

A wait for a seq this copy's own fold has taken (``taking``) waits for that fold's commit
first, with neither read nor ask: no other copy folds what this one took. Should that fold
not move within a recheck, the wait reads and asks as any other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class Watermark:
    def __init__(self, read: Callable[[], Awaitable[int]], recheck_seconds: float = 0.05,
                 drained: Callable[[], Awaitable[int | None]] | None = None) -> None:
        self._read = read
        self._recheck = recheck_seconds
        self._drained = drained
        self._seq = 0
        self._taken = 0  # the last seq of the newest batch this copy's fold has taken
        self._more = False  # its consumer had more to deliver after this copy's last batch
        self._changed = asyncio.Condition()
        # The newest ask of `drained`: when it began, and its answer.
        self._probe: tuple[float, asyncio.Future[int | None]] | None = None

    @classmethod
    def unfed(cls) -> "Watermark":
        """One no fold advances, for a handler whose unit tests fold by hand: each wait
        on it lasts its timeout."""
        async def nothing_applied() -> int:
            return 0
        return cls(nothing_applied)

    @property
    def seq(self) -> int:
        return self._seq

    async def stored(self) -> int:
        """The offset as stored now, whichever copy moved it."""
        return await self._read()

    def taking(self, seq: int) -> None:
        """This copy's fold took a batch ending at `seq`, to fold and then `advance`."""
        self._taken = max(self._taken, seq)

    async def advance(self, seq: int, more: bool = False) -> None:
        """This copy's fold committed a batch ending at `seq`. `more`: its consumer had more
        to deliver when the batch's last message came, so it is not drained before the next
        batch: until then a wait that needs it drained does not ask (a recheck still does:
        another copy may take that batch)."""
        self._more = more
        await self._holds(seq)

    async def _holds(self, seq: int) -> None:
        if seq <= self._seq:
            return
        self._seq = seq
        async with self._changed:
            self._changed.notify_all()

    async def reached(self, seq: int, timeout: float, stored: int | None = None,
                      behind: bool = False) -> bool:
        """Whether the projection holds `seq` within `timeout` seconds. `stored`: the offset
        as the caller has just read it (with the rows it read), taken for a first read.
        `behind`: the caller has just heard that the consumer has something left (`settled`),
        so the consumer is not asked again before this copy's next fold or a recheck."""
        if stored is not None and stored > self._seq:
            self._seq = stored
        if self._seq >= seq:
            return True
        loop = asyncio.get_running_loop()
        began = loop.time()
        deadline = began + timeout
        # This copy's fold holds a batch up to it: its commit answers, with no read or ask.
        own = seq <= self._taken
        read_stored = stored is None and not own
        ask = self._drained is not None and not own and not self._more and not behind
        if ask:
            # A consumer with nothing left says so without a read of the stored offset; the
            # waits that begin in this turn of the loop share one ask.
            await asyncio.sleep(0)
        while True:
            if ask and await self._nothing_left(began) is not None:
                # Everything the consumer takes up to `seq` is applied, and stays so: a
                # later wait for it (a launch waits twice for its decision's place) asks
                # nothing, and waits for less are answered now.
                self._more = False
                await self._holds(seq)
                return True
            if read_stored:
                now = await self.stored()
                if now > self._seq:
                    self._seq = now
                if self._seq >= seq:
                    return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            before = self._seq
            async with self._changed:
                try:
                    # With `drained`, a fold of this copy whose consumer had nothing more
                    # may have taken the last event it had: ask again then, not a recheck
                    # later.
                    await asyncio.wait_for(self._changed.wait_for(
                        lambda: self._seq >= seq or (self._drained is not None
                                                     and self._seq != before
                                                     and not self._more)),
                        min(remaining, self._recheck))
                except TimeoutError:
                    pass
            if self._seq >= seq:
                return True
            # Woken by this copy's fold, the stored offset has nothing newer to say; a fold
            # of its own that did not move within a recheck is asked after as any other.
            read_stored = self._seq == before
            own = own and not read_stored
            ask = self._drained is not None and not own

    async def holds_everything(self) -> bool:
        """Whether the consumer has nothing left now (False without `drained`): everything
        recorded so far is applied, with no read of where the stream ends."""
        return await self.settled() is not None

    async def settled(self) -> int | None:
        """When the consumer has nothing left now, the seq of the last event it took (a read
        that found the offset stored at or past it holds everything recorded so far); None
        when it has something left, or without `drained`; asked only when this copy's last
        batch did not come with more behind it."""
        if self._drained is None or self._more:
            return None
        return await self._nothing_left(asyncio.get_running_loop().time())

    async def _nothing_left(self, since: float) -> int | None:
        """Where the consumer stood when it had nothing left, at some moment after `since`
        (None: it had something left). One ask at a time serves every wait that began
        before it did."""
        assert self._drained is not None
        probe = self._probe
        if probe is None or probe[0] < since or (probe[1].done()
                                                  and probe[1].result() is None):
            probe = (asyncio.get_running_loop().time(),
                     asyncio.ensure_future(self._drained()))
            self._probe = probe
        return await asyncio.shield(probe[1])
