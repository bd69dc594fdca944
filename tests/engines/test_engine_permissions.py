"""The real Claude Code CLI on a runner with default settings (as `seedline runner` builds
it): it writes a file in its checkout through its own tool, and a write outside the
checkout is refused and told with the setting that allows it. The stand-in's requests
show what the CLI really sent back for each tool call."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from seedline_contracts import subjects
from seedline_runner import Checkouts, Runner
from seedline_runner.engines.registry import EngineOptions, build_engine

from .conftest import REPO

pytestmark = pytest.mark.servers

NODE = "linux-box-1"


@pytest.fixture
async def runner(nc, claude, checkouts, monkeypatch):
    """A runner whose claude engine is built from the runner's default settings."""
    for key, value in claude.env.items():
        monkeypatch.setenv(key, value)
    engine = build_engine("claude", EngineOptions(claude_executable=str(claude.executable)))
    machine = Runner(nc, NODE, "Linux box", {"claude": engine},
                     checkouts=Checkouts(repos_dir=checkouts))
    await machine.start()
    yield machine
    await machine.stop()


async def outcome(nc, session_id: str) -> str:
    """The turn's end, as the runner published it (its end mark)."""
    js = nc.jetstream()
    end = f"{session_id}:launch:end"
    for _ in range(1200):
        count = (await js.stream_info("OBSERVED_INGEST")).state.messages
        for n in range(1, count + 1):
            body = json.loads((await js.get_msg("OBSERVED_INGEST", n)).data)
            if body["entry_id"] == end:
                return body["content"]
        await asyncio.sleep(0.05)
    raise AssertionError("the turn did not end in time")


async def launch(nc, session_id: str, instruction: str) -> dict:
    body = {"session_id": session_id, "instance_id": "bd43f4de", "repo": REPO,
            "engine": "claude", "resume": None, "seed": None, "instruction": instruction}
    reply = await nc.request(subjects.runner_subject(NODE, "launch"), json.dumps(body).encode(),
                             timeout=30)
    return json.loads(reply.data)


async def test_claude_writes_a_file_in_its_checkout_with_default_settings(
    nc, runner, claude, checkouts
):
    target = checkouts / REPO / "notes" / "castling.md"
    claude.standin.tool_uses = [{"name": "Write", "input": {
        "file_path": str(target), "content": "Castling: king two squares, rook jumps.\n"}}]

    assert (await launch(nc, "csess_1", "write the castling notes"))["accepted"]
    said = await outcome(nc, "csess_1")

    assert target.read_text() == "Castling: king two squares, rook jumps.\n"
    [result] = claude.standin.tool_results()
    assert result.get("is_error") is not True, result
    assert "not allowed" not in said


async def test_a_write_outside_the_checkout_is_refused_and_the_setting_named(
    nc, runner, claude, checkouts, tmp_path
):
    outside = tmp_path / "outside.txt"
    claude.standin.tool_uses = [{"name": "Write", "input": {
        "file_path": str(outside), "content": "should not be here\n"}}]

    assert (await launch(nc, "csess_1", "write outside"))["accepted"]
    said = await outcome(nc, "csess_1")

    assert not outside.exists()
    [result] = claude.standin.tool_results()
    assert result.get("is_error") is True, result
    assert (f"Claude Code was not allowed to use Write on {outside} on this machine; the "
            "runner's --claude-allowed-tools Write setting") in said


async def test_codex_with_default_settings_writes_in_its_checkout_and_nowhere_else(
    nc, codex, checkouts, monkeypatch, request
):
    for key, value in codex.env.items():
        monkeypatch.setenv(key, value)
    engine = build_engine("codex", EngineOptions(codex_executable=str(codex.executable)))
    # Outside the checkout and outside /tmp, which Codex's workspace-write also allows.
    outside = Path("/var/tmp") / f"seedline-test-{uuid.uuid4().hex}.txt"
    request.addfinalizer(lambda: outside.unlink(missing_ok=True))
    codex.standin.tool_commands = ["echo en passant > notes.md", f"echo no > {outside}"]
    machine = Runner(nc, NODE, "Linux box", {"codex": engine},
                     checkouts=Checkouts(repos_dir=checkouts))
    await machine.start()
    try:
        body = {"session_id": "csess_1", "instance_id": "bd43f4de", "repo": REPO,
                "engine": "codex", "resume": None, "seed": None, "instruction": "take notes"}
        await nc.request(subjects.runner_subject(NODE, "launch"), json.dumps(body).encode(),
                         timeout=30)
        await outcome(nc, "csess_1")
        entries = await published(nc)
    finally:
        await machine.stop()

    assert (checkouts / REPO / "notes.md").read_text() == "en passant\n"
    assert not outside.exists()
    # The model was given the sandbox's refusal as the command's output. Codex 0.171's
    # `exec --json` mostly reports no item for a command its sandbox refused, and then the
    # runner has nothing of it to publish (README, Engines); when it does report one, the
    # runner's entry names the setting that would allow it.
    assert any("Read-only file system" in output for output in codex.standin.tool_outputs())
    terminal = [e["content"] for e in entries if e["kind"] == "terminal"]
    assert terminal[0] == "" and len(terminal) <= 2, terminal
    assert all("Read-only file system" in text and "--codex-sandbox danger-full-access" in text
               for text in terminal[1:]), terminal


async def published(nc) -> list[dict]:
    js = nc.jetstream()
    count = (await js.stream_info("OBSERVED_INGEST")).state.messages
    return [json.loads((await js.get_msg("OBSERVED_INGEST", n)).data) for n in range(1, count + 1)]
