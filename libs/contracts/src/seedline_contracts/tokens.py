"""Subject tokens made from user data (CONTRACT.md, Conventions).

Every byte of the UTF-8 form outside ``[A-Za-z0-9_-]`` becomes ``~`` and two
upper-case hex digits, so a token can never smuggle ``.``, ``*``, ``>`` or a
space into a subject. The empty string is not a token, and neither is one whose
escaped form is longer than 255 bytes.
"""

from __future__ import annotations

MAX_ESCAPED_BYTES = 255
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_HEX = "0123456789ABCDEF"


class TokenError(ValueError):
    """A value that cannot be used as a subject token."""


def escape_token(value: str) -> str:
    if not isinstance(value, str) or value == "":
        raise TokenError("must be a non-empty string")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise TokenError("must be valid Unicode text (it holds a lone surrogate)") from None
    out: list[str] = []
    for byte in raw:
        if byte in _SAFE:
            out.append(chr(byte))
        else:
            out.append("~" + _HEX[byte >> 4] + _HEX[byte & 0xF])
    escaped = "".join(out)
    if len(escaped) > MAX_ESCAPED_BYTES:
        raise TokenError(f"is {len(escaped)} bytes once escaped; the limit is {MAX_ESCAPED_BYTES}")
    return escaped


def unescape_token(token: str) -> str:
    if token == "" or len(token) > MAX_ESCAPED_BYTES:
        raise TokenError("is not an escaped token")
    raw = bytearray()
    i = 0
    while i < len(token):
        ch = token[i]
        if ch == "~":
            pair = token[i + 1 : i + 3]
            if len(pair) != 2 or any(c not in _HEX for c in pair):
                raise TokenError(f"has a broken escape at position {i}")
            raw.append(int(pair, 16))
            i += 3
        elif ord(ch) < 128 and ord(ch) in _SAFE:
            raw.append(ord(ch))
            i += 1
        else:
            raise TokenError(f"holds {ch!r}, which an escaped token never contains")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TokenError("does not decode to UTF-8 text") from None


def has_control_characters(text: str) -> bool:
    """C0, DEL and C1 controls. Seedline refuses them in names (instance, repo,
    conversation, machine): they are never meant, and Postgres text cannot hold NUL."""
    return any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)


def name_problem(value: object) -> str | None:
    """Why `value` cannot be an instance, repo, conversation or machine name, or None.

    The one rule for names everywhere (CONTRACT.md, Conventions): a valid token that
    holds no control character. The sentence completes "<field> ...".
    """
    if not isinstance(value, str) or value == "":
        return "must be a non-empty string"
    if has_control_characters(value):
        return "contains a control character; remove it"
    try:
        escape_token(value)
    except TokenError as exc:
        return str(exc)
    return None


def is_valid_token(value: object) -> bool:
    try:
        escape_token(value)  # type: ignore[arg-type]
    except TokenError:
        return False
    return True
