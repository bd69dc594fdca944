"""One `seedline up` per data folder.

Two systems on one SEEDLINE_HOME share one embedded Postgres and one JetStream store:
the second reuses the first one's database and stops it on its way out. So `seedline up`
holds an OS lock (flock) on SEEDLINE_HOME/up.lock for its whole life, and writes a note of
who holds it into that file. The kernel drops the lock when the process ends in any way,
kill -9 included; a note left behind without a held lock is stale and taken over.

The file is never deleted: a process that opened it just before an unlink would lock a
file nobody else can see.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from seedline_contracts.times import parse_rfc3339

from seedline_core.ages import describe_age

LOCK_NAME = "up.lock"


class FolderProblem(Exception):
    """This data folder cannot be used; the message says why and what to do."""


class FolderInUse(FolderProblem):
    """Another `seedline up`, or what it left running, uses this data folder."""


@dataclass(frozen=True)
class Holder:
    pid: int
    started_at: str
    nats_port: int
    monitor_port: int
    nats_pid: int | None = None

    @classmethod
    def from_note(cls, text: str) -> "Holder | None":
        try:
            note = json.loads(text)
            return cls(
                int(note["pid"]),
                str(note["started_at"]),
                int(note["nats_port"]),
                int(note["monitor_port"]),
                int(note["nats_pid"]) if note.get("nats_pid") else None,
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        try:
            age = datetime.now(timezone.utc) - parse_rfc3339(self.started_at)
            since = f" ({describe_age(age)})"
        except ValueError:
            since = ""
        return (
            f"pid {self.pid}, started at {self.started_at}{since}, NATS port {self.nats_port} "
            f"(monitor {self.monitor_port})"
        )


class DataFolderLock:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / LOCK_NAME
        self._fd: int | None = None
        self._holder: Holder | None = None

    def check(self) -> Holder | None:
        """Raise FolderInUse when the folder is taken; creates and changes nothing. Returns
        the note of an earlier `seedline up` that ended without stopping its nats-server,
        while that server still runs on this folder's data (leftovers.py stops it)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._unusable(exc) from None
        try:
            return self._refuse_if_taken(fd, nats_left_refused=False)
        finally:
            os.close(fd)  # also drops the probe's own lock, when it got one

    def acquire(self, nats_port: int, monitor_port: int) -> None:
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._unusable(exc) from None
        try:
            self._refuse_if_taken(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._holder = Holder(os.getpid(), started, nats_port, monitor_port)
        self._write(self._holder)

    def note_nats_pid(self, pid: int) -> None:
        """Recorded so a later `seedline up` can tell if this one's nats-server outlived it."""
        if self._fd is not None and self._holder is not None:
            self._holder = Holder(**{**self._holder.__dict__, "nats_pid": pid})
            try:
                self._write(self._holder)
            except OSError:
                pass  # a full disk: only a note for a later run; the lock itself holds

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)  # an empty note: nobody holds the folder
        os.close(self._fd)  # closing drops the lock
        self._fd = None

    def _refuse_if_taken(self, fd: int, nats_left_refused: bool = True) -> Holder | None:
        """Leaves ``fd`` locked when the folder is free. A nats-server an ended holder left
        running is refused, or (``nats_left_refused`` false) returned with its note."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderInUse(self._held_message(self._read(fd))) from None
        left = self._read(fd)
        if left is not None and left.nats_pid and is_nats_server_of(left.nats_pid, self.home):
            if not nats_left_refused:
                return left
            fcntl.flock(fd, fcntl.LOCK_UN)
            raise FolderInUse(
                f"The `seedline up` that used {self.home} (pid {left.pid}) has ended, but its "
                f"nats-server (pid {left.nats_pid}, port {left.nats_port}) still runs on this "
                f"folder's data. Stop it with `kill {left.nats_pid}` and start again."
            )
        return None

    def _unusable(self, exc: OSError) -> FolderProblem:
        return FolderProblem(
            f"Cannot use {self.home} as the data folder ({exc.strerror}): choose another with "
            "SEEDLINE_HOME."
        )

    def _held_message(self, holder: Holder | None) -> str:
        who = holder.describe() if holder else "it is still starting"
        stop = f"Ctrl-C in its terminal, or `kill {holder.pid}`" if holder else "Ctrl-C"
        return (
            f"Another `seedline up` already runs on the data folder {self.home} ({who}). "
            f"Stop it ({stop}) first, or give this one a folder of its own with SEEDLINE_HOME."
        )

    @staticmethod
    def _read(fd: int) -> Holder | None:
        text = os.pread(fd, 4096, 0).decode("utf-8", errors="replace")
        return Holder.from_note(text) if text.strip() else None

    def _write(self, holder: Holder) -> None:
        data = (json.dumps(holder.__dict__) + "\n").encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)


def is_nats_server_of(pid: int, home: Path) -> bool:
    """The process is alive and is a nats-server running this folder's config."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    config = str(home / "nats" / "nats.conf").encode()
    return any(arg.endswith(b"nats-server") for arg in cmdline) and config in cmdline
