"""Timeline messages (CONTRACT.md section 2)."""

from __future__ import annotations

from typing import Literal

import msgspec

from . import subjects
from .channel import Api

KINDS: tuple[str, ...] = (
    "chat_user",
    "chat_assistant",
    "terminal",
    "command",
    "brain",
    "outcome",
    "system",
)
Kind = Literal["chat_user", "chat_assistant", "terminal", "command", "brain", "outcome", "system"]

MAX_CONTENT_CHARS = 100_000
MAX_ENTRY_ID_CHARS = 128
MAX_ENGINE_CHARS = 64
MAX_READ_LIMIT = 1000
DEFAULT_READ_LIMIT = 100
# 1.2: where an entry comes from. An imported entry is history only: it never wakes a
# conversation and is never delivered to an engine as a turn, whatever its `at`.
ORIGINS: tuple[str, ...] = ("live", "import")
Origin = Literal["live", "import"]


class TimelineEntryIn(msgspec.Struct):
    """What producers publish to seedline.ingest.timeline. Unknown fields are dropped."""

    entry_id: str
    instance_id: str
    repo: str
    session_id: str
    kind: str
    content: str
    at: str | None = None
    engine: str | None = None
    # "live" (the default, also when null) or "import".
    origin: str | None = None


class TimelineEntry(msgspec.Struct, omit_defaults=True):
    """The normalised entry stored on seedline.timeline.<instance>.<repo>.<session>.<kind>."""

    entry_id: str
    instance_id: str
    repo: str
    session_id: str
    kind: str
    content: str
    at: str
    engine: str | None
    truncated_from: int | None
    origin: str = "live"
    # Set when the writer left secrets out as it stored the entry (an operator's
    # setting): how many spans `content` shows as "[secret left out: <kind>]".
    redacted: int | None = None


RejectReason = Literal["not_json", "invalid_entry", "bad_token", "not_permitted", "poison"]


class RejectedInput(msgspec.Struct):
    """Input that could not be accepted, copied to seedline.rejected.timeline."""

    reason_code: str
    message: str
    raw: str
    raw_encoding: Literal["utf-8", "base64"]
    received_at: str
    ingest_seq: int | None


class AppendReply(msgspec.Struct):
    seq: int
    duplicate: bool
    ok: bool = True


class TimelineReadRequest(msgspec.Struct, forbid_unknown_fields=False):
    instance_id: str
    repo: str
    session_id: str | None = None
    before_seq: int | None = None
    limit: int = DEFAULT_READ_LIMIT
    min_seq: int | None = None


class TimelineRow(msgspec.Struct):
    seq: int
    entry_id: str
    session_id: str
    kind: str
    content: str
    at: str
    engine: str | None
    truncated_from: int | None


class TimelineReadReply(msgspec.Struct):
    entries: list[TimelineRow]
    has_more: bool
    ok: bool = True


# -- its channels (seedline_contracts.channels gathers them) ----------------------

TIMELINE_APPEND = Api(
    "timelineAppend", subjects.API_TIMELINE_APPEND, (TimelineEntryIn,),
    "Synchronous append: the same body as the ingest subject (2.1).",
    reply=AppendReply, title="append", not_json=True)

TIMELINE_READ = Api(
    "timelineRead", subjects.API_TIMELINE_READ, (TimelineReadRequest,),
    "Read a repo's or one conversation's entries, newest page first (2.3).",
    reply=TimelineReadReply, title="read")
