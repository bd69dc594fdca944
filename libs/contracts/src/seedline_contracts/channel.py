"""What a channel of the wire contract is: an address and the contract types it carries.

A request/reply API (`Api`) is declared beside its request and reply types, a machine's
request (`MachineCall`) beside the runner protocol's; seedline_contracts.channels gathers
every one into the catalogue the documents and permissions are generated from.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass

from . import errors
from .tokens import escape_token, unescape_token

_PARAMETER = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Channel:
    id: str  # the AsyncAPI channel id
    address: str  # a subject; a token written {name} is made from data
    messages: tuple[type, ...]
    description: str
    # Not part of the public contract (a key ring, a record of erasures): it has
    # permissions and rows, but no place in the published documents.
    internal: bool = False

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(_PARAMETER.findall(self.address))

    @property
    def filter(self) -> str:
        """The address as a NATS subject filter: each parameter a `*`."""
        return _PARAMETER.sub("*", self.address)

    def subject(self, **values: str) -> str:
        """The address with each parameter's value escaped into a token."""
        missing = set(self.parameters) - values.keys()
        if missing:
            raise TypeError(f"{self.address} needs {', '.join(sorted(missing))}")
        return _PARAMETER.sub(lambda m: escape_token(values[m.group(1)]), self.address)

    def values(self, subject: str) -> dict[str, str]:
        """The parameters a subject of this channel carries, unescaped (TokenError when one
        is not a token; ValueError when the subject is not this channel's)."""
        pattern = self.address.split(".")
        tokens = subject.split(".")
        if len(tokens) != len(pattern):
            raise ValueError(f"{subject} is not on {self.address}")
        found = {}
        for want, token in zip(pattern, tokens):
            name = _PARAMETER.fullmatch(want)
            if name:
                found[name.group(1)] = unescape_token(token)
            elif want != token:
                raise ValueError(f"{subject} is not on {self.address}")
        return found


@dataclass(frozen=True)
class Api(Channel):
    """A request/reply API: its request type first in `messages`, then what it answers
    (every API may also answer ErrorReply)."""

    reply: type = errors.ErrorReply
    # How the API names its request in a refusal ("The open request is not valid: ...").
    title: str = ""
    # A body that is not JSON is `not_json` where the contract says so (2.1, 3), else
    # `invalid_request` like any other malformed request (2.3).
    not_json: bool = False

    @property
    def request(self) -> type:
        return self.messages[0]

    @property
    def replies(self) -> tuple[type, ...]:
        return (self.reply, errors.ErrorReply)


@dataclass(frozen=True)
class MachineCall(Channel):
    """A request the platform sends to one machine (CONTRACT.md 6); the machine answers it."""

    reply: type = errors.ErrorReply

    @property
    def replies(self) -> tuple[type, ...]:
        return (self.reply,)


def union_members(kind: object) -> tuple[type, ...]:
    """The types of a union (a union of tagged structs is how the contract lists them)."""
    return typing.get_args(kind) or (kind,)  # type: ignore[return-value]


def event_tag(event_type: type) -> str:
    return event_type.__struct_config__.tag  # type: ignore[attr-defined]
