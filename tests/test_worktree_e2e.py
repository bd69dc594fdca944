"""A conversation moves whole (CONTRACT.md 1.3), end to end: two machines, each with its own
clone of one repo; what the engine left uncommitted on the first arrives on the second byte
for byte, and the reply, the notice, the brief and the engine's first prompt say what came
along. When it cannot arrive, nothing is changed and every one of them says why."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from seedline_contracts import subjects
from seedline_platform.saved_objects import object_names
from seedline_runner.checkouts import Checkouts

pytestmark = [pytest.mark.servers]

REPO = "apps/chess-academy"
INSTANCE = "bd43f4de"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          env={**os.environ, **GIT_ENV}).stdout.decode()


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path]:
    """Repos folders of two machines, each holding a clone of the same repo."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(origin), str(seed))
    (seed / "board.py").write_text("BOARD = 8\n")
    git(seed, "add", ".")
    git(seed, "commit", "-qm", "first")
    git(seed, "push", "-q", "origin", "main")
    folders = []
    for machine in ("mac", "linux"):
        folder = tmp_path / machine
        (folder / "apps").mkdir(parents=True)
        git(tmp_path, "clone", "-q", str(origin), str(folder / REPO))
        folders.append(folder)
    return folders[0], folders[1]


async def relocate(system, session_id: str, node_id: str) -> dict:
    return await system.request(subjects.API_SESSIONS_RELOCATE,
                                {"session_id": session_id, "node_id": node_id}, timeout=30)


async def test_the_work_moves_with_the_conversation_and_everyone_is_told(system, clones):
    mac, linux = clones
    await system.start_runner("mac-mini-1", "Mac mini", checkouts=Checkouts(repos_dir=mac))
    engine = await system.start_runner("linux-2", "Linux box",
                                       checkouts=Checkouts(repos_dir=linux))
    await system.append(1)
    opened = await system.open(instruction="Add castling")
    assert opened["ok"], opened
    # What the engine did in its checkout, and a secret it printed to a file.
    (mac / REPO / "board.py").write_text("BOARD = 8\nCASTLING = True\n")
    (mac / REPO / "castle.py").write_text("def castle():\n    return 'O-O'\n")
    (mac / REPO / ".env").write_text("TOKEN=not-for-a-brief\n")

    moved = await relocate(system, opened["session_id"], "linux-2")
    assert moved["ok"], moved
    for name in ("board.py", "castle.py"):
        assert (linux / REPO / name).read_bytes() == (mac / REPO / name).read_bytes()
    assert not (linux / REPO / ".env").exists()
    carried = moved["carried"]
    assert (carried["from_label"], carried["files"], carried["applied"], carried["left_out"]) == (
        "Mac mini", 2, True, [".env"])
    # The scripted engine's record is its process's own: it cannot travel, so the engine
    # there is briefed (the real CLIs' records do: tests/engines/test_moves_whole.py).
    assert not carried["record_placed"]
    assert (moved["continuity"]["reason_code"], moved["outcome"]) == ("other_machine", "briefed")
    for register in ("chat", "console", "mcp"):
        assert "saved on Mac mini (2 files) came along and were applied" in (
            moved["notice"][register])
    (saved,) = await system.session_events("worktree_saved")
    assert saved["node_id"] == "mac-mini-1" and saved["label"] == "Mac mini"
    assert saved["worktree"]["snapshot"]["files"] == 2
    (arrived,) = await system.session_events("worktree_applied")
    assert arrived["worktree"]["applied"] and arrived["from_node"] == "mac-mini-1"
    # The brief names what was saved, and the machine's own line follows it, before the
    # instruction (the engine on the second machine read both).
    brief = await system.request(subjects.API_BRIEFS_GET, {"session_id": opened["session_id"]})
    assert "This conversation moved here from another machine" in brief["text"]
    assert "The working tree comes from Mac mini" in brief["text"]
    assert ".env" in brief["text"] and "It is not that conversation" not in brief["text"]
    await system.append(2, session_id=opened["session_id"], kind="chat_user",
                        content="Next: en passant", entry_id="next")
    await system.wait_for(lambda: _prompted(engine))
    (_, prompt), = engine.prompts
    assert prompt.index("The working tree comes from") < prompt.index(
        "were applied to this checkout") < prompt.index("Next: en passant")
    # Every object of the instance goes with a forget.
    js = system.nc.jetstream()
    assert await object_names(js, subjects.worktree_prefix(INSTANCE))


