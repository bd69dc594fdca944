"""`seedline capture claude` follows a Claude Code conversation a person runs by hand.

The real Claude Code CLI runs against the Messages API stand-in, started by the test as
a person would start it (no runner around it), while `seedline capture` runs as the real
command in its own process. Every line reaches the timeline soon after Claude Code
writes it; a capture stopped and started again goes on with what was written while it
was down; a later `seedline import` of the same file adds nothing; and nothing of it
wakes the repo, which a runner has worked on before (so a person's message would).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from seedline_cli.transcripts import claude as claude_transcript
from seedline_cli.transcripts import codex as codex_transcript
from seedline_contracts import subjects
from seedline_contracts.times import parse_rfc3339

pytestmark = pytest.mark.servers

INSTANCE = "bd43f4de"
REPO = "apps/chess-academy"


def cli_env(system) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", ""), "SEEDLINE_NATS_URL": system.settings.nats_url,
           "SEEDLINE_HOME": str(system.settings.home), "HOME": os.environ.get("HOME", "/")}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


async def start_capture(system, folder: Path, state: Path, engine: str = "claude"):
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "seedline_cli", "capture", engine, str(folder),
        "--instance", INSTANCE, "--repo", REPO, "--state", str(state), "--interval", "0.2",
        env=cli_env(system), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    first = await asyncio.wait_for(process.stdout.readline(), 60)
    assert first.startswith(b"Following"), first + await process.stderr.read()
    return process


async def stop_capture(process) -> None:
    process.send_signal(signal.SIGTERM)
    await asyncio.wait_for(process.wait(), 30)


async def claude_by_hand(claude, workdir: Path, prompt: str, *extra: str) -> str:
    process = await asyncio.create_subprocess_exec(
        str(claude.executable), "-p", prompt, "--output-format", "stream-json", "--verbose",
        "--allowedTools", "Bash", *extra, cwd=workdir, env=claude.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, errors = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, errors.decode()
    return json.loads(out.splitlines()[0])["session_id"]


class TimelineWatch:
    """When each entry of the repo was first readable, polled every 50 ms."""

    def __init__(self, system) -> None:
        self.system = system
        self.seen: dict[str, datetime] = {}
        self.rows: list[dict] = []
        self._task = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            reply = await self.system.request(subjects.API_TIMELINE_READ, {
                "instance_id": INSTANCE, "repo": REPO, "limit": 1000})
            now = datetime.now(timezone.utc)
            self.rows = reply["entries"]
            for row in self.rows:
                self.seen.setdefault(row["entry_id"], now)
            await asyncio.sleep(0.05)

    async def until_all(self, ids: list[str]) -> None:
        async def all_seen():
            return all(entry_id in self.seen for entry_id in ids)
        await self.system.wait_for(all_seen, timeout=30)

    def stop(self) -> None:
        self._task.cancel()


async def test_a_conversation_run_by_hand_is_captured_as_it_happens_once_and_wakes_nothing(
    system, claude, checkouts, tmp_path
):
    # The repo has a machine that worked on it and nothing live: a person's message would
    # wake it, so only `origin: "import"` keeps the captured messages from doing so.
    engine = await system.start_runner()
    opened = await system.open(instruction="Set up the board")
    assert opened["ok"], opened
    await system.request(subjects.API_SESSIONS_STOP, {"session_id": opened["session_id"],
                                                     "reason": "done"})
    projects = claude.home / "projects"
    projects.mkdir(parents=True)
    state = tmp_path / "capture-state.json"
    workdir = checkouts / REPO
    watch = TimelineWatch(system)
    capture = await start_capture(system, projects, state)
    try:
        claude.standin.tool_commands = ["echo one", "sleep 1; echo two"]
        conversation = await claude_by_hand(claude, workdir, "Add castling")
        [path] = claude.transcripts()
        first = claude_transcript.parse(enumerate(path.read_text().splitlines(), start=1))
        await watch.until_all([item.entry_id for item in first.items])
        lags = [(watch.seen[item.entry_id] - parse_rfc3339(item.at)).total_seconds()
                for item in first.items]

        # Stopped, the person goes on; started again, the capture reads on from its state.
        await stop_capture(capture)
        claude.standin.tool_commands = []
        await claude_by_hand(claude, workdir, "Now add en passant", "--resume", conversation)
        capture = await start_capture(system, projects, state)
        whole = claude_transcript.parse(enumerate(path.read_text().splitlines(), start=1))
        await watch.until_all([item.entry_id for item in whole.items])
    finally:
        await stop_capture(capture)
    again = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "seedline_cli", "import", "claude", str(path), "--instance",
        INSTANCE, "--repo", REPO, "--json", env=cli_env(system),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, errors = await asyncio.wait_for(again.communicate(), 60)
    imported = json.loads(out)
    await asyncio.sleep(1)  # the gateway has seen every captured entry by now
    watch.stop()

    print(f"capture lag per entry (s): max {max(lags):.2f}, "
          f"mean {sum(lags) / len(lags):.2f}, over {len(lags)} entries")
    captured = [row for row in watch.rows if row["session_id"] == conversation]
    assert [(r["entry_id"], r["kind"], r["content"]) for r in captured] == [
        (i.entry_id, i.kind, i.content) for i in whole.items]
    assert [i.kind for i in whole.items].count("chat_user") == 2
    assert (imported["imported"], imported["duplicates"]) == (0, len(whole.items)), errors
    # Nothing woken, nothing delivered: the runner's engine had the open's instruction
    # only, and the model stand-in only the two runs made by hand.
    assert [prompt for _, prompt in engine.prompts] == ["Set up the board"]
    assert await system.session_events("wake_requested") == []
    assert [prompts[-1] for prompts in claude.standin.prompts_seen()][-1] == "Now add en passant"


async def codex_by_hand(codex, workdir: Path, prompt: str) -> None:
    process = await asyncio.create_subprocess_exec(
        str(codex.executable), "exec", "--json", "--skip-git-repo-check", "-", cwd=workdir,
        env=codex.env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, errors = await asyncio.wait_for(process.communicate(prompt.encode()), 120)
    assert process.returncode == 0, errors.decode()


async def test_a_codex_thread_run_by_hand_is_captured_once_and_wakes_nothing(
    system, codex, checkouts, tmp_path
):
    engine = await system.start_runner()
    opened = await system.open(instruction="Set up the board")
    assert opened["ok"], opened
    await system.request(subjects.API_SESSIONS_STOP, {"session_id": opened["session_id"],
                                                     "reason": "done"})
    rollouts = codex.home / "sessions"
    rollouts.mkdir(parents=True)
    watch = TimelineWatch(system)
    capture = await start_capture(system, rollouts, tmp_path / "state.json", "codex")
    try:
        codex.standin.tool_commands = ["ls", "false"]
        await codex_by_hand(codex, checkouts / REPO, "Add castling")
        [path] = codex.rollouts()
        whole = codex_transcript.parse(enumerate(path.read_text().splitlines(), start=1))
        await watch.until_all([item.entry_id for item in whole.items])
    finally:
        await stop_capture(capture)
    again = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "seedline_cli", "import", "codex", str(path), "--instance",
        INSTANCE, "--repo", REPO, "--json", env=cli_env(system),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, errors = await asyncio.wait_for(again.communicate(), 60)
    await asyncio.sleep(1)
    watch.stop()

    captured = [row for row in watch.rows if row["session_id"] == whole.session_id]
    assert [(r["entry_id"], r["kind"], r["content"]) for r in captured] == [
        (i.entry_id, i.kind, i.content) for i in whole.items]
    assert [i.kind for i in whole.items].count("chat_user") == 1
    assert sum(i.content.startswith("[tool error]") for i in whole.items) == 1
    imported = json.loads(out)
    assert (imported["imported"], imported["duplicates"]) == (0, len(whole.items)), errors
    assert [prompt for _, prompt in engine.prompts] == ["Set up the board"]
    assert await system.session_events("wake_requested") == []
