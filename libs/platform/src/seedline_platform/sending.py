"""A handler sends only what its routing-table row declares (DESIGN.md rule 11).

The edge runs each handler inside its row (`sending_as`); every publish, notice, machine
request and key-ring write checks its subject here first (`check_send`). Kept apart from
routing.py, which names the contract's channels: the edges that check a send (natsio,
sealing) are imported by commands that load no wire types.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .subject_match import subject_matches

if TYPE_CHECKING:
    from .routing import Route


class UndeclaredSend(Exception):
    """A handler sent what its row does not declare (the server would refuse it too)."""


_sending: contextvars.ContextVar[Route | None] = contextvars.ContextVar("sending", default=None)


@contextlib.contextmanager
def sending_as(route: Route) -> Iterator[None]:
    """Everything sent inside is checked against `route.sends` (tasks started inside too)."""
    token = _sending.set(route)
    try:
        yield
    finally:
        _sending.reset(token)


def check_send(subject: str) -> None:
    """Raise UndeclaredSend when the handler at work may not send on `subject`. Outside any
    route (a service starting, a tool) nothing is checked."""
    route = _sending.get()
    if route is None:
        return
    if not any(subject_matches(subject, allowed) for allowed in route.send_filters):
        raise UndeclaredSend(
            f"{route.handler_name} sent on {subject}, which its route does not declare; add "
            "it to the row's sends= (the service's permissions follow from it)")
