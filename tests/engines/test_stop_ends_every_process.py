"""A stop, or a runner killed, in the middle of a tool: nothing of the conversation runs on.

The real Claude Code and Codex CLIs run a tool the stand-in model asks for: a shell
command that notes it has started, starts a helper in a session of its own (as
daemonising tools do), sleeps, and then writes a file; the helper writes one too.
A stop in the middle of that command, and a SIGKILL of the runner process in the
middle of it followed by a new start, must leave no process of the conversation and
no file written after the stop's reply (or after the new runner's cleanup), and what
the engine recorded in its own transcript must be in the timeline.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import nats
import psutil
import pytest

from seedline_contracts import subjects
from seedline_runner import Checkouts, Runner
from seedline_runner.engines import ClaudeEngine, CodexEngine

pytestmark = pytest.mark.servers

INSTANCE = "bd43f4de"
REPO = "apps/chess-academy"
TOOL_SECONDS = 4
# Marks every process of one test's conversation: the tools inherit it from the CLI.
TAG = "SEEDLINE_TEST_CONVERSATION"


def tool_command(folder: Path, seconds: int = TOOL_SECONDS) -> str:
    return (
        f"echo started > {folder}/started; "
        f"setsid sh -c 'sleep {seconds}; echo late > {folder}/detached' & "
        f"sleep {seconds}; echo done > {folder}/written"
    )


def conversation_processes(tag: str, runners: tuple = ()) -> list[int]:
    """Live processes (zombies aside) whose environment carries this test's tag.

    ``runners``: runner processes, which carry it too (they get the CLI's environment)."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and int(entry.name) not in {r.pid for r in runners}:
            found.append(int(entry.name))
    return found


@pytest.fixture(params=["claude", "codex"])
def cli(request, tmp_path, checkouts):
    """The engine's name, its setup, the runner options that allow its shell tool."""
    if not Path("/proc/self/environ").exists():
        pytest.skip("needs /proc to find the conversation's processes")
    setup = request.getfixturevalue(request.param)
    setup.env[TAG] = str(tmp_path)
    if request.param == "claude":
        args = ["--allowedTools", "Bash"]
    else:
        # The sandbox would refuse the helper's writes; the point is that it runs.
        args = ["--skip-git-repo-check", "--sandbox", "danger-full-access"]
    return request.param, setup, args


def engine_for(name: str, setup, args: list[str]):
    if name == "claude":
        return ClaudeEngine(executable=str(setup.executable), env=setup.env,
                            claude_home=setup.home, extra_args=args)
    return CodexEngine(executable=str(setup.executable), env=setup.env,
                       codex_home=setup.home, extra_args=args)


def engine_said(name: str, setup) -> list[tuple[str, str]]:
    """The tool calls the engine recorded in its own transcript, as the timeline shows them."""
    said = []
    if name == "claude":
        for transcript in setup.transcripts():
            for line in transcript.read_text().splitlines():
                record = json.loads(line)
                content = (record.get("message") or {}).get("content")
                for block in content if isinstance(content, list) else []:
                    if block.get("type") == "tool_use":
                        said.append(("command", f"Bash: {block['input']['command']}"))
    else:
        for rollout in setup.rollouts():
            for line in rollout.read_text().splitlines():
                payload = json.loads(line).get("payload") or {}
                if payload.get("type") == "function_call":
                    said.append(("command", json.loads(payload["arguments"])["cmd"]))
    return said


async def engine_recorded_a_call(system, name: str, setup) -> None:
    """Until the engine's own transcript holds the tool call it is running. The engine writes
    it as it can, on a loaded machine after the tool has started; a kill before that leaves
    no record to hold the timeline against (seen once in a full run, Claude Code)."""

    async def recorded():
        return engine_said(name, setup) or None

    await system.wait_for(recorded, timeout=30)


def as_in_timeline(name: str, said: list[tuple[str, str]], entries: list[dict]) -> bool:
    commands = [e["content"] for e in entries if e["kind"] == "command"]
    if name == "claude":
        return all(content in commands for _, content in said)
    # Codex names the command as its shell ran it (`/bin/bash -lc '...'`, quoted its own
    # way), and a command read back from its rollout is quoted as Python quotes: count.
    return len(commands) == len(said)


async def timeline(system, session_id: str) -> list[dict]:
    reply = await system.request(subjects.API_TIMELINE_READ, {
        "instance_id": INSTANCE, "repo": REPO, "session_id": session_id, "limit": 1000})
    assert reply["ok"], reply
    return reply["entries"]


async def wait_for_file(path: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path.name} did not appear in time")
        await asyncio.sleep(0.05)


async def wait_until(check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the engine did not get that far in time")
        await asyncio.sleep(0.02)


def written_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "started")


async def test_a_stop_mid_tool_ends_every_process_before_it_replies(
    system, cli, checkouts, tmp_path
):
    name, setup, args = cli
    node = f"contain-stop-{name}"
    out = tmp_path / "out"
    out.mkdir()
    setup.standin.tool_commands = [tool_command(out)]
    nc = await nats.connect(system.settings.nats_url)
    runner = Runner(nc, node, "Linux box", {name: engine_for(name, setup, args)},
                    checkouts=Checkouts(repos_dir=checkouts), presence_interval=1.0)
    await runner.start()
    try:
        opened = await system.open(engine=name, node_id=node, instruction="Run the step")
        assert opened["ok"], opened
        await wait_for_file(out / "started")
        await engine_recorded_a_call(system, name, setup)

        reply = await system.request(subjects.API_SESSIONS_STOP,
                                     {"session_id": opened["session_id"], "reason": "requested"})
        left_at_reply = conversation_processes(str(tmp_path))
        # Longer than the tool needed: anything still running would have written by now.
        await asyncio.sleep(TOOL_SECONDS + 2)

        assert reply == {"ok": True, "stopped": True}
        assert left_at_reply == []
        assert conversation_processes(str(tmp_path)) == []
        assert written_files(out) == []
        said = engine_said(name, setup)
        assert as_in_timeline(name, said, await timeline(system, opened["session_id"]))
    finally:
        await runner.stop()
        await nc.close()


async def start_runner_process(system, name, setup, args, checkouts, home, log: Path, node):
    env = setup.env | {
        "SEEDLINE_NATS_URL": system.settings.nats_url,
        "SEEDLINE_HOME": str(home),
        "PYTHONUNBUFFERED": "1",
    }
    if "PYTHONPATH" in os.environ:  # the same code as the test's own process
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    kv = await system.nc.jetstream().key_value(subjects.RUNNERS_BUCKET)
    # A killed runner's presence outlives it (until its TTL): only a new one counts.
    await kv.delete(subjects.presence_key(node))
    option = "--claude-arg" if name == "claude" else "--codex-arg"
    engine_args = [f"{option}={arg}" for arg in args if arg != "--skip-git-repo-check"]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "seedline_cli", "runner",
        "--node-id", node, "--label", "Linux box", "--engine", name,
        f"--{name}-bin", str(setup.executable), *engine_args,
        "--repos-dir", str(checkouts),
        env=env, stdout=log.open("ab"), stderr=asyncio.subprocess.STDOUT,
    )

    async def present():
        if process.returncode is not None:
            raise AssertionError(f"the runner exited: {log.read_text()[-2000:]}")
        try:
            return (await kv.get(subjects.presence_key(node))).value
        except Exception:
            return None

    await system.wait_for(present, timeout=60)
    return process


