"""Content at rest, sealed with a key of its instance (CONTRACT.md Conventions, Erasure).

The streams are append-only, so an instance is forgotten by destroying its key
(crypto-shredding): entry content in SEEDLINE_TIMELINE and brief text in session events
are stored sealed (AES-256-GCM, the instance id as associated data, so a sealed text
moved to another instance does not open), and so are the projections that copy them.
This is the one module that seals and opens; adapters call it at their edges.

Keys live in the NATS KV bucket ``seedline_keys``, one value per instance holding every
key version (a rotation adds one; older versions still open what they sealed). NATS,
not Postgres: Postgres holds projections that are dropped and rebuilt from the streams,
and a rebuild needs the keys; the bucket is reachable only with the JetStream API, which
service users have and runner and web users do not (seedline_devtools.nats_auth); and
forgetting purges the key's every revision from the bucket's stream (a KV purge rolls
up the subject), where a deleted Postgres row would linger in its WAL and backups.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from seedline_contracts.sealed_objects import derive_key
from seedline_contracts.tokens import escape_token, unescape_token
from seedline_contracts.worktrees import SealKey

from .sending import check_send

KEYS_BUCKET = "seedline_keys"
# A sealed text: PREFIX, the instance's key name, the key version, base64 of nonce and
# ciphertext with its tag.
PREFIX = "seedline-sealed:v1:"
_NONCE_BYTES = 12
# How long a key ring read from the bucket is used before it is read again: a rotation
# made elsewhere is taken up within this; a forget in this process at once.
CACHE_SECONDS = 30.0


class Forgotten(Exception):
    """The instance's key was destroyed: what it sealed can no longer be read."""


@dataclass(frozen=True)
class KeyRing:
    current: int
    keys: dict[int, bytes]

    def encode(self) -> bytes:
        return json.dumps({
            "current": self.current,
            "keys": {str(v): base64.b64encode(k).decode() for v, k in sorted(self.keys.items())},
        }).encode()

    @classmethod
    def decode(cls, data: bytes) -> KeyRing:
        body = json.loads(data)
        keys = {int(v): base64.b64decode(k) for v, k in body["keys"].items()}
        return cls(int(body["current"]), keys)

    def rotated(self) -> KeyRing:
        version = max(self.keys) + 1
        return KeyRing(version, {**self.keys, version: AESGCM.generate_key(256)})


def new_ring() -> KeyRing:
    return KeyRing(1, {1: AESGCM.generate_key(256)})


def key_name(instance_id: str) -> str:
    """KV keys cannot hold `~`: the escaped token with `=` for it, as presence keys."""
    return escape_token(instance_id).replace("~", "=")


def sealed_instance(text: str) -> str | None:
    """The instance a sealed text names (its key's), or None for text never sealed."""
    if not text.startswith(PREFIX):
        return None
    return unescape_token(text[len(PREFIX):].split(":", 1)[0].replace("=", "~"))


class KeyStore(Protocol):
    async def ring(self, instance_id: str, create: bool) -> KeyRing | None:
        """The instance's key ring; made first when `create` and there is none."""
        ...

    async def rotate(self, instance_id: str) -> int:
        """Add a key version that seals from now on; returns it."""
        ...

    async def destroy(self, instance_id: str) -> None:
        """Destroy every version of the instance's key, for ever."""
        ...


class InMemoryKeyStore:
    def __init__(self) -> None:
        self.rings: dict[str, KeyRing] = {}

    async def ring(self, instance_id: str, create: bool) -> KeyRing | None:
        if instance_id not in self.rings and create:
            self.rings[instance_id] = new_ring()
        return self.rings.get(instance_id)

    async def rotate(self, instance_id: str) -> int:
        ring = (await self.ring(instance_id, True)).rotated()  # type: ignore[union-attr]
        self.rings[instance_id] = ring
        return ring.current

    async def destroy(self, instance_id: str) -> None:
        self.rings.pop(instance_id, None)


class KvKeyStore:
    """Key rings in the ``seedline_keys`` bucket; two writers making one ring agree (the
    create is atomic and the loser reads the winner's)."""

    def __init__(self, js, replicas: int = 1) -> None:
        self._js = js
        self._replicas = replicas
        self._kv = None

    async def _bucket(self):
        if self._kv is None:
            from nats.js import api as js_api

            try:
                self._kv = await self._js.key_value(KEYS_BUCKET)
            except Exception:
                self._kv = await self._js.create_key_value(js_api.KeyValueConfig(
                    bucket=KEYS_BUCKET, history=1, storage=js_api.StorageType.FILE,
                    replicas=self._replicas,
                ))
        return self._kv

    async def _get(self, instance_id: str):
        from nats.js.errors import KeyNotFoundError

        kv = await self._bucket()
        try:
            entry = await kv.get(key_name(instance_id))
        except KeyNotFoundError:  # never made, deleted or purged
            return None
        return entry if entry.value else None

    async def ring(self, instance_id: str, create: bool) -> KeyRing | None:
        entry = await self._get(instance_id)
        if entry is not None:
            return KeyRing.decode(entry.value)
        if not create:
            return None
        ring = new_ring()
        check_send(f"$KV.{KEYS_BUCKET}.{key_name(instance_id)}")
        try:
            await (await self._bucket()).create(key_name(instance_id), ring.encode())
            return ring
        except Exception:  # another writer made it first: use theirs
            entry = await self._get(instance_id)
            if entry is None:
                raise
            return KeyRing.decode(entry.value)

    async def rotate(self, instance_id: str) -> int:
        entry = await self._get(instance_id)
        if entry is None:
            ring = await self.ring(instance_id, True)
            assert ring is not None
            return ring.current
        ring = KeyRing.decode(entry.value).rotated()
        check_send(f"$KV.{KEYS_BUCKET}.{key_name(instance_id)}")
        bucket = await self._bucket()
        await bucket.update(key_name(instance_id), ring.encode(), last=entry.revision)
        return ring.current

    async def destroy(self, instance_id: str) -> None:
        # A purge rolls up the key's subject: every earlier revision leaves the stream.
        check_send(f"$KV.{KEYS_BUCKET}.{key_name(instance_id)}")
        await (await self._bucket()).purge(key_name(instance_id))


