"""Loaded by Schemathesis for test_web_schemathesis.py (never by pytest itself).

The document states every bound the server enforces, times included (their pattern is
the server's own reading of a time, and the one bound that moves with the clock, an
entry's `at` at most a day after it arrives, is answered 409, which Schemathesis counts as
a conflict, not a refusal of valid data). One rule cannot be written in JSON Schema at
all: a name (repo, conversation, machine) is at most 255 bytes once escaped as a subject
token, where each byte outside A-Z a-z 0-9 _ - counts three, a weighted length no pattern
or maxLength can state; the document says it in words. So a generated name the schema
allows is cut to fit it; everything else goes as generated, so every other rule is checked
both ways."""

from __future__ import annotations

import re

import schemathesis

from seedline_contracts.tokens import TokenError, escape_token

from seedline_web.fields import MAX_NAME_CHARS, NO_CONTROL

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


def _names(values):
    # Only names the schema allows (negative cases stay negative).
    if not isinstance(values, dict):
        return values
    return {k: (_fits(v) or v) if k in NAMES and isinstance(v, str)
            and 0 < len(v) <= MAX_NAME_CHARS and re.search(NO_CONTROL, v) else v
            for k, v in values.items()}


@schemathesis.hook
def map_body(context, body):
    if isinstance(body, dict) and isinstance(body.get("entries"), list):
        return {**body, "entries": [_names(e) for e in body["entries"]]}
    return _names(body)


@schemathesis.hook
def map_query(context, query):
    return _names(query)
