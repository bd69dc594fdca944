"""Sealed objects: what a machine saves of a conversation (its working tree, its engine's
record), sealed at rest with a key of its instance (CONTRACT.md 6, Erasure).

A machine never reads an instance's key ring. Each conversation's objects are sealed with
a key derived from its instance's key (HKDF-SHA256 over the instance and the
conversation), which the platform hands the machine with the launch, as it hands it the
brief: forgetting the instance destroys the key every derived key comes from. An object
is AES-256-GCM with its name as associated data, so a sealed object stored under
another name does not open.
"""

from __future__ import annotations

import base64
import os
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .worktrees import SealKey

MAGIC = b"seedline-object:v1\n"
_NONCE = 12


class Unreadable(ValueError):
    """The object is not one this key opens (another key, another name, or damaged)."""


def derive_key(instance_key: bytes, version: int, instance_id: str, session_id: str) -> SealKey:
    """The key of one conversation's saved objects, from its instance's key version."""
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
               info=f"seedline-worktree\x00{instance_id}\x00{session_id}".encode()
               ).derive(instance_key)
    return SealKey(version=version, key=base64.b64encode(key).decode("ascii"))


def seal_object(key: SealKey, name: str, plain: bytes) -> bytes:
    nonce = os.urandom(_NONCE)
    sealed = AESGCM(base64.b64decode(key.key)).encrypt(nonce, plain, name.encode("utf-8"))
    return MAGIC + struct.pack(">I", key.version) + nonce + sealed


def sealed_version(blob: bytes) -> int:
    """The instance key version a sealed object was sealed under."""
    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 4 + _NONCE:
        raise Unreadable("not a sealed object")
    return struct.unpack(">I", blob[len(MAGIC):len(MAGIC) + 4])[0]


def open_object(key: SealKey, name: str, blob: bytes) -> bytes:
    if sealed_version(blob) != key.version:
        raise Unreadable("sealed under another version of the instance's key")
    body = blob[len(MAGIC) + 4:]
    try:
        return AESGCM(base64.b64decode(key.key)).decrypt(
            body[:_NONCE], body[_NONCE:], name.encode("utf-8"))
    except (InvalidTag, ValueError):
        raise Unreadable("the object does not open with this key") from None
