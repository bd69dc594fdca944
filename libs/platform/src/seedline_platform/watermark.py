"""How far a projection has applied its stream, for read-your-writes without polling.

The projection's consumer calls ``advance`` after each committed batch; a handler
that must see everything up to a seq awaits ``reached``. In one process that wakes
at the commit. Copies of a service share a durable consumer, so a copy may not see
every batch itself: ``reached`` then asks the stored offset (``read``) as well, a few
times a second, so the answer is right with any number of copies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class Watermark:
    def __init__(self, read: Callable[[], Awaitable[int]], recheck_seconds: float = 0.05) -> None:
        self._read = read
        self._recheck = recheck_seconds
        self._seq = 0
        self._changed = asyncio.Condition()

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

    async def advance(self, seq: int) -> None:
        if seq <= self._seq:
            return
        self._seq = seq
        async with self._changed:
            self._changed.notify_all()

    async def reached(self, seq: int, timeout: float) -> bool:
        """Whether the projection holds `seq` within `timeout` seconds."""
        if self._seq >= seq:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            stored = await self._read()
            if stored > self._seq:
                self._seq = stored
            if self._seq >= seq:
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            async with self._changed:
                try:
                    await asyncio.wait_for(
                        self._changed.wait_for(lambda: self._seq >= seq),
                        min(remaining, self._recheck),
                    )
                except TimeoutError:
                    pass
            if self._seq >= seq:
                return True
