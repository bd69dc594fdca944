"""Ending a task for certain.

On Python 3.11 a cancel can be lost: `asyncio.wait_for` returns the result instead of
raising when the awaited reply arrives in the same instant as the cancel (CPython
gh-86296, fixed in 3.12). nats-py waits for every request that way, so a loop that was
cancelled during a NATS request may carry on, and whoever awaits it hangs.
"""

from __future__ import annotations

import asyncio

# How long a cancelled task may take before it is cancelled again.
NUDGE_SECONDS = 0.5


async def cancel_and_wait(task: asyncio.Task) -> None:
    """Cancel `task` and wait until it has ended, cancelling again while it runs on.
    What it raised is not re-raised: the caller asked it to stop."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=NUDGE_SECONDS)
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved
