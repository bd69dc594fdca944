"""A checkout's uncommitted work, taken on one machine and applied on another, with real
git: byte for byte when it can be, and, when it cannot, nothing changed and the reason
said (CONTRACT.md 6)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from seedline_contracts.worktrees import LeftOut, SavedTree, Snapshot
from seedline_runner.worktree.apply import MARKER, apply_tree, recover
from seedline_runner.worktree.git import changed_paths, head
from seedline_runner.worktree.snapshot import Limits, take

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
BINARY = bytes(range(256)) * 40


def sh(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          env={**os.environ, **GIT_ENV}).stdout.decode()


@pytest.fixture
def machines(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An origin and two clones of it: the machine the work was done on, and the next."""
    origin = tmp_path / "origin.git"
    sh(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    seed = tmp_path / "seed"
    sh(tmp_path, "clone", "-q", str(origin), str(seed))
    (seed / "src").mkdir()
    (seed / "src" / "board.py").write_text("BOARD = 8\n")
    (seed / "README.md").write_text("# chess\n")
    (seed / "logo.bin").write_bytes(BINARY)
    (seed / ".gitignore").write_text("build/\n")
    sh(seed, "add", ".")
    sh(seed, "commit", "-qm", "first")
    sh(seed, "push", "-q", "origin", "main")
    a, b = tmp_path / "a", tmp_path / "b"
    sh(tmp_path, "clone", "-q", str(origin), str(a))
    sh(tmp_path, "clone", "-q", str(origin), str(b))
    return origin, a, b


def saved_of(taken) -> SavedTree:
    snapshot = None if taken.archive is None else Snapshot("o", taken.files, len(taken.archive),
                                                           "x")
    return SavedTree(taken.base_commit, taken.branch, taken.clean, snapshot,
                     [LeftOut(p, w) for p, w in taken.left_out], taken.over_limit, None)


def work(a: Path) -> None:
    """An engine's work: a tracked file edited, one deleted, a binary changed, new files
    (one in a new folder), and secrets it printed to files."""
    (a / "src" / "board.py").write_text("BOARD = 8\nCASTLING = True\n")
    (a / "README.md").unlink()
    (a / "logo.bin").write_bytes(BINARY[::-1])
    (a / "src" / "moves").mkdir()
    (a / "src" / "moves" / "castle.py").write_text("def castle():\n    return 'O-O'\n")
    (a / "run.sh").write_text("#!/bin/sh\necho go\n")
    (a / "run.sh").chmod(0o755)
    (a / ".env").write_text("DATABASE_URL=postgres://admin:hunter2@db/app\n")
    (a / "deploy.txt").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")


def tree_of(checkout: Path) -> dict[str, bytes]:
    return {str(p.relative_to(checkout)): p.read_bytes() for p in checkout.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(checkout).parts}


async def test_the_work_arrives_byte_for_byte_and_secret_files_are_left_out(machines):
    _, a, b = machines
    work(a)
    taken = await take(a)
    assert not taken.clean and taken.archive is not None and not taken.over_limit
    assert sorted(taken.left_out) == [(".env", "an environment file"),
                                      ("deploy.txt", "a private key")]
    outcome = await apply_tree(b, saved_of(taken), taken.archive)
    assert outcome.applied and outcome.files == 5
    expected = {k: v for k, v in tree_of(a).items() if k not in (".env", "deploy.txt")}
    assert tree_of(b) == expected
    assert os.access(b / "run.sh", os.X_OK)
    assert await head(b) == await head(a)  # the same commit, on the same branch


async def test_a_clean_tree_stores_nothing_and_puts_the_checkout_at_its_commit(machines):
    origin, a, b = machines
    (a / "later.txt").write_text("later\n")
    sh(a, "add", ".")
    sh(a, "commit", "-qm", "later")
    sh(a, "push", "-q", "origin", "main")
    taken = await take(a)
    assert taken.clean and taken.archive is None
    outcome = await apply_tree(b, saved_of(taken), None)  # b must fetch the commit
    assert outcome.applied and outcome.files == 0
    assert (b / "later.txt").read_text() == "later\n"


async def test_the_targets_own_uncommitted_changes_are_never_touched(machines):
    _, a, b = machines
    work(a)
    taken = await take(a)
    (b / "README.md").write_text("# mine\n")
    before = tree_of(b)
    outcome = await apply_tree(b, saved_of(taken), taken.archive)
    assert (outcome.applied, outcome.reason) == (False, "own_changes")
    assert tree_of(b) == before


async def test_a_base_commit_nobody_can_fetch_applies_nothing(machines):
    _, a, b = machines
    (a / "local.txt").write_text("never pushed\n")
    sh(a, "add", ".")
    sh(a, "commit", "-qm", "local only")
    work(a)
    taken = await take(a)
    before = (await head(b), tree_of(b))
    outcome = await apply_tree(b, saved_of(taken), taken.archive)
    assert (outcome.applied, outcome.reason) == (False, "base_missing")
    assert (await head(b), tree_of(b)) == before


async def test_an_ignored_file_in_the_way_is_a_conflict_and_nothing_changes(machines):
    _, a, b = machines
    (a / ".gitignore").write_text("")  # on a, build/ is not ignored any more, but committed
    sh(a, "commit", "-qam", "nothing ignored")
    sh(a, "push", "-q", "origin", "main")
    (a / "build").mkdir()
    (a / "build" / "out.txt").write_text("theirs\n")
    (a / "src" / "board.py").write_text("BOARD = 9\n")
    taken = await take(a)
    sh(b, "pull", "-q")
    (b / ".git" / "info" / "exclude").write_text("build/\n")  # ignored on b alone
    (b / "build").mkdir()
    (b / "build" / "out.txt").write_text("mine\n")
    before = (await head(b), tree_of(b))
    outcome = await apply_tree(b, saved_of(taken), taken.archive)
    assert (outcome.applied, outcome.reason, outcome.detail) == (
        False, "conflict", "build/out.txt")
    assert (await head(b), tree_of(b)) == before
    assert not (b / ".git" / MARKER).exists()


async def test_a_tree_over_the_limits_is_not_stored(machines):
    _, a, _ = machines
    work(a)
    by_files = await take(a, Limits(max_files=3))
    by_bytes = await take(a, Limits(max_bytes=1000))
    for taken in (by_files, by_bytes):
        assert taken.over_limit and taken.archive is None and taken.files == 5
    outcome = await apply_tree(a, saved_of(by_files), None)
    assert (outcome.applied, outcome.reason) == (False, "over_limit")


async def test_an_unreadable_snapshot_or_no_checkout_changes_nothing(machines, tmp_path):
    _, a, b = machines
    work(a)
    taken = await take(a)
    before = tree_of(b)
    assert (await apply_tree(b, saved_of(taken), None)).reason == "unreadable"
    assert (await apply_tree(b, saved_of(taken), b"not a tar")).reason == "unreadable"
    assert (await apply_tree(tmp_path / "nowhere", saved_of(taken),
                             taken.archive)).reason == "no_checkout"
    assert tree_of(b) == before


KILLED_MID_APPLY = textwrap.dedent("""
    import asyncio, os, pickle, signal, sys
    from seedline_runner.worktree import apply
    saved, archive = pickle.loads(open(sys.argv[2], "rb").read())
    written = 0
    real_write = apply._write
    def write_then_die(tar, member, target):
        global written
        real_write(tar, member, target)
        written += 1
        if written == 2:  # the patch applied, two new files written: killed here
            os.kill(os.getpid(), signal.SIGKILL)
    apply._write = write_then_die
    asyncio.run(apply.apply_tree(__import__("pathlib").Path(sys.argv[1]), saved, archive))
""")


async def test_a_runner_killed_mid_apply_leaves_nothing_half_applied(machines, tmp_path):
    import pickle

    _, a, b = machines
    work(a)
    taken = await take(a)
    before = (await head(b), tree_of(b))
    state = tmp_path / "carried.pickle"
    state.write_bytes(pickle.dumps((saved_of(taken), taken.archive)))
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_APPLY, str(b), str(state)],
                            capture_output=True)
    assert killed.returncode == -signal.SIGKILL
    assert (b / ".git" / MARKER).exists() and tree_of(b) != before[1]  # half done
    assert await recover(b)  # what a runner does when it starts again
    assert (await head(b), tree_of(b)) == before
    assert await changed_paths(b) == ([], [])
    # And then the whole tree applies.
    assert (await apply_tree(b, saved_of(taken), taken.archive)).applied


async def test_a_failure_mid_apply_rolls_back_in_place(machines, monkeypatch):
    from seedline_runner.worktree import apply

    _, a, b = machines
    work(a)
    taken = await take(a)
    before = (await head(b), tree_of(b))

    def full_disk(tar, member, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(apply, "_write", full_disk)
    outcome = await apply_tree(b, saved_of(taken), taken.archive)
    assert not outcome.applied and "No space left" in outcome.detail
    assert (await head(b), tree_of(b)) == before
    assert await changed_paths(b) == ([], [])
    await asyncio.sleep(0)
