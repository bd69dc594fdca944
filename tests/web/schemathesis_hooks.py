"""Loaded by Schemathesis for test_web_schemathesis.py (never by pytest itself).

Two rules of the contract cannot be written in JSON Schema, and the document says them in
words instead: an entry's `at` lies between 2000-01-01T00:00:00Z (in UTC, whatever its
offset) and one day after it arrives, on a day the month has; and a name (repo,
conversation, machine) is at most 255 bytes once escaped as a subject token. A generated
value that breaks only those is made to keep them (`at` moved to now, a name cut to fit);
everything else the schema allows goes as generated, so every other rule the document
states is still checked both ways."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import re

import schemathesis

from seedline_contracts.times import EARLIEST_AT, parse_rfc3339
from seedline_contracts.tokens import TokenError, escape_token

from seedline_web.fields import MAX_NAME_CHARS, NO_CONTROL, RFC3339

NAMES = ("repo", "session_id", "node_id")


def _fits(name: str) -> str:
    """The longest start of a generated name whose escaped form is at most 255 bytes."""
    while name:
        try:
            escape_token(name)
            return name
        except TokenError:
            name = name[:-1]
    return name


def _names(values: dict) -> dict:
    # Only names the schema allows (negative cases stay negative).
    return {k: (_fits(v) or v) if k in NAMES and isinstance(v, str)
            and 0 < len(v) <= MAX_NAME_CHARS and re.search(NO_CONTROL, v) else v
            for k, v in values.items()}


def _fixed(entry):
    if not isinstance(entry, dict):
        return entry
    entry = _names(entry)
    if not isinstance(entry.get("at"), str) or not re.search(RFC3339, entry["at"]):
        return entry
    try:
        at = parse_rfc3339(entry["at"])
    except ValueError:
        if len(entry["at"]) < 20 or not entry["at"][:4].isdigit():
            return entry  # not a date at all: the schema's own concern
        return {**entry, "at": _now()}
    if at > datetime.now(timezone.utc) + timedelta(hours=23) or at < EARLIEST_AT:
        return {**entry, "at": _now()}
    return entry


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@schemathesis.hook
def map_body(context, body):
    if isinstance(body, dict) and isinstance(body.get("entries"), list):
        return {**body, "entries": [_fixed(e) for e in body["entries"]]}
    return _fixed(body)


@schemathesis.hook
def map_query(context, query):
    return _names(query) if isinstance(query, dict) else query
