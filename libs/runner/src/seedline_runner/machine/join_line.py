"""The one line an operator hands a machine (`seedline machines add` prints it, `seedline runner
join` reads it): the NATS URLs, the machine's own user and password, the CA when TLS is on.

It is a prefix and the base64url of a small JSON object, so it survives a chat message, a
terminal and a shell's single quotes whole. It holds the machine's password: whoever has the
line can act as the machine until an operator removes it.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import asdict, dataclass

PREFIX = "seedline-join-1:"
MAX_CHARS = 64 * 1024  # a line with a CA chain is a few kilobytes


class JoinLineError(ValueError):
    """The line cannot be read; the message says what to do."""


@dataclass(frozen=True)
class JoinLine:
    node_id: str
    label: str
    urls: list[str]
    user: str
    password: str
    # The CA certificate (PEM) to trust for the server, when it speaks TLS.
    ca: str | None = None

    def encode(self) -> str:
        body = json.dumps(asdict(self), separators=(",", ":"), sort_keys=True).encode()
        return PREFIX + base64.urlsafe_b64encode(body).decode().rstrip("=")


_RETRY = "copy the whole line `seedline machines add` printed, or ask the operator for a new one"


def decode(text: str) -> JoinLine:
    text = text.strip().strip("'\"")
    if not text.startswith(PREFIX):
        raise JoinLineError(
            f"This is not a join line (it does not start with {PREFIX}); {_RETRY}.")
    if len(text) > MAX_CHARS:
        raise JoinLineError(f"This join line is longer than any Seedline prints; {_RETRY}.")
    packed = text[len(PREFIX):]
    try:
        body = json.loads(base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4)))
    except (binascii.Error, ValueError):
        raise JoinLineError(f"This join line is cut or changed; {_RETRY}.") from None
    try:
        line = JoinLine(
            node_id=_text(body, "node_id"), label=_text(body, "label"),
            urls=[str(u) for u in body["urls"]], user=_text(body, "user"),
            password=_text(body, "password"),
            ca=str(body["ca"]) if body.get("ca") else None)
    except (KeyError, TypeError, AttributeError):
        raise JoinLineError(f"This join line lacks what a machine needs; {_RETRY}.") from None
    if not line.urls:
        raise JoinLineError(f"This join line names no NATS server; {_RETRY}.")
    return line


def _text(body: dict, key: str) -> str:
    value = body[key]
    if not isinstance(value, str) or not value:
        raise KeyError(key)
    return value
