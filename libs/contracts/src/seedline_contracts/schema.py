"""JSON Schema for every public message, generated from the types themselves."""

from __future__ import annotations

from typing import Any

import msgspec

from .channels import CHANNELS


def _public_messages() -> dict[str, type]:
    """Every message a public channel carries, and every reply an API or a machine gives."""
    found: dict[str, type] = {}
    for channel in CHANNELS:
        if channel.internal:
            continue
        for kind in (*channel.messages, *getattr(channel, "replies", ())):
            found[kind.__name__] = kind
    return found


PUBLIC_MESSAGES: dict[str, type] = _public_messages()


def json_schemas() -> dict[str, dict[str, Any]]:
    """One self-contained JSON Schema document per public message, by name."""
    out: dict[str, dict[str, Any]] = {}
    for name, kind in sorted(PUBLIC_MESSAGES.items()):
        (ref,), components = msgspec.json.schema_components([kind])
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": name,
            **components[ref["$ref"].rsplit("/", 1)[1]],
        }
        extra = {k: v for k, v in components.items() if k != name}
        if extra:
            schema["$defs"] = extra
        out[name] = schema
    return out

