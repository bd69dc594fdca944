"""Linux with a writable cgroup v2: a cgroup per conversation.

A process cannot leave its cgroup by changing its process group or session, and
its children are born in it, so the cgroup holds the engine's whole tree for good.
The engine CLI moves itself into its pen's cgroup before it runs (between fork and
exec), so not even its first child is born outside. Ending a pen writes
``cgroup.kill`` (Linux 5.14; older kernels: each pid is killed until none is left)
and waits until the cgroup is empty.

Cgroups live under ``<cgroup2 mount>/seedline-runner-<key>/<pen>``: the key names the
runner's state folder, so a runner started again finds the cgroups its previous run
left, whatever cgroup it runs in itself.
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import time
from pathlib import Path

import structlog

from .base import END_TIMEOUT_SECONDS, PEN_ENV, ChildSetup, pen_tag

log = structlog.get_logger(__name__)

_POLL_SECONDS = 0.02


def cgroup2_mount(mountinfo: str | None = None) -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``, or ``.../unified``)."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if rest.split()[:1] == ["cgroup2"] and len(parts) > 4:
            return Path(parts[4])
    return None


def own_cgroup() -> str | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:]
    except OSError:
        pass
    return None


def _populated(folder: Path) -> bool:
    try:
        return "populated 1" in (folder / "cgroup.events").read_text()
    except OSError:
        return False


def _move_self_into(procs: bytes) -> None:
    fd = os.open(procs, os.O_WRONLY)
    try:
        os.write(fd, b"0")
    finally:
        os.close(fd)


class CgroupContainment:
    name = "cgroup"

    def __init__(self, root: Path, key: str) -> None:
        self.root = root
        self.key = key

    @classmethod
    def create(cls, key: str, mount: Path | None = None) -> CgroupContainment | None:
        """A containment under the cgroup v2 mount, or None when this machine does not allow it."""
        mount = mount or cgroup2_mount()
        if mount is None:
            return None
        bases = [mount]
        own = own_cgroup()
        if own and own != "/":
            bases.append(mount / own.lstrip("/"))  # a cgroup delegated to this user
        for base in bases:
            containment = cls(base / f"seedline-runner-{key}", key)
            if containment._usable():
                return containment
        return None

    def _usable(self) -> bool:
        """Can a process be started into a pen here? Tried with ``true``, not assumed."""
        probe = "probe-" + str(os.getpid())
        try:
            self.root.mkdir(exist_ok=True)
            setup = self.child_setup(probe)
            subprocess.run(["true"], preexec_fn=setup.preexec, check=True, timeout=10)
            return True
        except (OSError, subprocess.SubprocessError) as error:
            log.info("cgroup_not_usable", root=str(self.root), error=str(error))
            return False
        finally:
            self._remove(probe)

    def describe(self) -> str:
        return f"each engine runs in a cgroup of its own under {self.root}, killed whole on a stop"

    def pen_dir(self, pen: str) -> Path:
        return self.root / pen

    def child_setup(self, pen: str) -> ChildSetup:
        folder = self.pen_dir(pen)
        # parents: a keeper of an earlier run of this key may just have tidied the root away.
        folder.mkdir(parents=True, exist_ok=True)
        procs = os.fsencode(folder / "cgroup.procs")
        return ChildSetup(
            env={PEN_ENV: pen_tag(self.key, pen)}, preexec=lambda: _move_self_into(procs)
        )

    def adopt(self, pen: str, pid: int) -> None:
        pass  # the cgroup holds it already

    def pids(self, pen: str) -> list[int]:
        try:
            text = (self.pen_dir(pen) / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(pid) for pid in text.split()]

    def populated(self, pen: str) -> bool:
        """True while any process (dying ones too) is still in the pen's cgroup."""
        return _populated(self.pen_dir(pen))

    async def end(self, pen: str, *, timeout: float = END_TIMEOUT_SECONDS) -> int:
        folder = self.pen_dir(pen)
        if not folder.is_dir():
            return 0
        killed = set(self.pids(pen))
        kill_file = folder / "cgroup.kill"
        deadline = time.monotonic() + timeout
        while pids := self.pids(pen):
            killed.update(pids)
            if time.monotonic() > deadline:
                log.error("processes_survived_kill", cgroup=str(folder), pids=pids)
                return len(killed)
            if kill_file.exists():
                kill_file.write_text("1")
            else:
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            await asyncio.sleep(_POLL_SECONDS)
        # A killed process leaves cgroup.procs before it has quite gone: the cgroup
        # counts as empty (and can be removed) once "populated" says 0.
        while self.populated(pen) and time.monotonic() < deadline:
            await asyncio.sleep(_POLL_SECONDS)
        self._remove(pen)
        return len(killed)

    def pens_left(self) -> list[str]:
        try:
            folders = [f for f in self.root.iterdir() if f.is_dir()]
        except OSError:
            return []
        # Empty ones too: ending them removes them.
        return sorted(f.name for f in folders)

    def release(self) -> None:
        for pen in self.pens_left():
            self._remove(pen)
        try:
            self.root.rmdir()
        except OSError:
            pass  # a pen still holds something, or another run of this key uses it

    def keeper_args(self) -> list[str]:
        return ["--cgroup", str(self.root)]

    def _remove(self, pen: str) -> None:
        try:
            self.pen_dir(pen).rmdir()
        except OSError as error:
            if error.errno not in (errno.ENOENT, errno.EBUSY):
                log.warning("cgroup_not_removed", cgroup=str(self.pen_dir(pen)), error=str(error))
