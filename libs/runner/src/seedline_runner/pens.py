"""The runner's pens: one per hosted conversation, holding every process its engine starts.

A conversation's pen is opened when its worker starts (the worker task inherits it,
and ``run_cli`` starts the engine's CLI into it) and ended when the conversation
ends: every process is killed and waited for, then the step the engine was on is
read back from its own transcript, so what it recorded but had not yet said on its
output (a tool call it was about to report) is published too. With a state folder,
the step each engine is on is also kept on disk, for a runner started again after
dying (``leftovers``). Starting, the runner ends what a previous run left and starts
a keeper that ends every pen the moment this runner dies.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import structlog
from seedline_contracts.timeline import TimelineEntryIn
from seedline_contracts.tokens import escape_token

from .containment import Containment, Keeper, Pen
from .containment.ledger import Ledger, StepNote, step_note
from .engines.base import Engine
from .leftovers import clean_up_previous_run, publish_recorded_step
from .live import LiveConversation

log = structlog.get_logger(__name__)


class Pens:
    def __init__(
        self,
        containment: Containment,
        state_dir: Path | None,
        engines: Mapping[str, Engine],
        publish: Callable[[TimelineEntryIn], Awaitable[None]],
        clock: Callable[[], str],
    ) -> None:
        self.containment = containment
        self._state_dir = state_dir
        self._ledger = Ledger(state_dir) if state_dir is not None else None
        self._lock: int | None = None
        self._engines = engines
        self._publish = publish
        self._clock = clock
        self._open: dict[str, Pen] = {}
        self._keeper: Keeper | None = None

    async def start(self) -> None:
        """End what a previous run left, publish its engines' tails, start the keeper.

        Refuses (RuntimeError) while another runner uses the same state folder: its
        engines are alive and not this run's to end."""
        if self._state_dir is not None:
            self._lock = _lock_folder(self._state_dir)
        log.info(
            "runner_containment",
            containment=self.containment.name,
            how=self.containment.describe(),
        )
        await clean_up_previous_run(
            self.containment, self._ledger, self._engines, self._publish, self._clock
        )
        try:
            self._keeper = Keeper(self.containment.keeper_args())
        except OSError as error:
            # Stops still end every pen; only a death of this runner would leave them
            # running, until its next start ends them.
            log.error("keeper_not_started", error=str(error))

    async def stop(self) -> None:
        """After every conversation has ended: close the keeper, tidy up."""
        if self._keeper is not None:
            await asyncio.to_thread(self._keeper.close)
            self._keeper = None
        self.containment.release()
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def open(self, live: LiveConversation) -> Pen:
        name = escape_token(live.session_id)
        ledger = self._ledger

        def on_step(step_id: str | None, prompt: str) -> None:
            if step_id is None:
                pen.note = None
                if ledger is not None:
                    ledger.discard(name)
                return
            request = live.request
            pen.note = note = step_note(
                session_id=request.session_id,
                instance_id=request.instance_id,
                repo=request.repo,
                engine=live.engine_name,
                step_id=step_id,
                prompt=prompt,
            )
            if ledger is None:
                return
            try:
                ledger.write(name, note)
            except OSError as error:
                log.warning("pen_note_not_written", session_id=live.session_id, error=str(error))

        pen = Pen(self.containment, name, on_step=on_step)
        self._open[live.session_id] = pen
        return pen

    async def end(self, session_id: str) -> None:
        """Kill every process the conversation's engine started and wait until none is left."""
        pen = self._open.pop(session_id, None)
        if pen is None:
            return
        killed = await self.containment.end(pen.name)
        if killed:
            log.info("conversation_processes_ended", session_id=session_id, processes=killed)
        if isinstance(pen.note, StepNote):
            await publish_recorded_step(
                self._engines.get(pen.note.engine), pen.note, self._publish, self._clock
            )
        if self._ledger is not None:
            self._ledger.discard(pen.name)


class NodeInUse(RuntimeError):
    """Another runner with the same node id holds this machine's state folder."""


def _lock_folder(state_dir: Path) -> int:
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / "runner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise NodeInUse(
            f"Another runner is using {state_dir} (the same node id on this machine); "
            "stop it first, or give this one another node id."
        ) from None
    return fd
