"""Applying a carried tree to this machine's checkout, all or nothing (CONTRACT.md 6).

Only a checkout with no uncommitted changes of its own is touched (with any, nothing is
applied), so its state before is a commit and nothing else that git does not ignore.
Before anything changes, a marker in the checkout's .git folder records that commit (and
its branch); every step after either completes or is rolled back to it (the tree reset,
what is not ignored and not tracked removed: only what the apply wrote), and a runner
that died mid-apply rolls it back when it starts again (`recover`). A file git ignores
is never touched: one where the tree puts a file is a conflict.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from seedline_contracts.worktrees import SavedTree

from .git import FETCH_SECONDS, GitError, changed_paths, git, head, is_checkout
from .snapshot import read_archive

MARKER = "seedline-apply.json"


@dataclass(frozen=True)
class Outcome:
    applied: bool
    files: int = 0
    bytes: int = 0
    reason: str | None = None  # one of seedline_contracts.worktrees.NOT_APPLIED
    detail: str = ""  # what the reason's sentence names (a path, a commit)


class _Refused(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


async def apply_tree(checkout: Path | None, saved: SavedTree, archive: bytes | None) -> Outcome:
    """Put the checkout at the saved base commit and apply the saved changes, or change
    nothing and say why. `archive` is the opened snapshot (None when the tree was clean,
    or when it could not be read)."""
    if saved.over_limit:
        return Outcome(False, reason="over_limit")
    if not await is_checkout(checkout):
        return Outcome(False, reason="no_checkout")
    await recover(checkout)
    if saved.snapshot is not None and archive is None:
        return Outcome(False, reason="unreadable")
    try:
        manifest, patch, members, tar = read_archive(archive) if archive else ({}, b"", {}, None)
    except ValueError:
        return Outcome(False, reason="unreadable")
    try:
        if any(await changed_paths(checkout)):
            raise _Refused("own_changes")
        await _have_commit(checkout, saved.base_commit)
        before = await head(checkout)
        untracked = list(manifest.get("untracked", []))
        _mark(checkout, before)
        try:
            await _check_out(checkout, saved.base_commit, saved.branch)
            for path in untracked:
                if not _inside(path) or os.path.lexists(checkout / path):
                    raise _Refused("conflict", path)
            if patch:
                # git apply checks every hunk before it writes any: a patch that does not
                # apply changes nothing.
                try:
                    await git(checkout, "apply", "--binary", stdin=patch)
                except GitError as error:
                    raise _Refused("conflict", str(error)) from None
            for path in untracked:
                _write(tar, members[path], checkout / path)
        except BaseException:
            await _roll_back(checkout)
            raise
        (checkout / ".git" / MARKER).unlink()
    except _Refused as refused:
        return Outcome(False, reason=refused.reason, detail=refused.detail)
    except (GitError, OSError, KeyError) as error:
        return Outcome(False, reason="conflict", detail=str(error))
    files = len(manifest.get("tracked", [])) + len(manifest.get("untracked", []))
    return Outcome(True, files=files, bytes=len(archive or b""))


async def recover(checkout: Path) -> bool:
    """Roll back an apply a runner did not finish (it died mid-way). True when it did."""
    if not (checkout / ".git" / MARKER).exists():
        return False
    await _roll_back(checkout)
    return True


async def _have_commit(checkout: Path, commit: str) -> None:
    """The commit is here, or fetched from the checkout's own remotes."""
    if await _has(checkout, commit):
        return
    remotes = (await git(checkout, "remote")).decode().split()
    for remote in remotes:
        try:
            await git(checkout, "fetch", "--quiet", remote, seconds=FETCH_SECONDS)
        except GitError:
            continue
        if await _has(checkout, commit):
            return
    raise _Refused("base_missing", commit)


async def _has(checkout: Path, commit: str) -> bool:
    try:
        await git(checkout, "cat-file", "-e", f"{commit}^{{commit}}")
    except GitError:
        return False
    return True


async def _check_out(checkout: Path, commit: str, branch: str | None) -> None:
    """The base commit, on its branch when this checkout's branch of that name is there
    (or absent: made there); detached when the branch here is somewhere else."""
    if branch:
        try:
            here = (await git(checkout, "rev-parse", "--verify", "-q",
                              f"refs/heads/{branch}")).decode().strip()
        except GitError:
            here = None
        if here is None:
            await git(checkout, "checkout", "-q", "-b", branch, commit)
            return
        if here == commit:
            await git(checkout, "checkout", "-q", branch)
            return
    await git(checkout, "checkout", "-q", "--detach", commit)


def _inside(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return bool(parts) and not PurePosixPath(path).is_absolute() and ".." not in parts \
        and parts[0] != ".git"


def _write(tar, member, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if member.issym():
        os.symlink(member.linkname, target)
        return
    data = tar.extractfile(member).read()
    with open(target, "xb") as f:  # never over anything: it was checked absent
        f.write(data)
    if member.mode & 0o111:
        target.chmod(target.stat().st_mode | 0o111)


def _mark(checkout: Path, before: tuple[str, str | None]) -> None:
    marker = checkout / ".git" / MARKER
    body = json.dumps({"head": before[0], "branch": before[1]})
    with open(marker, "w", encoding="utf-8") as f:
        f.write(body)
        f.flush()
        os.fsync(f.fileno())


async def _roll_back(checkout: Path) -> None:
    """Back to where the marker says the checkout was: the patch undone, the files it
    wrote removed (the checkout had no untracked file that git does not ignore), its
    branch or commit checked out again."""
    marker = checkout / ".git" / MARKER
    recorded = json.loads(marker.read_text(encoding="utf-8"))
    await git(checkout, "reset", "-q", "--hard")
    await git(checkout, "clean", "-q", "-f", "-d")
    if recorded.get("branch"):
        await git(checkout, "checkout", "-q", "-f", recorded["branch"])
    else:
        await git(checkout, "checkout", "-q", "-f", "--detach", recorded["head"])
    marker.unlink()
