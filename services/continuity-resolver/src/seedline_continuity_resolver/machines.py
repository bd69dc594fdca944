"""What the decision needs to know about a machine: whether it is online (a relocation to
a machine that is not stops nothing), and the engines it runs that keep no conversation of
their own (presence `stateless_engines`, CONTRACT.md 6)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, KeyDeletedError, KeyNotFoundError

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.runner import RunnerPresence
from seedline_platform.bounded import trim_oldest

# A machine's engines change only when its runner starts again: what a read of its presence
# said of them is used for this long, so a burst of wakes on one machine reads it once, not
# once a decision.
ENGINES_KEPT_SECONDS = 5.0
ENGINES_KEPT_MACHINES = 10_000


class MachineDirectory(Protocol):
    async def presence(self, node_id: str) -> RunnerPresence | None:
        """The machine's presence when it is online, else None."""
        ...


class StatelessEngines:
    """The engines a machine runs that keep no conversation of their own, read from its
    presence at most once per ENGINES_KEPT_SECONDS. A machine found offline is not kept: the
    next decision reads it again, so one that comes back is seen as it is at once."""

    def __init__(self, machines: MachineDirectory,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._machines = machines
        self._clock = clock
        self._kept: dict[str, tuple[float, frozenset[str]]] = {}

    async def of(self, node_id: str) -> frozenset[str]:
        kept = self._kept.get(node_id)
        if kept is not None and self._clock() - kept[0] < ENGINES_KEPT_SECONDS:
            return kept[1]
        presence = await self._machines.presence(node_id)
        if presence is None:
            return frozenset()
        engines = frozenset(presence.stateless_engines)
        self._kept.pop(node_id, None)  # kept anew as the newest, the last to be trimmed
        self._kept[node_id] = (self._clock(), engines)
        trim_oldest(self._kept, ENGINES_KEPT_MACHINES)
        return engines


class PresenceDirectory:
    def __init__(self, js: JetStreamContext) -> None:
        self._js = js
        self._kv = None

    async def presence(self, node_id: str) -> RunnerPresence | None:
        try:
            if self._kv is None:
                self._kv = await self._js.key_value(subjects.RUNNERS_BUCKET)
            entry = await self._kv.get(subjects.presence_key(node_id))
        except (BucketNotFoundError, KeyNotFoundError, KeyDeletedError):
            return None
        try:
            return decode(entry.value or b"", RunnerPresence)
        except Exception:
            return None


class StaticDirectory:
    """For unit tests: the machines online, with their stateless engines, given up front
    (None: every machine is online and keeps its conversations)."""

    def __init__(self, stateless: dict[str, set[str]] | None = None,
                 online: set[str] | None = None) -> None:
        self._stateless = stateless or {}
        self._online = online

    async def presence(self, node_id: str) -> RunnerPresence | None:
        if self._online is not None and node_id not in self._online:
            return None
        return RunnerPresence(node_id=node_id, label=node_id, engines=[],
                              stateless_engines=sorted(self._stateless.get(node_id, ())))
