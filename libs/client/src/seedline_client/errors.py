"""Every way a request can fail, each with what a caller needs to say so."""

from __future__ import annotations


class ClientError(Exception):
    """A request that got no usable answer; `service` is the part that should have given it."""

    def __init__(self, subject: str, service: str) -> None:
        super().__init__(f"{service} on {subject}")
        self.subject = subject
        self.service = service


class TooLarge(ClientError):
    """The request is over the server's max_payload; nothing was sent."""

    def __init__(self, subject: str, service: str, size: int, limit: int) -> None:
        super().__init__(subject, service)
        self.size = size
        self.limit = limit


class NotRunning(ClientError):
    """Nothing answers on the subject: no copy of the service is subscribed."""


class NoAnswer(ClientError):
    """The request was delivered and no reply came in time."""

    def __init__(self, subject: str, service: str, timeout: float) -> None:
        super().__init__(subject, service)
        self.timeout = timeout


class ConnectionLost(ClientError):
    """The connection to NATS closed or went stale before the reply came."""


class UnreadableReply(ClientError):
    """A reply that is not the contract's: not JSON, not an object, or not the reply type."""

    def __init__(self, subject: str, service: str, data: bytes, why: str) -> None:
        super().__init__(subject, service)
        self.data = data
        self.why = why


class Refused(ClientError):
    """The service answered with an error reply (CONTRACT.md Conventions): its code and the
    sentence it wrote."""

    def __init__(self, subject: str, service: str, code: str, message: str) -> None:
        super().__init__(subject, service)
        self.code = code
        self.message = message
