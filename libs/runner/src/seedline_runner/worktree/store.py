"""The JetStream object store `seedline_worktrees`, from a machine's side: each object
sealed with the conversation's key before it leaves, opened after it arrives.

A put stores its chunks first and its name last (nats-py's object store), so a machine
killed while saving leaves the whole object or no object by that name.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
from datetime import datetime, timezone

from nats.js import JetStreamContext
from nats.js import api as js_api
from nats.js.errors import NotFoundError
from nats.js.object_store import ObjectStore

from seedline_contracts import subjects
from seedline_contracts.sealed_objects import Unreadable, open_object, seal_object
from seedline_contracts.worktrees import SealKey


CHUNK = 128 * 1024  # nats-py's object store's own chunk size
FETCH = 64  # chunks a fetch asks for


class SavedObjects:
    def __init__(self, js: JetStreamContext) -> None:
        self._js = js
        self._store: ObjectStore | None = None

    async def _bucket(self) -> ObjectStore:
        if self._store is None:
            self._store = await self._js.object_store(subjects.WORKTREES_BUCKET)
        return self._store

    async def put(self, name: str, key: SealKey, plain: bytes) -> int:
        """Store `plain` sealed; how many bytes the stored object holds.

        The chunks go out with their acks pending together, then the object's name (its
        meta message, as nats-py's object store writes it): under sync_interval: always an
        awaited publish per chunk is an fsync round trip each."""
        sealed = seal_object(key, name, plain)
        await self._bucket()
        nuid = self._js._nc._nuid.next().decode()  # noqa: SLF001 - nats-py's own id source
        chunks = f"$O.{subjects.WORKTREES_BUCKET}.C.{nuid}"
        pending = [await self._js.publish_async(chunks, sealed[at:at + CHUNK])
                   for at in range(0, len(sealed), CHUNK)]
        await asyncio.gather(*pending)
        info = js_api.ObjectInfo(
            name=name, bucket=subjects.WORKTREES_BUCKET, nuid=nuid, size=len(sealed),
            chunks=len(pending), mtime=datetime.now(timezone.utc).isoformat(),
            digest="SHA-256=" + base64.urlsafe_b64encode(
                hashlib.sha256(sealed).digest()).decode(),
            options=js_api.ObjectMetaOptions(max_chunk_size=CHUNK))
        meta = f"$O.{subjects.WORKTREES_BUCKET}.M." + base64.urlsafe_b64encode(
            name.encode()).decode()
        await self._js.publish(meta, json.dumps(info.as_dict()).encode(),
                               headers={"Nats-Rollup": "sub"})
        return len(sealed)

    async def get(self, name: str, key: SealKey) -> bytes:
        """The object, opened; Unreadable when it is not there or does not open.

        Its chunks are fetched in batches from an ephemeral pull consumer, not through
        nats-py's `get` (an ordered push consumer, a chunk at a time): 0.08 s instead of
        0.85 s for a 24 MB object here."""
        try:
            info = await (await self._bucket()).get_info(name)
        except NotFoundError:
            raise Unreadable(f"no saved object {name}") from None
        stream = f"OBJ_{subjects.WORKTREES_BUCKET}"
        reader = await self._js.pull_subscribe(
            f"$O.{subjects.WORKTREES_BUCKET}.C.{info.nuid}", stream=stream,
            config=js_api.ConsumerConfig(ack_policy=js_api.AckPolicy.NONE, mem_storage=True,
                                         inactive_threshold=30.0, max_ack_pending=-1))
        buffer, digest, got = io.BytesIO(), hashlib.sha256(), 0
        try:
            while got < (info.chunks or 0):
                for msg in await reader.fetch(min(FETCH, info.chunks - got), timeout=10):
                    buffer.write(msg.data)
                    digest.update(msg.data)
                    got += 1
        finally:
            await reader.unsubscribe()
        said = (info.digest or "").split("=", 1)[-1]
        if base64.urlsafe_b64encode(digest.digest()).decode() != said:
            raise Unreadable(f"saved object {name} is not whole")
        return open_object(key, name, buffer.getvalue())
