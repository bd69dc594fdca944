"""A conversation moves whole with the real Claude Code and Codex CLIs (CONTRACT.md 1.3).

Two machines, each a runner with its own repos folder holding a clone of one repo and its
own engine home: the engine on the first edits a tracked file and makes a new one through
its own shell tool; the conversation is relocated; on the second machine the files are
there byte for byte, the engine's own record was placed where its CLI looks, and the CLI
continues its own conversation from it: the stand-in model is sent the first prompt again
with the next one (asserted on what the model received, not on what the runner believes).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import nats
import pytest

from seedline_contracts import subjects
from seedline_runner import Checkouts, Runner
from seedline_runner.engines import ClaudeEngine, CodexEngine

from .conftest import CODEX_CONFIG, REPO, cli_env, engine_cli

pytestmark = [pytest.mark.servers, pytest.mark.slow]

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
# What the engine does in its checkout: a tracked file edited, a new one made.
WORK = ("printf 'BOARD = 8\\nCASTLING = True\\n' > board.py && "
        "printf 'def castle():\\n    return 1\\n' > castle.py")


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, **GIT_ENV})


def clones(tmp_path: Path) -> tuple[Path, Path]:
    origin, seed = tmp_path / "origin.git", tmp_path / "seed"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(seed))
    (seed / "board.py").write_text("BOARD = 8\n")
    git(seed, "add", ".")
    git(seed, "commit", "-qm", "first")
    git(seed, "push", "-q", "origin", "main")
    folders = []
    for machine in ("one", "two"):
        (tmp_path / machine / REPO).parent.mkdir(parents=True)
        git(tmp_path, "clone", "-q", str(origin), str(tmp_path / machine / REPO))
        folders.append(tmp_path / machine)
    return folders[0], folders[1]


def claude_engine(tmp_path: Path, machine: str, standin) -> ClaudeEngine:
    home = tmp_path / machine / "claude-config"
    env = cli_env.claude_env(tmp_path / machine / "home", home, standin.base_url)
    return ClaudeEngine(executable=str(engine_cli("claude")), env=env, claude_home=home,
                        extra_args=["--allowedTools", "Bash"])


def codex_engine(tmp_path: Path, machine: str, standin) -> CodexEngine:
    home = tmp_path / machine / "codex-home"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(CODEX_CONFIG.format(base_url=standin.base_url))
    env = cli_env.base_env(tmp_path / machine / "home") | {
        "CODEX_HOME": str(home), "STANDIN_API_KEY": "sk-stand-in"}
    return CodexEngine(executable=str(engine_cli("codex")), env=env, codex_home=home,
                       extra_args=["--skip-git-repo-check", "--sandbox", "workspace-write"])


@pytest.fixture(params=["claude", "codex"])
def engine_kind(request):
    standin = request.getfixturevalue("anthropic" if request.param == "claude" else "responses")
    make = claude_engine if request.param == "claude" else codex_engine
    return request.param, make, standin


async def test_the_engine_s_work_and_its_record_move_and_it_continues_its_own_conversation(
        system, engine_kind, tmp_path):
    name, make, standin = engine_kind
    one, two = clones(tmp_path)
    for node, label, folder in (("one", "Machine one", one), ("two", "Machine two", two)):
        nc = await nats.connect(system.settings.nats_url)
        runner = Runner(nc, node, label, {name: make(tmp_path, node, standin)},
                        presence_interval=1.0, checkouts=Checkouts(repos_dir=folder))
        await runner.start()
        system.runners[node] = (runner, nc)

        async def close(runner=runner, nc=nc):
            await runner.stop()
            await nc.close()

        system.stack.push_async_callback(close)
    standin.tool_commands = [WORK]
    opened = await system.open(engine=name, node_id="one", instruction="Add castling")
    assert opened["ok"], opened
    session = opened["session_id"]
    await system.wait_for(lambda: _replied(system, session, 2), timeout=120)  # step, answer
    assert (one / REPO / "castle.py").exists()  # the engine's own tool wrote it
    standin.tool_commands = []
    # The CLI writes its own record of the answer after printing it: a move made before
    # that carries a record without the turn, which is honestly no resume.
    record_home = tmp_path / "one" / ("claude-config" if name == "claude" else "codex-home")
    answer = await _newest_answer(system, session)
    await system.wait_for(lambda: _record_holds(record_home, answer), timeout=30)

    moved = await system.request(subjects.API_SESSIONS_RELOCATE,
                                 {"session_id": session, "node_id": "two"}, timeout=60)
    assert moved["ok"], moved
    for path in ("board.py", "castle.py"):
        assert (two / REPO / path).read_bytes() == (one / REPO / path).read_bytes()
    assert moved["continuity"]["reason_code"] == "resume_moved", moved["continuity"]
    assert moved["carried"]["applied"] and moved["carried"]["record_placed"], moved["carried"]
    assert moved["outcome"] == "resumed", moved
    assert "The engine's own record of the conversation came along too" in (
        moved["notice"]["console"])

    asked = len(standin.prompts_seen())
    await system.append(2, session_id=session, kind="chat_user", content="Now en passant",
                        entry_id="next", engine=None)
    await system.wait_for(lambda: _asked(standin, asked), timeout=120)
    # The model was sent the first prompt again with the next one: the CLI on the second
    # machine read the conversation from the record that came along.
    last = standin.prompts_seen()[-1]
    assert last[0] == "Add castling" and "Now en passant" in last[-1], last
    assert "were applied to this checkout" in last[-1]  # the machine's line, before it


async def _replied(system, session_id: str, count: int) -> bool:
    rows = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": "bd43f4de", "repo": REPO, "session_id": session_id})
    return len([r for r in rows["entries"] if r["kind"] == "chat_assistant"]) >= count


async def _newest_answer(system, session_id: str) -> str:
    rows = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": "bd43f4de", "repo": REPO, "session_id": session_id})
    return [r["content"] for r in rows["entries"] if r["kind"] == "chat_assistant"][-1]


async def _record_holds(home: Path, text: str) -> bool:
    """Whether an engine's own record (its .jsonl files under `home`) holds `text`."""
    needle = json.dumps(text)[1:-1][:80]
    return any(needle in path.read_text(encoding="utf-8", errors="replace")
               for path in home.rglob("*.jsonl"))


async def _asked(standin, before: int) -> bool:
    return len(standin.prompts_seen()) > before