"""git, run in a checkout with a time limit; its failures become GitError with its words."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

GIT_SECONDS = 60.0
# A fetch from a remote may take longer than a local command.
FETCH_SECONDS = 120.0


class GitError(Exception):
    """git refused or failed; the message carries what it said."""


async def git(checkout: Path, *args: str, stdin: bytes | None = None,
              seconds: float = GIT_SECONDS) -> bytes:
    """git's output; GitError when it exits with an error or outlives `seconds`."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    process = await asyncio.create_subprocess_exec(
        "git", "-C", str(checkout), *args, env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin), seconds)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise GitError(f"git {args[0]} took longer than {seconds:g} s") from None
    if process.returncode != 0:
        said = err.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]}: {said[-1] if said else f'exit {process.returncode}'}")
    return out


async def is_checkout(path: Path | None) -> bool:
    """Whether `path` is the top of a git work tree with at least one commit."""
    if path is None or not (path / ".git").exists():
        return False
    try:
        await git(path, "rev-parse", "--verify", "-q", "HEAD")
    except (GitError, OSError):
        return False
    return True


async def head(checkout: Path) -> tuple[str, str | None]:
    """HEAD's commit and its branch (None when detached)."""
    sha = (await git(checkout, "rev-parse", "HEAD")).decode().strip()
    try:
        branch = (await git(checkout, "symbolic-ref", "--short", "-q", "HEAD")).decode().strip()
    except GitError:
        branch = ""
    return sha, branch or None


async def changed_paths(checkout: Path) -> tuple[list[str], list[str]]:
    """What `git status` shows against HEAD: tracked paths changed (staged or not,
    deleted included) and untracked paths not ignored, each sorted."""
    out = await git(checkout, "status", "--porcelain=v1", "-z", "--untracked-files=all",
                    "--no-renames", "--ignore-submodules=all")
    tracked, untracked = [], []
    for item in out.split(b"\0"):
        if len(item) < 4:
            continue
        status, path = item[:2].decode(), os.fsdecode(item[3:])
        (untracked if status == "??" else tracked).append(path)
    return sorted(tracked), sorted(untracked)
