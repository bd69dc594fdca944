"""Validate and normalise one ingest payload (CONTRACT.md 2.1). Pure: no I/O, no clock.

Every payload becomes exactly one of: an Accepted entry, or a Refusal with the
reason code and a sentence naming the field. Nothing here raises.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import msgspec

from seedline_contracts.timeline import (
    KINDS,
    MAX_CONTENT_CHARS,
    MAX_ENGINE_CHARS,
    MAX_ENTRY_ID_CHARS,
    ORIGINS,
    RejectedInput,
    TimelineEntry,
    TimelineEntryIn,
)
from seedline_contracts.times import EARLIEST_AT, LATEST_AT_AHEAD, format_utc, parse_rfc3339
from seedline_contracts.tokens import has_control_characters, name_problem

TOKEN_FIELDS = ("instance_id", "repo", "session_id")
_decoder = msgspec.json.Decoder(TimelineEntryIn)


@dataclass(frozen=True)
class Accepted:
    entry: TimelineEntry


@dataclass(frozen=True)
class Refusal:
    reason_code: str  # not_json | invalid_entry | bad_token
    message: str


def _check_token(name: str, value: str) -> Refusal | None:
    problem = name_problem(value)
    return None if problem is None else Refusal("bad_token", f"{name} {problem}")


def _normalised_at(at: str | None, received_at: str) -> str | Refusal:
    """The entry's time in UTC, or why it cannot be used (CONTRACT.md 2.1 and 4.1)."""
    if at is None:
        return received_at
    try:
        moment = parse_rfc3339(at)
    except OverflowError:  # a time, but past the year 9999 once in UTC
        moment = None
    except ValueError:
        return Refusal("invalid_entry", f"at {at[:40]!r} is not an RFC 3339 time")
    latest = parse_rfc3339(received_at) + LATEST_AT_AHEAD
    if moment is None or not EARLIEST_AT <= moment <= latest:
        return Refusal(
            "invalid_entry",
            f"at {at[:40]!r} lies outside 2000-01-01T00:00:00Z to one day after it arrived",
        )
    return format_utc(moment)


def normalise(payload: bytes, received_at: str) -> Accepted | Refusal:
    """received_at is the writer's receive time, used when the entry has no `at`."""
    try:
        raw = _decoder.decode(payload)
    except msgspec.ValidationError as exc:
        return Refusal("invalid_entry", f"The entry is not valid: {exc}")
    except msgspec.DecodeError as exc:
        return Refusal("not_json", f"The payload is not JSON text ({exc}); publish a UTF-8 JSON object")
    except RecursionError:
        # msgspec recurses per nesting level, even through ignored extra fields.
        return Refusal("invalid_entry", "The entry nests too deeply to read; flatten its extra fields")

    entry_id = raw.entry_id
    if not 1 <= len(entry_id) <= MAX_ENTRY_ID_CHARS:
        return Refusal("invalid_entry", f"entry_id must be 1-{MAX_ENTRY_ID_CHARS} characters, not {len(entry_id)}")
    if any(c.isspace() for c in entry_id) or has_control_characters(entry_id):
        return Refusal("invalid_entry", "entry_id must not contain whitespace or control characters")
    for name in TOKEN_FIELDS:
        refusal = _check_token(name, getattr(raw, name))
        if refusal:
            return refusal
    if raw.kind not in KINDS:
        return Refusal("invalid_entry", f"kind {raw.kind[:40]!r} is not one of {', '.join(KINDS)}")
    if raw.engine is not None and not 1 <= len(raw.engine) <= MAX_ENGINE_CHARS:
        return Refusal("invalid_entry", f"engine must be 1-{MAX_ENGINE_CHARS} characters or null")
    if raw.engine is not None and has_control_characters(raw.engine):
        return Refusal("invalid_entry", "engine must not contain control characters")
    origin = "live" if raw.origin is None else raw.origin
    if origin not in ORIGINS:
        return Refusal(
            "invalid_entry", f"origin {origin[:40]!r} is not one of {', '.join(ORIGINS)}")
    at = _normalised_at(raw.at, received_at)
    if isinstance(at, Refusal):
        return at

    # Postgres text cannot hold NUL; it is the one character stored differently.
    content = raw.content.replace("\x00", "\ufffd")
    truncated_from = None
    if len(content) > MAX_CONTENT_CHARS:
        truncated_from = len(content)
        content = content[:MAX_CONTENT_CHARS]
    return Accepted(
        TimelineEntry(
            entry_id=entry_id,
            instance_id=raw.instance_id,
            repo=raw.repo,
            session_id=raw.session_id,
            kind=raw.kind,
            content=content,
            at=at,
            engine=raw.engine,
            truncated_from=truncated_from,
            origin=origin,
        )
    )


def rejected_record(
    refusal: Refusal, payload: bytes, received_at: str, ingest_seq: int | None
) -> RejectedInput:
    try:
        raw, encoding = payload.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        raw, encoding = base64.b64encode(payload).decode("ascii"), "base64"
    return RejectedInput(
        reason_code=refusal.reason_code,
        message=refusal.message,
        raw=raw,
        raw_encoding=encoding,
        received_at=received_at,
        ingest_seq=ingest_seq,
    )
