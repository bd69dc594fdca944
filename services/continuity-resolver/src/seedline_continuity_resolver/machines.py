"""What the decision needs to know about a machine: whether it is online (a relocation to
a machine that is not stops nothing), and the engines it runs that keep no conversation of
their own (presence `stateless_engines`, CONTRACT.md 6)."""

from __future__ import annotations

from typing import Protocol

from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, KeyDeletedError, KeyNotFoundError

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.runner import RunnerPresence


class MachineDirectory(Protocol):
    async def presence(self, node_id: str) -> RunnerPresence | None:
        """The machine's presence when it is online, else None."""
        ...


async def stateless_engines(machines: MachineDirectory, node_id: str) -> frozenset[str]:
    presence = await machines.presence(node_id)
    return frozenset(presence.stateless_engines) if presence is not None else frozenset()


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
