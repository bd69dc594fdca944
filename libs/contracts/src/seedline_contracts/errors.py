"""The error reply shared by every request/reply API (CONTRACT.md, Conventions)."""

from __future__ import annotations

from typing import Literal

import msgspec

ErrorCode = Literal[
    "invalid_entry",
    "bad_token",
    "not_json",
    "unavailable",
    "invalid_request",
    "not_yet_visible",
    "runner_offline",
    "runner_unreachable",
    "launch_refused",
    "superseded",  # 1.2: a later open of the repo came first; nothing was launched
    "timeout",
    "not_found",
    "not_permitted",
]


class ErrorBody(msgspec.Struct):
    code: str
    message: str


class ErrorReply(msgspec.Struct):
    error: ErrorBody
    ok: bool = False


def error_reply(code: str, message: str) -> ErrorReply:
    return ErrorReply(error=ErrorBody(code=code, message=message))
