"""Which machines are online: a live key in the seedline_runners bucket."""

from __future__ import annotations

from nats.js import JetStreamContext

from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.runner import RunnerPresence
from seedline_platform.clock import utc_now

from .state import GatewayState


class Presence:
    def __init__(self, js: JetStreamContext, state: GatewayState) -> None:
        self._js = js
        self._state = state
        self._kv = None

    async def _bucket(self):
        if self._kv is None:
            self._kv = await self._js.key_value(subjects.RUNNERS_BUCKET)
        return self._kv

    async def get(self, node_id: str) -> RunnerPresence | None:
        """The machine's presence, or None when it is offline (no live key)."""
        kv = await self._bucket()
        try:
            entry = await kv.get(subjects.presence_key(node_id))
        except Exception as exc:
            if type(exc).__name__ in ("KeyNotFoundError", "KeyDeletedError", "NotFoundError"):
                return None
            raise
        if not entry.value:
            return None
        try:
            presence = decode(entry.value, RunnerPresence)
        except Exception:
            return None
        await self._state.record_machine(node_id, presence.label, utc_now())
        return presence

    async def watch(self) -> None:
        """Record every machine's label as it announces itself, so an offline
        machine can be named by its label later (CONTRACT.md 3, runner_offline)."""
        kv = await self._bucket()
        watcher = await kv.watchall(ignore_deletes=True)
        async for entry in watcher:
            if entry is None or not entry.value:
                continue
            try:
                presence = decode(entry.value, RunnerPresence)
                node_id = subjects.node_from_presence_key(entry.key)
            except Exception:
                continue
            await self._state.record_machine(node_id, presence.label, utc_now())

    async def online_nodes(self) -> set[str]:
        kv = await self._bucket()
        try:
            keys = await kv.keys()
        except Exception as exc:
            if type(exc).__name__ == "NoKeysError":
                return set()
            raise
        return {subjects.node_from_presence_key(k) for k in keys}
