"""What the decision needs to know about a machine: the engines it runs that keep no
conversation of their own (presence `stateless_engines`, CONTRACT.md 6)."""

from __future__ import annotations

from typing import Protocol

from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, KeyDeletedError, KeyNotFoundError

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.runner import RunnerPresence


class MachineDirectory(Protocol):
    async def stateless_engines(self, node_id: str) -> frozenset[str]: ...


class PresenceDirectory:
    def __init__(self, js: JetStreamContext) -> None:
        self._js = js
        self._kv = None

    async def stateless_engines(self, node_id: str) -> frozenset[str]:
        try:
            if self._kv is None:
                self._kv = await self._js.key_value(subjects.RUNNERS_BUCKET)
            entry = await self._kv.get(subjects.presence_key(node_id))
        except (BucketNotFoundError, KeyNotFoundError, KeyDeletedError):
            return frozenset()
        try:
            return frozenset(decode(entry.value or b"", RunnerPresence).stateless_engines)
        except Exception:
            return frozenset()


class StaticDirectory:
    """For unit tests: machines and their stateless engines given up front."""

    def __init__(self, stateless: dict[str, set[str]] | None = None) -> None:
        self._stateless = stateless or {}

    async def stateless_engines(self, node_id: str) -> frozenset[str]:
        return frozenset(self._stateless.get(node_id, ()))
