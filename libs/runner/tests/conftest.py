"""Local stand-ins that speak the real protocols: nats-server, a chat endpoint, a claude CLI."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from seedline_devtools.embedded import free_port

from seedline_runner.engines import ClaudeEngine
from seedline_runner.engines.base import EngineOutput

NATS_SERVER = Path(sys.executable).parent / "nats-server"
WAIT_SECONDS = 10.0


def _port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture
def nats_url(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    store_dir = tmp_path / "nats"
    server = subprocess.Popen(
        [str(NATS_SERVER), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(store_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while not _port_answers(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nats-server did not start on port {port}")
            time.sleep(0.05)
        yield f"nats://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[Client]:
    client = await nats.connect(nats_url)
    try:
        yield client
    finally:
        await client.close()


class Emitted(list):
    """An engine's ``emit`` callback that keeps what it was given, in order."""

    async def __call__(self, output: EngineOutput) -> None:
        self.append(output)

    def contents(self) -> list[str]:
        return [output.content for output in self]


@pytest.fixture
def emitted() -> Callable[[], Emitted]:
    """A new collecting ``emit`` per call: ``out = emitted()``."""
    return Emitted


# A chat completions endpoint -------------------------------------------------


@dataclass
class ChatStandIn:
    """Answers POST /v1/chat/completions, saying how many messages it received."""

    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    status: int = 200

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = (await reader.readline()).decode()
            headers: dict[str, str] = {}
            while (line := (await reader.readline()).decode().strip()) != "":
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            method, path, _ = request_line.split(" ", 2)
            if method != "POST" or path != "/v1/chat/completions":
                await self._send(writer, 404, {"error": {"message": f"no route {method} {path}"}})
                return
            payload = json.loads(body)
            self.requests.append(payload)
            self.headers.append(headers)
            if self.status != 200:
                refusal = {"error": {"message": "refused by the stand-in"}}
                await self._send(writer, self.status, refusal)
                return
            messages = payload["messages"]
            last = messages[-1]["content"]
            content = f"received {len(messages)} messages; last: {last[:40]}"
            await self._send(
                writer,
                200,
                {
                    "id": f"chatcmpl-{len(self.requests)}",
                    "object": "chat.completion",
                    "model": payload["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                },
            )
        finally:
            writer.close()

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()


@pytest.fixture
async def chat_standin() -> AsyncIterator[ChatStandIn]:
    standin = ChatStandIn()
    server = await asyncio.start_server(standin.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    standin.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield standin
    finally:
        server.close()
        await server.wait_closed()


# A claude executable ---------------------------------------------------------

# Behaves like `claude -p ... --output-format stream-json --verbose [--resume ID]`:
# it keeps transcripts under $CLAUDE_CONFIG_DIR/projects/<encoded cwd>/<id>.jsonl.
#   faithful:  resumes an id whose transcript exists, else starts a new id
#   forgetful: always starts a new id, even when the transcript exists
#   strict:    refuses a resume whose transcript is missing as Claude Code 2.1 does: exit 1
#              and a result line carrying the requested id, with no init line
# Its transcript lines are shaped as Claude Code's (user and assistant lines with
# message content). FAKE_CLAUDE_RESUME_DELAY holds the init line of a resume back that
# many seconds; FAKE_CLAUDE_GATE holds everything after the init line until that file exists.
_FAKE_CLAUDE = r'''#!{python}
import json, os, pathlib, re, sys, time, uuid

MODE = {mode!r}
args = sys.argv[1:]
prompt = None
resume = None
i = 0
while i < len(args):
    if args[i] == "-p":
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            prompt = args[i + 1]
            i += 1
    elif args[i] == "--resume":
        resume = args[i + 1]
        i += 1
    i += 1
if prompt is None:
    prompt = sys.stdin.read()

def emit(message):
    print(json.dumps(message), flush=True)

with open(os.environ["FAKE_CLAUDE_LOG"], "a") as log:
    log.write(json.dumps({{"argv": args, "prompt": prompt, "resume": resume}}) + "\n")
if os.environ.get("FAKE_CLAUDE_FAIL"):
    print("fake claude: " + os.environ["FAKE_CLAUDE_FAIL"], file=sys.stderr)
    sys.exit(3)
home = pathlib.Path(os.environ.get("CLAUDE_CONFIG_DIR") or pathlib.Path.home() / ".claude")
folder = home / "projects" / re.sub(r"[^A-Za-z0-9]", "-", os.path.realpath(os.getcwd()))
folder.mkdir(parents=True, exist_ok=True)
session = None
if resume is not None:
    if MODE != "forgetful" and (folder / (resume + ".jsonl")).exists():
        session = resume
    elif MODE == "strict":
        refusal = "No conversation found with session ID: " + resume
        emit({{"type": "result", "subtype": "error_during_execution", "is_error": True,
               "num_turns": 0, "session_id": resume, "errors": [refusal]}})
        print(refusal, file=sys.stderr)
        sys.exit(1)
session = session or str(uuid.uuid4())
transcript = folder / (session + ".jsonl")
earlier = [
    line for line in (transcript.read_text().splitlines() if transcript.exists() else [])
    if json.loads(line).get("type") == "user"
]
if resume is not None and os.environ.get("FAKE_CLAUDE_RESUME_DELAY"):
    time.sleep(float(os.environ["FAKE_CLAUDE_RESUME_DELAY"]))
reply = "heard %d earlier prompts; now: %s" % (len(earlier), prompt[:40])

def said(role, content):
    return json.dumps({{"type": role, "sessionId": session,
                        "message": {{"role": role, "content": content}}}}) + "\n"

with transcript.open("a") as out:
    out.write(said("user", prompt))
    out.write(said("assistant", [{{"type": "text", "text": reply}}]))
    out.write(said("assistant", [{{"type": "text", "text": "done"}}]))

emit({{"type": "system", "subtype": "init", "session_id": session, "tools": ["Bash"]}})
gate = os.environ.get("FAKE_CLAUDE_GATE")
while gate and not os.path.exists(gate):
    time.sleep(0.02)
emit({{"type": "assistant", "session_id": session, "message": {{"content": [
    {{"type": "text", "text": reply}},
    {{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {{"command": "ls"}}}}]}}}})
emit({{"type": "user", "session_id": session, "message": {{"content": [
    {{"type": "tool_result", "tool_use_id": "toolu_1", "content": "README.md\nsrc"}}]}}}})
emit({{"type": "assistant", "session_id": session, "message": {{"content": [
    {{"type": "text", "text": "done"}}]}}}})
emit({{"type": "result", "subtype": "success", "is_error": False, "result": "done",
       "session_id": session, "num_turns": 2, "duration_ms": 1200}})
'''


@dataclass
class FakeClaude:
    executable: Path
    claude_home: Path
    workdir: Path
    log_path: Path

    def calls(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    def transcript(self, session_id: str) -> Path:
        folder = re.sub(r"[^A-Za-z0-9]", "-", str(self.workdir.resolve()))
        return self.claude_home / "projects" / folder / f"{session_id}.jsonl"

    def write_transcript(self, session_id: str, *exchanges: tuple[str, str]) -> Path:
        """A transcript of ``session_id`` holding (prompt, reply) exchanges, as the CLI writes."""
        path = self.transcript(session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for prompt, reply in exchanges:
            reply_blocks = [{"type": "text", "text": reply}]
            for role, content in (("user", prompt), ("assistant", reply_blocks)):
                message = {"role": role, "content": content}
                line = {"type": role, "sessionId": session_id, "message": message}
                lines.append(json.dumps(line))
        path.write_text("".join(line + "\n" for line in lines))
        return path

    def engine(self) -> ClaudeEngine:
        return ClaudeEngine(
            executable=str(self.executable), workdir=self.workdir, claude_home=self.claude_home
        )


@pytest.fixture
def fake_claude(tmp_path: Path) -> Callable[..., FakeClaude]:
    def make(mode: str = "faithful") -> FakeClaude:
        folder = tmp_path / f"claude-{mode}"
        folder.mkdir(exist_ok=True)
        executable = folder / "claude"
        executable.write_text(_FAKE_CLAUDE.format(python=sys.executable, mode=mode))
        executable.chmod(executable.stat().st_mode | stat.S_IXUSR)
        workdir = tmp_path / "repo"
        workdir.mkdir(exist_ok=True)
        return FakeClaude(
            executable=executable,
            claude_home=tmp_path / "claude-home",
            workdir=workdir,
            log_path=folder / "calls.jsonl",
        )

    return make