class Sealer:
    """Seals and opens text of one instance with its current key; caches key rings."""

    def __init__(self, keys: KeyStore, enabled: bool = True) -> None:
        self._keys = keys
        self.enabled = enabled
        self._rings: dict[str, tuple[float, KeyRing]] = {}

    async def _ring(self, instance_id: str, create: bool) -> KeyRing | None:
        cached = self._rings.get(instance_id)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1]
        ring = await self._keys.ring(instance_id, create)
        if ring is not None:
            self._rings[instance_id] = (time.monotonic(), ring)
        return ring

    def forget(self, instance_id: str) -> None:
        self._rings.pop(instance_id, None)

    async def object_key(self, instance_id: str, session_id: str,
                         version: int | None = None) -> SealKey | None:
        """The key of one conversation's saved objects (seedline_contracts.sealed_objects),
        from the instance key's `version` (default: the current one, made when there is
        none yet); None when that version is gone (the instance was forgotten). Objects are
        sealed whatever `enabled` says: a machine's checkout is never stored in the clear."""
        ring = await self._ring(instance_id, create=version is None)
        if ring is None:
            return None
        version = ring.current if version is None else version
        if version not in ring.keys:
            self.forget(instance_id)  # a rotation elsewhere: read the ring again
            ring = await self._ring(instance_id, create=False)
            if ring is None or version not in ring.keys:
                return None
        return derive_key(ring.keys[version], version, instance_id, session_id)

    async def seal(self, instance_id: str, text: str) -> str:
        if not self.enabled:
            return text
        ring = await self._ring(instance_id, create=True)
        assert ring is not None
        return seal_with(ring, instance_id, text)

    async def open(self, instance_id: str | None, text: str) -> str:
        """The plain text; text that was never sealed is returned as it is. A sealed text
        names its instance; given one, it must be that (and the key checks it too).
        Raises Forgotten when the instance's key was destroyed."""
        named = sealed_instance(text)
        if named is None:
            return text
        if instance_id is not None and named != instance_id:
            raise ValueError("sealed text of another instance")
        instance_id = named
        ring = await self._ring(instance_id, create=False)
        if ring is None:
            raise Forgotten(instance_id)
        try:
            return open_with(ring, instance_id, text)
        except KeyError:
            # Sealed with a version made after this ring was read (a rotation elsewhere).
            self.forget(instance_id)
            ring = await self._ring(instance_id, create=False)
            if ring is None:
                raise Forgotten(instance_id) from None
            return open_with(ring, instance_id, text)

    async def open_or_none(self, instance_id: str | None, text: str) -> str | None:
        try:
            return await self.open(instance_id, text)
        except Forgotten:
            return None


def unsealed() -> Sealer:
    """A sealer that seals nothing (tests and tools that keep text in the clear)."""
    return Sealer(InMemoryKeyStore(), enabled=False)


def sealer_for(js, settings) -> Sealer:
    """A service's sealer over the key bucket, as its settings say."""
    return Sealer(KvKeyStore(js, settings.stream_replicas), settings.seal_at_rest)


def seal_with(ring: KeyRing, instance_id: str, text: str) -> str:
    nonce = os.urandom(_NONCE_BYTES)
    sealed = AESGCM(ring.keys[ring.current]).encrypt(
        nonce, text.encode("utf-8", "surrogatepass"), instance_id.encode("utf-8")
    )
    body = base64.b64encode(nonce + sealed).decode("ascii")
    return f"{PREFIX}{key_name(instance_id)}:{ring.current}:{body}"


def open_with(ring: KeyRing, instance_id: str, text: str) -> str:
    _, version, body = text[len(PREFIX):].split(":", 2)
    raw = base64.b64decode(body)
    try:
        plain = AESGCM(ring.keys[int(version)]).decrypt(
            raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], instance_id.encode("utf-8")
        )
    except InvalidTag:
        raise ValueError("sealed text does not open with its instance's key") from None
    return plain.decode("utf-8", "surrogatepass")
