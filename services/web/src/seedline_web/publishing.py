"""Entries arriving over HTTP: checked at the edge, published for ingest, receipted.

The edge runs the contract's own validation (seedline_contracts.normalise), so what
the timeline-writer would reject is refused now, with the same reason; the writer
still validates everything it receives. Content is never refused for its length alone: the receipt says
when it will be cut, and to how many characters.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Sequence

import msgspec
from msgspec import Meta

from seedline_contracts.codec import encode
from seedline_contracts.normalise import Refusal, normalise
from seedline_contracts.timeline import MAX_CONTENT_CHARS, Kind, TimelineEntryIn
from seedline_contracts.times import EARLIEST_AT, LATEST_AT_AHEAD, now_text, parse_rfc3339

from . import fields
from .errors import WebError

MAX_BATCH = 1000


class EntryBody(msgspec.Struct, forbid_unknown_fields=False):
    """A timeline entry (CONTRACT.md 2.1); the instance comes from the token."""

    entry_id: fields.EntryId
    repo: fields.Repo
    session_id: fields.ConversationId
    kind: Annotated[Kind, Meta(description="What the entry is.")]
    content: fields.Content
    at: fields.MaybeAt = None
    engine: fields.MaybeEntryEngine = None
    instance_id: Annotated[fields.InstanceId | None, Meta(
        description="Optional; when given it must be the token's own instance.")] = None
    origin: Annotated[Literal["live", "import"] | None, Meta(
        description='"import" for history (CONTRACT.md 2.1): it is stored and read like any'
        ' other entry but never wakes a conversation or becomes a turn. Default "live".')] = None


class BatchBody(msgspec.Struct):
    """Up to 1,000 entries, published in order."""

    entries: Annotated[list[EntryBody], Meta(min_length=1, max_length=MAX_BATCH, description=(
        f"1 to {MAX_BATCH:,} entries; if any is refused, none is published."))]


class EntryReceipt(msgspec.Struct):
    entry_id: str
    accepted_for_ingest: bool
    ingest_seq: int
    duplicate: bool
    content_chars: int
    cut_to: int | None
    message: str


class PublishReply(msgspec.Struct):
    entries: list[EntryReceipt]
    ok: bool = True


class AppendReceipt(msgspec.Struct):
    """The synchronous append's reply (CONTRACT.md 2.1), with the cut said in words."""

    seq: int
    duplicate: bool
    content_chars: int
    cut_to: int | None
    message: str
    ok: bool = True


def to_entry(body: EntryBody, instance_id: str, index: int | None = None) -> TimelineEntryIn:
    """The contract's entry, or the writer's own refusal (invalid_entry or bad_token) now."""
    which = f"Entry {index}" if index is not None else "The entry"
    if body.instance_id is not None and body.instance_id != instance_id:
        raise WebError("not_permitted",
                       f"{which} names another instance; this token publishes only to its own.")
    entry = TimelineEntryIn(entry_id=body.entry_id, instance_id=instance_id, repo=body.repo,
                            session_id=body.session_id, kind=body.kind, content=body.content,
                            at=body.at, engine=body.engine, origin=body.origin)
    arrived = now_text()
    checked = normalise(encode(entry), arrived)
    if isinstance(checked, Refusal):
        raise WebError(checked.reason_code,
                       f"{which} was not accepted: {checked.message}; correct it and publish it "
                       "again.", status=409 if _outside_window(body.at, arrived) else None)
    return entry


def _outside_window(at: str | None, arrived: str) -> bool:
    """An `at` that is a time the document allows, but outside 2000-01-01T00:00:00Z to a
    day after it arrived (CONTRACT.md 4.1): the request is well formed, and whether it
    fits depends on when it arrives, so it is a 409, not a 400."""
    if at is None or re.search(fields.RFC3339, at) is None:
        return False
    try:
        moment = parse_rfc3339(at)
    except OverflowError:  # past the year 9999 once in UTC: far later than a day ahead
        return True
    except ValueError:
        return False
    return not EARLIEST_AT <= moment <= parse_rfc3339(arrived) + LATEST_AT_AHEAD


def check_payload(entries: Sequence[TimelineEntryIn], max_payload: int) -> None:
    """Each entry must fit in one NATS message; say so, naming the limit, when one does not."""
    for index, entry in enumerate(entries):
        size = len(encode(entry))
        if size > max_payload:
            which = f"Entry {index} ({entry.entry_id[:40]})" if len(entries) > 1 else "The entry"
            raise WebError(
                "payload_too_large",
                f"{which} is {size:,} bytes as JSON, over the NATS server's max_payload of "
                f"{max_payload:,} bytes; entries cannot be larger than that, so send less "
                "content.",
            )


def cut_note(content: str) -> tuple[int, int | None, str]:
    """(characters, what it will be cut to or None, the sentence saying so)."""
    chars = len(content)
    if chars <= MAX_CONTENT_CHARS:
        return chars, None, "Accepted for ingest."
    return chars, MAX_CONTENT_CHARS, (
        f"Accepted for ingest; its content of {chars:,} characters will be cut to its first "
        f"{MAX_CONTENT_CHARS:,}."
    )


def receipts(entries: Sequence[TimelineEntryIn], acks: Sequence[tuple[int, bool]]
             ) -> list[EntryReceipt]:
    out = []
    for entry, (seq, duplicate) in zip(entries, acks):
        chars, cut_to, message = cut_note(entry.content)
        if duplicate:
            message = ("Already received: an entry with this entry_id was published moments ago, "
                       "and the first one stands.")
        out.append(EntryReceipt(entry.entry_id, True, seq, duplicate, chars, cut_to, message))
    return out
