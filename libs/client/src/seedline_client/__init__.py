"""The one typed client of Seedline's request/reply APIs (CONTRACT.md 2.1, 2.3, 3, 4).

Requests and replies are the contract's own types; every way a request can fail is one of
the errors in errors.py, each naming the service that should have answered. How a failure
is put to a person is the caller's: the CLI says it in a sentence and an exit code, the web
process and MCP in an error body.
"""

from .client import ANSWERED_BY, SeedlineClient
from .errors import (
    ClientError,
    ConnectionLost,
    NoAnswer,
    NotRunning,
    Refused,
    TooLarge,
    UnreadableReply,
)

__all__ = [
    "ANSWERED_BY",
    "ClientError",
    "ConnectionLost",
    "NoAnswer",
    "NotRunning",
    "Refused",
    "SeedlineClient",
    "TooLarge",
    "UnreadableReply",
]