async def test_a_runner_killed_mid_tool_leaves_nothing_running_and_its_tail_is_published(
    system, cli, checkouts, tmp_path
):
    name, setup, args = cli
    node = f"contain-kill-{name}"
    out = tmp_path / "out"
    out.mkdir()
    home = tmp_path / "seedline-home"
    log = tmp_path / "runner.log"
    second = tool_command(out)
    setup.standin.tool_commands = ["echo step-1", second]
    runner = await start_runner_process(system, name, setup, args, checkouts, home, log, node)
    again = None
    try:
        opened = await system.open(engine=name, node_id=node, instruction="Run the steps")
        assert opened["ok"], opened
        # Frozen once the engine has its prompt, the runner publishes nothing more while
        # its engine goes on: a step, then the second tool call. Then it dies in the
        # middle of that tool.
        await wait_until(lambda: setup.standin.requests)
        runner.send_signal(signal.SIGSTOP)
        await wait_for_file(out / "started")
        if name == "claude":
            # The tail is read from Claude Code's own transcript, which it writes a moment
            # after its output: the kill comes once the file holds the five records.
            await wait_until(lambda: len(setup.transcript_ids()) >= 6)
        runner.send_signal(signal.SIGKILL)
        await runner.wait()
        # Its keeper ended the conversation's processes as it died.
        await asyncio.sleep(TOOL_SECONDS + 2)
        left_while_down = conversation_processes(str(tmp_path))
        written_while_down = written_files(out)

        again = await start_runner_process(system, name, setup, args, checkouts, home, log,
                                           node)

        async def published():
            found = [e for e in await timeline(system, opened["session_id"])
                     if e["kind"] != "chat_user"]
            return found if len(found) >= 5 else None

        await system.wait_for(published, timeout=30)
        # Read again once the runner says it published the whole tail: a step published
        # under other ids than live publishing gives would be there twice by now.
        async def tail_published():
            return "engine_transcript_published" in log.read_text()

        await system.wait_for(tail_published, timeout=30)
        entries = await system.wait_for(published, timeout=30)

        assert (left_while_down, written_while_down) == ([], [])
        assert conversation_processes(str(tmp_path), (again,)) == []
        # What the engine recorded before it was ended, each entry once, with the ids
        # live publishing gives.
        assert [e["kind"] for e in entries] == [
            "chat_assistant", "command", "terminal", "chat_assistant", "command"]
        ids = [e["entry_id"] for e in entries]
        if name == "claude":
            # Claude Code's records carry their own ids, which the live stream uses too.
            assert len(set(ids)) == 5 and all(i.startswith("claude:") for i in ids), ids
        else:
            assert ids == [f"{opened['session_id']}:launch:{n}" for n in range(5)]
        assert entries[0]["content"] == "step 1: running echo step-1"
        assert "echo step-1" in entries[1]["content"]
        assert entries[2]["content"].strip() == "step-1"
        assert entries[3]["content"] == f"step 2: running {second}"
        assert f"{out}/started" in entries[4]["content"]  # however the shell quoted it
    finally:
        for process in (runner, again):
            if process is not None and process.returncode is None:
                process.terminate()  # a clean stop: it tidies its cgroups away
                await process.wait()


