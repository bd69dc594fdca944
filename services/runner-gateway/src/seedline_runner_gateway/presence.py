"""Which machines are online, seen on a watch of the seedline_runners bucket (CONTRACT.md 4.1,
seedline_platform.replay.BucketWatch).

A machine is offline only when its key is deleted (a clean stop, seen on the watch)
or when two direct reads 10 s apart both find no key (it expired: the bucket's TTL
removes keys without a watch event). A key listing is never used: an empty or
racing listing once read as "every machine is offline".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from nats.js import JetStreamContext
from nats.js.errors import KeyDeletedError, KeyNotFoundError

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.runner import RunnerPresence
from seedline_core.presence import Absence
from seedline_platform.logging import get_logger
from seedline_platform.replay import BucketWatch

from .state import GatewayState

log = get_logger(__name__)

# A key not refreshed for this long may have expired: read it directly.
STALE_AFTER_SECONDS = subjects.RUNNERS_TTL_SECONDS + 2
SWEEP_SECONDS = 2.0
# Machines the state says hold conversations, unseen on the watch since this copy started
# (their keys expired meanwhile): read from the state this often, not at every sweep.
HOSTING_READ_SECONDS = 10.0


@dataclass(frozen=True)
class Sighting:
    presence: RunnerPresence
    revision: int
    seen_at: float


class MachineWatcher(Protocol):
    """What presence tells the rest of the gateway."""

    async def seen(self, node_id: str, sighting: Sighting) -> None: ...

    async def gone(self, node_id: str) -> None: ...


class PresenceView(Protocol):
    async def get(self, node_id: str) -> Sighting | None:
        """The machine's presence when it is online, else None."""
        ...

    async def latest_revision(self, node_id: str) -> int:
        """The machine's newest presence revision, puts the watch has not delivered yet
        included (0 when none)."""
        ...

    def known(self) -> list[str]:
        """Every machine seen online (`get` says whether it still is)."""
        ...


class KvPresence:
    def __init__(
        self, js: JetStreamContext, state: GatewayState, watcher: MachineWatcher,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._js = js
        self._state = state
        self._watcher = watcher
        self._clock = clock
        self._kv = None
        self._online: dict[str, Sighting] = {}
        self._absent: dict[str, Absence] = {}
        self._hosting: set[str] = set()
        self._hosting_read_at: float | None = None
        self._updates = None

    async def _bucket(self):
        if self._kv is None:
            self._kv = await self._js.key_value(subjects.RUNNERS_BUCKET)
        return self._kv

    async def latest_revision(self, node_id: str) -> int:
        # Read from the bucket: the watch may lag behind puts the machine made before it
        # took a launch, and those must not count as leaving the launch out (reconcile.py).
        seen = self._online.get(node_id)
        try:
            entry = await (await self._bucket()).get(subjects.presence_key(node_id))
            stored = int(entry.revision or 0)
        except Exception:  # deleted, or the read failed: what the watch saw is all there is
            stored = 0
        return max(stored, seen.revision if seen else 0)

    def known(self) -> list[str]:
        return sorted(self._online)

    async def get(self, node_id: str) -> Sighting | None:
        sighting = self._online.get(node_id)
        if sighting is not None and self._clock() - sighting.seen_at <= STALE_AFTER_SECONDS:
            return sighting
        return await self._read(node_id)

    async def _read(self, node_id: str) -> Sighting | None:
        """A direct read of the key (raises when the read itself failed)."""
        kv = await self._bucket()
        try:
            entry = await kv.get(subjects.presence_key(node_id))
        except (KeyNotFoundError, KeyDeletedError):
            return None
        sighting = self._sighting(entry.value or b"", int(entry.revision or 0))
        if sighting is not None:
            self._online[node_id] = sighting
        return sighting

    def _sighting(self, value: bytes, revision: int) -> Sighting | None:
        try:
            presence = decode(value, RunnerPresence)
        except Exception:
            return None
        return Sighting(presence, revision, self._clock())

    async def start(self) -> None:
        """Subscribe before the service is ready, so no put or delete after it is missed."""
        await self._bucket()
        self._updates = BucketWatch(self._js, subjects.RUNNERS_BUCKET)
        await self._updates.start()

    async def watch(self) -> None:
        while True:
            try:
                if self._updates is None:
                    await self.start()
                await self._follow(self._updates)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("presence_watch_restarting", error=str(exc) or type(exc).__name__)
                if self._updates is not None:
                    await self._updates.stop()
                self._updates = None
                await asyncio.sleep(1.0)

    async def _follow(self, updates: BucketWatch) -> None:
        async for change in updates.changes():
            try:
                node_id = subjects.node_from_presence_key(change.key)
            except Exception:
                continue
            if change.operation in ("DEL", "PURGE"):
                await self._gone(node_id)
                continue
            sighting = self._sighting(change.value, change.revision)
            if sighting is None:
                continue
            previous = self._online.get(node_id)
            self._online[node_id] = sighting
            self._absent.pop(node_id, None)
            if previous is None or previous.presence.label != sighting.presence.label:
                await self._state.record_machine(node_id, sighting.presence.label)
            await self._watcher.seen(node_id, sighting)

    async def _gone(self, node_id: str) -> None:
        self._online.pop(node_id, None)
        self._absent.pop(node_id, None)
        self._hosting.discard(node_id)  # what it held is stopped as it goes
        log.info("machine_offline", node_id=node_id)
        await self._watcher.gone(node_id)

    async def sweep(self) -> None:
        """Find keys that expired: machines not heard from, and those hosting conversations."""
        now = self._clock()
        if self._hosting_read_at is None or now - self._hosting_read_at >= HOSTING_READ_SECONDS:
            self._hosting, self._hosting_read_at = await self._state.hosting_nodes(), now
        hosting = self._hosting
        candidates = {n for n, s in self._online.items() if now - s.seen_at > STALE_AFTER_SECONDS}
        candidates |= hosting - self._online.keys()
        for node_id in candidates:
            try:
                present = await self._read(node_id)
            except Exception as exc:
                log.warning("presence_read_failed", node_id=node_id, error=str(exc))
                continue  # a failed read is never proof
            if present is not None:
                self._absent.pop(node_id, None)
                continue
            absence = self._absent.setdefault(node_id, Absence(now))
            if absence.confirmed(now):
                await self._gone(node_id)

    async def run_sweeps(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await self.sweep()
            except Exception:
                log.exception("presence_sweep_failed")
