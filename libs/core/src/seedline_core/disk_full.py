"""A full disk is a state of the system, said in one sentence on every surface.

When the disk that holds a data folder has less free space than Seedline needs, new work
is refused (the CLI, HTTP 507, MCP) with the sentence below, `seedline status` fails with
it, and `seedline up` waits for room instead of starting again what the full disk stopped.
Pure: the free space is measured by the caller (seedline_platform.disk_space).
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1_000_000
# Room for Postgres to write a WAL segment (16 MB) and checkpoint, and for nats-server to
# take a window of fsynced entries, with a margin: below it writes start failing.
DEFAULT_NEEDED_MB = 100


def size_text(size: int) -> str:
    """As `df -H` counts: gigabytes to a tenth, else whole megabytes, kilobytes or bytes."""
    if size >= 1000 * MB:
        return f"{size / (1000 * MB):,.1f} GB"
    if size >= MB:
        return f"{size // MB:,} MB"
    if size >= 1000:
        return f"{size // 1000:,} kB"
    return f"{size:,} bytes"


@dataclass(frozen=True)
class DiskFull:
    """The disk of ``folder`` has ``free`` bytes where Seedline needs ``needed``."""

    folder: str
    free: int
    needed: int

    @property
    def missing(self) -> int:
        return self.needed - self.free

    def message(self) -> str:
        return (
            f"The disk that holds {self.folder} is full: {size_text(self.free)} free, and "
            f"Seedline needs at least {size_text(self.needed)} free there to take new work "
            f"({size_text(self.missing)} more). Free space on that disk, or move "
            "SEEDLINE_HOME to a larger one; Seedline carries on by itself once there is room."
        )

    def to_json(self) -> dict:
        return {"full": True, "folder": self.folder, "free_bytes": self.free,
                "needed_bytes": self.needed, "message": self.message()}


def disk_full(folder: str, free: int, needed: int) -> DiskFull | None:
    """The state of a folder's disk: full below what is needed, else None."""
    return DiskFull(folder, free, needed) if free < needed else None


def room_again_text(folder: str) -> str:
    """What `seedline up` says when the disk has room again."""
    return (f"There is room on the disk that holds {folder} again: starting again nats-server "
            "and what stopped while the disk was full.")
