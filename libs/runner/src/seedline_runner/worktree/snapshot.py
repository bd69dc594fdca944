"""Taking a checkout's uncommitted work as one snapshot (CONTRACT.md 6): what `git status`
shows against HEAD, tracked changes as one binary diff and untracked files (those not
ignored) as they are, secret files left out and listed, within limits.

The snapshot is a tar archive: `seedline-snapshot.json` (what it holds), `tracked.patch`
(git diff --binary against the base commit) and `files/<path>` for each untracked file.
"""

from __future__ import annotations

import io
import json
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from .git import changed_paths, git, head
from .secret_files import SNIFF_BYTES, secret_file

MANIFEST = "seedline-snapshot.json"
PATCH = "tracked.patch"
FILES = "files/"
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
DEFAULT_MAX_FILES = 5_000


@dataclass(frozen=True)
class Limits:
    """The most a saved tree may hold (a runner's setting); over them nothing is stored."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_files: int = DEFAULT_MAX_FILES


@dataclass
class Taken:
    base_commit: str
    branch: str | None
    clean: bool
    archive: bytes | None = None  # None: clean, or over a limit
    files: int = 0
    left_out: list[tuple[str, str]] = field(default_factory=list)
    over_limit: bool = False


async def take(checkout: Path, limits: Limits = Limits()) -> Taken:
    """The checkout's uncommitted work against HEAD."""
    base, branch = await head(checkout)
    tracked, untracked = await changed_paths(checkout)
    if not tracked and not untracked:
        return Taken(base, branch, clean=True)
    left_out = [(path, why) for path in (*tracked, *untracked)
                if (why := secret_file(path, _head_of(checkout / path))) is not None]
    secret = {path for path, _ in left_out}
    tracked = [p for p in tracked if p not in secret]
    untracked = [p for p in untracked if p not in secret]
    taken = Taken(base, branch, clean=False, files=len(tracked) + len(untracked),
                  left_out=left_out)
    if taken.files > limits.max_files or _sizes(checkout, untracked) > limits.max_bytes:
        taken.over_limit = True
        return taken
    patch = await _patch(checkout, tracked, sorted(secret))
    if len(patch) + _sizes(checkout, untracked) > limits.max_bytes:
        taken.over_limit = True
        return taken
    taken.archive = _archive(checkout, base, branch, tracked, untracked, patch)
    return taken


async def _patch(checkout: Path, tracked: list[str], secret: list[str]) -> bytes:
    """Every tracked change against HEAD but the secret files' (a few, named on the
    command line: the changes kept may be thousands)."""
    if not tracked:
        return b""
    left_out = [f":(top,exclude,literal){path}" for path in secret]
    return await git(checkout, "diff", "--binary", "--no-renames", "--no-color",
                     "--no-ext-diff", "--ignore-submodules=all", "HEAD", "--", ":(top)",
                     *left_out)


def _head_of(path: Path) -> bytes:
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return b""
        with path.open("rb") as f:
            return f.read(SNIFF_BYTES)
    except OSError:
        return b""  # deleted: a tracked file's deletion is in the diff


def _sizes(checkout: Path, paths: list[str]) -> int:
    total = 0
    for path in paths:
        try:
            total += (checkout / path).lstat().st_size
        except OSError:
            continue
    return total


def _archive(checkout: Path, base: str, branch: str | None, tracked: list[str],
             untracked: list[str], patch: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        manifest = json.dumps({"base_commit": base, "branch": branch, "tracked": tracked,
                               "untracked": untracked}).encode()
        _add_bytes(tar, MANIFEST, manifest)
        _add_bytes(tar, PATCH, patch)
        for path in untracked:
            source = checkout / path
            try:
                info = tar.gettarinfo(str(source), arcname=FILES + path)
            except OSError:
                continue  # gone since git listed it
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with source.open("rb") as f:
                    tar.addfile(info, f)
            elif info.issym():
                tar.addfile(info)
    return buffer.getvalue()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def read_archive(archive: bytes) -> tuple[dict, bytes, dict[str, tarfile.TarInfo], tarfile.TarFile]:
    """The manifest, the patch, and each untracked file's entry (with the open archive to
    read them from); ValueError when it is not a snapshot."""
    try:
        tar = tarfile.open(fileobj=io.BytesIO(archive), mode="r:")
        manifest = json.loads(tar.extractfile(MANIFEST).read())
        patch = tar.extractfile(PATCH).read()
    except (tarfile.TarError, KeyError, AttributeError, ValueError) as error:
        raise ValueError(f"not a snapshot: {error}") from None
    files = {m.name[len(FILES):]: m for m in tar.getmembers() if m.name.startswith(FILES)}
    return manifest, patch, files, tar
