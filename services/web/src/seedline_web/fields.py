"""The constraints of every HTTP field, in one place: the msgspec types that decode a
request enforce them, and the OpenAPI document is generated from the same types, so
what the document promises and what the server refuses cannot drift apart.

Where a rule of the contract cannot be written in JSON Schema (a name's escaped form at
most 255 bytes; an entry's `at` no later than a day after it arrives, which depends on
when it arrives and is answered 409) the description says it, and the contract's own
check (seedline_contracts.normalise) still runs.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from seedline_contracts.timeline import MAX_CONTENT_CHARS, MAX_ENGINE_CHARS, MAX_ENTRY_ID_CHARS

# C0, DEL and C1 controls (seedline_contracts.tokens.has_control_characters).
_CONTROLS = "\\u0000-\\u001f\\u007f-\\u009f"
NO_CONTROL = f"^[^{_CONTROLS}]+$"
NO_SPACE_OR_CONTROL = f"^[^\\s{_CONTROLS}]+$"
# An RFC 3339 time from the year 2000 on (CONTRACT.md 4.1, time bounds), exactly as the server
# reads one (seedline_contracts.times.parse_rfc3339): a day the month has (29 February only in
# a leap year), hours to 23, seconds to 59, up to nine digits of a second, and an offset. The
# one bound a pattern cannot say, an entry's time no later than a day after it arrives, moves
# with the clock: the server answers it 409 (publishing.py), never 400.
_YEAR = "(?:2[0-9]{3}|[3-9][0-9]{3})"
_LEAP_YEAR = "(?:[2-9][0-9](?:0[48]|[2468][048]|[13579][26])|(?:[2468][048]|[3579][26])00)"
_DATE = (f"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
         "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
         f"|{_LEAP_YEAR}-02-29)")
RFC3339 = (f"^{_DATE}[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{{1,9}})?"
           "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$")
MAX_NAME_CHARS = 255
# Stream sequences and ids: far beyond any stream, and inside Postgres' bigint.
MAX_SEQ = 2**62


def name(what: str, example: str) -> Meta:
    return Meta(min_length=1, max_length=MAX_NAME_CHARS, pattern=NO_CONTROL, examples=[example],
                description=f"The {what}: no control characters, and at most 255 bytes once "
                "escaped as a subject token (each byte outside A-Z a-z 0-9 _ - counts three; "
                "CONTRACT.md, Conventions).")


Repo = Annotated[str, name("repo", "apps/chess-academy")]
ConversationId = Annotated[str, name("conversation's id (`session_id`)", "csess_21b8d1b9")]
NodeId = Annotated[str, name("machine's node id", "mac-mini-1")]
InstanceId = Annotated[str, name("instance; it must be the token's own", "bd43f4de")]
EntryId = Annotated[str, Meta(
    min_length=1, max_length=MAX_ENTRY_ID_CHARS, pattern=NO_SPACE_OR_CONTROL,
    description=f"Chosen by the producer, unique forever: 1-{MAX_ENTRY_ID_CHARS} characters, no "
    "whitespace or control characters. The same entry_id again is a duplicate and the first "
    "entry stands.")]
Content = Annotated[str, Meta(description=f"The entry's text. Over {MAX_CONTENT_CHARS:,} "
                              "characters it is kept cut to its first "
                              f"{MAX_CONTENT_CHARS:,}, and the receipt says so.")]
EntryEngine = Annotated[str, Meta(
    min_length=1, max_length=MAX_ENGINE_CHARS, pattern=NO_CONTROL,
    description=f"The engine that wrote it (claude, codex, ...): 1-{MAX_ENGINE_CHARS} "
    "characters, or null.")]
At = Annotated[str, Meta(
    pattern=RFC3339, extra_json_schema={"format": "date-time"},
    description="When it was written: an RFC 3339 time with any offset (stored in UTC), "
    "between 2000-01-01T00:00:00Z and one day after it arrives; the time it arrives when "
    "absent. A time outside that window is answered 409 (it depends on when the entry "
    "arrives); one that is no time at all, 400.")]
Engine = Annotated[str, Meta(min_length=1, max_length=MAX_ENGINE_CHARS, pattern=NO_CONTROL,
                             description="The engine to run, as the machine offers it: "
                             "claude, codex, scripted, ...")]
Instruction = Annotated[str, Meta(description="The person's message that starts the "
                                  "conversation: recorded in the timeline, left out of the "
                                  "brief, and given to the engine once as its first "
                                  "instruction.")]
RequestId = Annotated[str, Meta(min_length=1, max_length=MAX_ENTRY_ID_CHARS,
                                pattern=NO_CONTROL,
                                description="Optional, unique per instance, honoured for at "
                                "least 24 hours: the same request_id again gets the first "
                                "reply and opens nothing new, so a caller that timed out "
                                "retries safely.")]
Reason = Annotated[str, Meta(max_length=200, description="Why it is stopped, in a few words; "
                             "recorded with the stop.")]


def _described(kind) -> str:
    return kind.__metadata__[0].description


# Optional fields carry their description outside the null choice, where readers look.
MaybeAt = Annotated[At | None, Meta(description=_described(At))]
MaybeEntryEngine = Annotated[EntryEngine | None, Meta(description=_described(EntryEngine))]
MaybeInstruction = Annotated[Instruction | None, Meta(description=_described(Instruction))]
MaybeRequestId = Annotated[RequestId | None, Meta(description=_described(RequestId))]
