"""The CLI's side of a full disk (seedline_core.disk_full): new work is refused with the
sentence that names the disk, and an error that a full disk caused says so.

The disk looked at is this machine's SEEDLINE_HOME, as `seedline up` uses it; a CLI on
another machine, or one whose SEEDLINE_HOME is not here, sees no disk and relies on what
NATS answers (a store out of room: JETSTREAM_FULL)."""

from __future__ import annotations

from seedline_core.disk_full import DiskFull
from seedline_platform import disk_space

from .errors import OperationFailed

DISK_FULL = "disk_full"
# JetStream's answer when its store has no room left: "insufficient resources" (a 503).
JETSTREAM_FULL = 10023


class DiskIsFull(OperationFailed):
    code = DISK_FULL


def disk_full_here() -> DiskFull | None:
    try:
        return disk_space.check_here()
    except OSError:
        return None


def refuse_new_work() -> None:
    """Raise DiskIsFull, with the sentence every surface gives, while the disk is full."""
    full = disk_full_here()
    if full is not None:
        raise DiskIsFull(full.message())


def store_full(exc: BaseException) -> bool:
    """NATS answered that JetStream's store has no room."""
    return getattr(exc, "err_code", None) == JETSTREAM_FULL
