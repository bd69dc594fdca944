"""Ids the platform issues."""

from __future__ import annotations

import secrets


def new_session_id() -> str:
    """A conversation's id: `csess_` and 16 hex digits, as every reply and event shows it."""
    return "csess_" + secrets.token_hex(8)
