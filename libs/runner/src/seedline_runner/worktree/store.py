"""The JetStream object store `seedline_worktrees`, from a machine's side: each object
sealed with the conversation's key before it leaves, opened after it arrives.

A put stores its chunks first and its name last (nats-py's object store), so a machine
killed while saving leaves the whole object or no object by that name.
"""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from nats.js.object_store import ObjectStore

from seedline_contracts import subjects
from seedline_contracts.sealed_objects import Unreadable, open_object, seal_object
from seedline_contracts.worktrees import SealKey


class SavedObjects:
    def __init__(self, js: JetStreamContext) -> None:
        self._js = js
        self._store: ObjectStore | None = None

    async def _bucket(self) -> ObjectStore:
        if self._store is None:
            self._store = await self._js.object_store(subjects.WORKTREES_BUCKET)
        return self._store

    async def put(self, name: str, key: SealKey, plain: bytes) -> int:
        """Store `plain` sealed; how many bytes the stored object holds."""
        sealed = seal_object(key, name, plain)
        await (await self._bucket()).put(name, sealed)
        return len(sealed)

    async def get(self, name: str, key: SealKey) -> bytes:
        """The object, opened; Unreadable when it is not there or does not open."""
        try:
            result = await (await self._bucket()).get(name)
        except NotFoundError:
            raise Unreadable(f"no saved object {name}") from None
        return open_object(key, name, result.data or b"")