async def test_a_runner_started_again_ends_what_its_dead_run_left_before_it_is_present(
    system, cli, checkouts, tmp_path
):
    # The runner and its keeper both killed, as a kill of everything the runner started
    # would: the tool runs on until the runner is started again.
    name, setup, args = cli
    node = f"contain-again-{name}"
    out = tmp_path / "out"
    out.mkdir()
    home = tmp_path / "seedline-home"
    log = tmp_path / "runner.log"
    seconds = 15
    setup.standin.tool_commands = [tool_command(out, seconds)]
    runner = await start_runner_process(system, name, setup, args, checkouts, home, log, node)
    again = None
    try:
        opened = await system.open(engine=name, node_id=node, instruction="Run the step")
        assert opened["ok"], opened
        await wait_for_file(out / "started")
        tool_done_at = time.monotonic() + seconds
        await engine_recorded_a_call(system, name, setup)
        keepers = [p for p in psutil.Process(runner.pid).children()
                   if any("keeper.py" in part for part in p.cmdline())]
        for keeper in keepers:
            keeper.kill()
        runner.send_signal(signal.SIGKILL)
        await runner.wait()
        left_while_down = conversation_processes(str(tmp_path))

        again = await start_runner_process(system, name, setup, args, checkouts, home, log,
                                           node)
        left_once_present = conversation_processes(str(tmp_path), (again,))
        await asyncio.sleep(max(0.0, tool_done_at - time.monotonic()) + 2)

        async def recorded():
            entries = await timeline(system, opened["session_id"])
            return entries if as_in_timeline(name, engine_said(name, setup), entries) else None

        assert len(keepers) == 1
        assert left_while_down, "the tool was not running while the runner was down"
        assert left_once_present == []
        assert written_files(out) == []
        await system.wait_for(recorded, timeout=30)
    finally:
        for process in (runner, again):
            if process is not None and process.returncode is None:
                process.terminate()
                await process.wait()
