"""The Claude Code CLI, driven headless one turn at a time.

Each turn is one ``claude -p ... --output-format stream-json --verbose`` run;
the next turn passes ``--resume <id>`` with the conversation id the previous
run reported. Claude Code keeps that conversation on this machine's disk, so
the adapter is stateful.

A resume has really landed only when the CLI reports the very id it was asked
to resume: given a missing target it either refuses or starts a new id. Before
any turn, the adapter can only check that the conversation's transcript is
on disk; the first turn then confirms it (``TurnResult.resumed``).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..store import Conversation
from .base import EngineError, StartResult, TurnResult
from .claude_stream import ClaudeStream

# Tool results can be large single lines.
_LINE_LIMIT = 32 * 1024 * 1024
# Linux refuses a single argument over 128 KiB; longer prompts go through stdin.
_MAX_PROMPT_ARG_BYTES = 100_000
_STDERR_TAIL_LINES = 20
_SAFE_RESUME_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")


def project_dir_names(workdir: Path) -> set[str]:
    """Names Claude Code gives the transcript folder of a working directory."""
    path = str(workdir)
    return {re.sub(r"[^A-Za-z0-9]", "-", path), path.replace("/", "-")}


def default_claude_home() -> Path:
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) if configured else Path.home() / ".claude"


@dataclass
class _Binding:
    # The id the next run resumes; None until the first run reports one.
    session_id: str | None


@dataclass
class _CliRun:
    stream: ClaudeStream
    returncode: int
    stderr_tail: str


class ClaudeEngine:
    stateless = False

    def __init__(
        self,
        *,
        executable: str = "claude",
        workdir: str | Path | None = None,
        extra_args: Sequence[str] = (),
        claude_home: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        name: str = "claude",
    ) -> None:
        self.name = name
        self._executable = executable
        self._workdir = Path(workdir) if workdir is not None else None
        self._extra_args = list(extra_args)
        self._claude_home = Path(claude_home) if claude_home is not None else default_claude_home()
        self._env = dict(os.environ if env is None else env)
        if claude_home is not None:
            self._env["CLAUDE_CONFIG_DIR"] = str(self._claude_home)
        self._bound: dict[str, _Binding] = {}

    async def start(self, conversation_id: str, resume_key: str | None) -> StartResult:
        if resume_key is not None and self._transcript_exists(resume_key):
            self._bound[conversation_id] = _Binding(session_id=resume_key)
            return StartResult(resumed=True, engine_session_id=resume_key)
        self._bound[conversation_id] = _Binding(session_id=None)
        return StartResult(resumed=False, engine_session_id=None)

    async def run_turn(self, conversation: Conversation, prompt: str) -> TurnResult:
        binding = self._bound.get(conversation.conversation_id)
        if binding is None:
            raise EngineError("Claude Code was given a turn before it was started.")
        requested = binding.session_id
        run = await self._run_cli(prompt, resume=requested)
        if requested is not None and run.stream.session_id is None and run.returncode != 0:
            # The CLI refused the resume outright; answer the turn in a new conversation.
            run = await self._run_cli(prompt, resume=None)
        if run.stream.session_id is None:
            raise EngineError(_failure_message(run))
        binding.session_id = run.stream.session_id
        return TurnResult(
            outputs=list(run.stream.outputs),
            engine_session_id=run.stream.session_id,
            resumed=None if requested is None else run.stream.session_id == requested,
        )

    async def end(self, conversation_id: str) -> None:
        self._bound.pop(conversation_id, None)

    def _transcript_exists(self, resume_key: str) -> bool:
        if not _SAFE_RESUME_KEY.fullmatch(resume_key):
            return False
        workdir = (self._workdir or Path.cwd()).resolve()
        projects = self._claude_home / "projects"
        return any(
            (projects / folder / f"{resume_key}.jsonl").is_file()
            for folder in project_dir_names(workdir)
        )

    async def _run_cli(self, prompt: str, *, resume: str | None) -> _CliRun:
        args = [self._executable, "-p"]
        prompt_via_stdin = len(prompt.encode("utf-8")) > _MAX_PROMPT_ARG_BYTES
        if not prompt_via_stdin:
            args.append(prompt)
        args += ["--output-format", "stream-json", "--verbose"]
        if resume is not None:
            args += ["--resume", resume]
        args += self._extra_args
        try:
            process = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.PIPE if prompt_via_stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self._workdir,
                env=self._env,
                limit=_LINE_LIMIT,
                # Its own process group, so stopping a turn also stops the tools it started.
                start_new_session=True,
            )
        except OSError as error:
            raise EngineError(
                f"Claude Code could not be started ({self._executable}): {error.strerror or error}."
            ) from error
        try:
            return await self._read(process, prompt if prompt_via_stdin else None)
        except BaseException:
            _kill_group(process)
            await process.wait()
            raise

    async def _read(self, process: asyncio.subprocess.Process, stdin_text: str | None) -> _CliRun:
        assert process.stdout is not None and process.stderr is not None
        stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        stderr_reader = asyncio.create_task(_collect_lines(process.stderr, stderr_tail))
        try:
            if stdin_text is not None:
                await _write_and_close(process, stdin_text)
            stream = ClaudeStream()
            try:
                async for raw in process.stdout:
                    stream.feed(raw.decode("utf-8", errors="replace"))
            except ValueError as error:
                raise EngineError(
                    "Claude Code wrote a line longer than this machine reads."
                ) from error
            returncode = await process.wait()
            await stderr_reader
        finally:
            stderr_reader.cancel()
        return _CliRun(stream=stream, returncode=returncode, stderr_tail="\n".join(stderr_tail))


async def _write_and_close(process: asyncio.subprocess.Process, text: str) -> None:
    assert process.stdin is not None
    try:
        process.stdin.write(text.encode("utf-8"))
        await process.stdin.drain()
        process.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        # It exited before reading its prompt; its output and exit code say why.
        pass


async def _collect_lines(reader: asyncio.StreamReader, into: deque[str]) -> None:
    async for raw in reader:
        into.append(raw.decode("utf-8", errors="replace").rstrip())


def _kill_group(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _failure_message(run: _CliRun) -> str:
    detail = run.stderr_tail.strip().splitlines()[-1] if run.stderr_tail.strip() else ""
    message = f"Claude Code stopped (exit code {run.returncode}) without answering"
    return message + (f": {detail}" if detail else ".")
