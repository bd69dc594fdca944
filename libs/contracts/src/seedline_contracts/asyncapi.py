"""The AsyncAPI 3.0 document of the whole wire contract, built from this library.

Channels carry the subjects of ``subjects`` (tokens made from user data are
parameters), messages point at the JSON Schemas of ``schema`` (inline under
``components.schemas``, and by file name under ``x-json-schema``), and operations
are seen from the platform: ``receive`` is what Seedline consumes or answers,
``send`` what it publishes or asks a runner. ``published_files()`` is the exact
text committed under docs/; ``seedline docs --out docs`` writes it.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from . import CONTRACT_VERSION, channels, events
from .schema import PUBLIC_MESSAGES, json_schemas
from .timeline import KINDS

VERSION = CONTRACT_VERSION
CONTENT_TYPE = "application/json"
SCHEMA_DIR = "schema"

_TOKEN = (
    "An escaped subject token: every byte of the UTF-8 form outside [A-Za-z0-9_-] is "
    "written as ~ and two upper-case hex digits; never empty, at most 255 bytes."
)
PARAMETERS: dict[str, dict[str, Any]] = {
    "instance": {"description": f"Instance id. {_TOKEN}", "examples": ["bd43f4de"]},
    "repo": {"description": f"Repository. {_TOKEN}", "examples": ["apps~2Fchess-academy"]},
    "session": {
        "description": f"Conversation id (session_id). {_TOKEN}",
        "examples": ["csess_21b8d1b9"],
    },
    "node": {"description": f"Runner machine id (node_id). {_TOKEN}", "examples": ["mac-mini-1"]},
    "partition": {"description": "An ingest partition, 0 to SEEDLINE_INGEST_PARTITIONS - 1.",
                  "examples": ["0"]},
    "kind": {"description": "Entry kind.", "enum": list(KINDS)},
    "type": {
        "description": "Event type.",
        "enum": [e.__struct_config__.tag for e in events.EVENT_TYPES],
    },
    "presence_key": {
        "description": "subjects.presence_key(node_id): the escaped node id with = instead of ~ "
        "(KV keys allow no ~).",
        "examples": ["mac-mini-1"],
    },
}


def _channel(address: str | None, messages: list[str], description: str) -> dict[str, Any]:
    channel: dict[str, Any] = {"address": address, "description": description}
    names = [p[1:-1] for p in (address or "").split(".") if p.startswith("{")]
    if names:
        channel["parameters"] = {name: PARAMETERS[name] for name in names}
    channel["messages"] = {m: {"$ref": f"#/components/messages/{m}"} for m in messages}
    return channel


def _names(kinds) -> list[str]:
    return [kind.__name__ for kind in kinds]


def replies_of(channel: channels.Channel) -> list[str]:
    """What a request channel is answered with (none for a channel that is not one)."""
    return _names(getattr(channel, "replies", ()))


HEADERS = {
    "TimelineEntryIn": {
        "type": "object",
        "properties": {
            "Nats-Msg-Id": {
                "type": "string",
                "description": "Optional JetStream dedupe id; when present, equal to entry_id.",
            }
        },
    }
}


def _summary(kind: type) -> str | None:
    doc = (kind.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else None


def _messages() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kind in PUBLIC_MESSAGES.items():
        message: dict[str, Any] = {"name": name, "title": name, "contentType": CONTENT_TYPE}
        if summary := _summary(kind):
            message["summary"] = summary
        if name in HEADERS:
            message["headers"] = HEADERS[name]
        message["payload"] = {"$ref": f"#/components/schemas/{name}"}
        message["x-json-schema"] = f"{SCHEMA_DIR}/{name}.json"
        out[name] = message
    return out


def _schemas() -> dict[str, Any]:
    kinds = [PUBLIC_MESSAGES[name] for name in sorted(PUBLIC_MESSAGES)]
    _, components = msgspec.json.schema_components(
        kinds, ref_template="#/components/schemas/{name}"
    )
    return dict(sorted(components.items()))


def asyncapi_document() -> dict[str, Any]:
    """The contract's channels and messages. Operations, who receives and who sends what,
    come from the services' routing tables (seedline_devtools.asyncapi_doc)."""
    document_channels: dict[str, Any] = {}
    for channel in channels.CHANNELS:
        if channel.internal:
            continue
        document_channels[channel.id] = _channel(channel.address, _names(channel.messages),
                                                 channel.description)
        if replies := replies_of(channel):
            document_channels[channel.id + "Reply"] = _channel(
                None, replies,
                "The requester's NATS reply subject (an inbox), so it has no fixed address.")
    operations: dict[str, Any] = {}
    return {
        "asyncapi": "3.0.0",
        "id": "urn:seedline:wire-contract",
        "info": {
            "title": "Seedline wire contract",
            "version": VERSION,
            "description": (
                "Everything other systems publish, what they can ask, and what a runner machine "
                "must speak: JSON (UTF-8) over NATS. Operations are seen from the platform: "
                "receive = Seedline consumes or answers it, send = Seedline publishes it or asks "
                "a runner. Every error reply is ErrorReply. Generated from the seedline-contracts "
                "library (`seedline docs --out docs`); CONTRACT.md is the prose."
            ),
        },
        "defaultContentType": CONTENT_TYPE,
        "servers": {
            "local": {
                "host": "127.0.0.1:4222",
                "protocol": "nats",
                "description": "`seedline up` or `docker compose up`; SEEDLINE_NATS_URL elsewhere.",
            }
        },
        "channels": document_channels,
        "operations": operations,
        "components": {"messages": _messages(), "schemas": _schemas()},
    }


def render(document: Any) -> str:
    """The committed form of a JSON document: two-space indent, UTF-8, final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def published_files() -> dict[str, str]:
    """Path under docs/ -> exact text: asyncapi.json and one schema/NAME.json per message."""
    files = {"asyncapi.json": render(asyncapi_document())}
    for name, document in json_schemas().items():
        files[f"{SCHEMA_DIR}/{name}.json"] = render(document)
    return files
