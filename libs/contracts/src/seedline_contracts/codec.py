"""JSON encoding shared by every service: one encoder, cached decoders."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    return _encoder.encode(value)


@lru_cache(maxsize=None)
def decoder(kind: type[T]) -> msgspec.json.Decoder[T]:
    return msgspec.json.Decoder(kind)


def decode(data: bytes, kind: type[T]) -> T:
    try:
        return decoder(kind).decode(data)
    except RecursionError:
        # msgspec recurses per nesting level, even through ignored fields; deep input
        # is invalid input (a ValidationError, itself a DecodeError), not a failure.
        raise msgspec.ValidationError("the JSON nests too deeply to read") from None