async def _prompted(engine):
    return bool(engine.prompts)


async def test_a_target_with_changes_of_its_own_keeps_them_and_everyone_is_told(system, clones):
    mac, linux = clones
    await system.start_runner("mac-mini-1", "Mac mini", checkouts=Checkouts(repos_dir=mac))
    await system.start_runner("linux-2", "Linux box", checkouts=Checkouts(repos_dir=linux))
    await system.append(1)
    opened = await system.open()
    (mac / REPO / "board.py").write_text("BOARD = 10\n")
    (linux / REPO / "board.py").write_text("BOARD = 12, mine\n")
    moved = await relocate(system, opened["session_id"], "linux-2")
    assert moved["ok"], moved
    assert (linux / REPO / "board.py").read_text() == "BOARD = 12, mine\n"
    carried = moved["carried"]
    assert (carried["applied"], carried["reason"]) == (False, "own_changes")
    assert "changes of its own, which were left as they are" in moved["notice"]["console"]
    (arrived,) = await system.session_events("worktree_applied")
    assert arrived["worktree"]["reason"] == "own_changes"


async def test_forgetting_an_instance_deletes_its_saved_trees(system, clones):
    mac, linux = clones
    await system.start_runner("mac-mini-1", "Mac mini", checkouts=Checkouts(repos_dir=mac))
    await system.start_runner("linux-2", "Linux box", checkouts=Checkouts(repos_dir=linux))
    await system.append(1)
    opened = await system.open()
    (mac / REPO / "notes.txt").write_text("kept until forgotten\n")
    stop = await system.request(subjects.API_SESSIONS_STOP, {"session_id": opened["session_id"],
                                                            "reason": "done"})
    assert stop["ok"]
    js = system.nc.jetstream()
    prefix = subjects.worktree_prefix(INSTANCE)
    await system.wait_for(lambda: object_names(js, prefix))
    forgot = await system.request(subjects.API_INSTANCES_FORGET,
                                  {"instance_id": INSTANCE, "reason": "asked to"}, timeout=30)
    assert forgot["ok"], forgot
    assert await object_names(js, prefix) == []


async def seedline(system, *args: str) -> tuple[int, str, str]:
    import asyncio
    import sys

    env = {**os.environ, "SEEDLINE_NATS_URL": system.settings.nats_url}
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "seedline"), *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    return process.returncode, out.decode(), err.decode()


async def test_a_save_is_shown_and_applied_to_a_checkout_by_hand(system, clones, tmp_path):
    mac, linux = clones
    await system.start_runner("mac-mini-1", "Mac mini", checkouts=Checkouts(repos_dir=mac))
    await system.append(1)
    opened = await system.open()
    (mac / REPO / "board.py").write_text("BOARD = 11\n")
    assert (await system.request(subjects.API_SESSIONS_STOP,
                                 {"session_id": opened["session_id"], "reason": "done"}))["ok"]
    await system.wait_for(lambda: system.session_events("worktree_saved"))
    code, shown, _ = await seedline(system, "worktree", "show", opened["session_id"])
    assert code == 0 and "saved on Mac mini" in shown and "1 file (" in shown
    code, said, err = await seedline(system, "worktree", "apply", opened["session_id"],
                                     "--to", str(linux / REPO))
    assert code == 0, err
    assert "were applied to this checkout" in said
    assert (linux / REPO / "board.py").read_text() == "BOARD = 11\n"
    # Again: the checkout now has the changes as its own, which are never overwritten.
    code, said, _ = await seedline(system, "worktree", "apply", opened["session_id"],
                                   "--to", str(linux / REPO))
    assert code == 1 and "changes of its own" in said
