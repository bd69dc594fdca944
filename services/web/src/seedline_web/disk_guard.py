"""The web's side of a full disk (seedline_core.disk_full): new work, over HTTP, the console
and MCP alike (all go through the Tenant), is refused with the sentence that names the disk
(HTTP 507), and an error a full disk caused says so instead of "try again in a moment".

The disk looked at is SEEDLINE_HOME's when it is on this machine, as under `seedline up`;
elsewhere (a container) there is none to look at, and the backend's own errors stand."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from seedline_platform import disk_space

from .errors import WebError

T = TypeVar("T")
DISK_FULL = "disk_full"
# What the backend answers when the disk under NATS or Postgres is full: it stores nothing
# and answers nothing in time.
SILENT = ("unavailable", "timeout")


def refuse_new_work() -> None:
    try:
        full = disk_space.check_here()
    except OSError:
        return
    if full is not None:
        raise WebError(DISK_FULL, full.message())


async def new_work(request: Awaitable[T]) -> T:
    """The backend's reply; its silence while the disk is full is named as the full disk."""
    try:
        return await request
    except WebError as exc:
        if exc.code in SILENT:
            refuse_new_work()
        raise
