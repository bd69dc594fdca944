"""Errors the web process answers with: the contract's shape, an HTTP status, a sentence.

Every reply that is not a success is `{"ok": false, "error": {"code", "message"}}`
(CONTRACT.md, Conventions), with the same codes the NATS APIs use plus the ones
only HTTP has: `unauthorized`, `payload_too_large`, `request_timeout` (a body that
did not arrive in time), `too_many_streams` (429: a token or an address holds as many
open streams as it may), `not_permitted` for a token of another instance, and `disk_full`
(507: the disk of SEEDLINE_HOME is full, so new work is refused; seedline_core.disk_full).
"""

from __future__ import annotations

from seedline_contracts.codec import encode
from seedline_contracts.errors import error_reply
from seedline_core.notices import error_message

STATUS: dict[str, int] = {
    "invalid_request": 400,
    "invalid_entry": 400,
    "bad_token": 400,
    "not_json": 400,
    "unauthorized": 401,
    "not_permitted": 403,
    "not_found": 404,
    "request_timeout": 408,
    "not_yet_visible": 409,
    "runner_offline": 409,
    "launch_refused": 409,
    "superseded": 409,
    "payload_too_large": 413,
    "too_many_streams": 429,
    "unavailable": 503,
    "disk_full": 507,
    "runner_unreachable": 504,
    "timeout": 504,
}


class WebError(Exception):
    """A request that cannot be answered with a success; carries what the person reads."""

    def __init__(self, code: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self._status = status  # when the code's usual status is not the whole story

    @property
    def status(self) -> int:
        return self._status or STATUS.get(self.code, 500)

    def body(self) -> bytes:
        return encode(error_reply(self.code, self.message))


def not_found(what: str = "conversation") -> WebError:
    return WebError("not_found", error_message("not_found", what=what))


def unavailable() -> WebError:
    return WebError("unavailable", error_message("unavailable"))


def unauthorized() -> WebError:
    return WebError(
        "unauthorized",
        "This needs a token: send it as `Authorization: Bearer <token>`; an operator creates one "
        "with `seedline tokens create --instance <instance>`.",
    )


def other_instance(instance_id: str) -> WebError:
    return WebError(
        "not_permitted",
        f"This token is for another instance, not {instance_id}; use a token created for it with "
        f"`seedline tokens create --instance {instance_id}`.",
    )
