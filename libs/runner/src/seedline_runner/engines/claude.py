"""The Claude Code CLI, driven headless one turn at a time.

Each turn is one ``claude -p --output-format stream-json --verbose`` run in the
conversation's checkout; the next turn passes ``--resume <id>`` with the conversation
id the previous run's ``init`` line named. Claude Code keeps that conversation on this
machine's disk, under a folder named after the checkout, so the adapter is stateful.

A resume needs two things. At start, the conversation's transcript in the checkout's
folder must hold the launch's expected turn (``resume_proof``); an id whose transcript
is missing, empty or cut before that turn is not resumed at all. Then the first run's
``init`` line must name the very id it was asked to resume: given a target it cannot
use the CLI either refuses (exit 1, no ``init`` line) or starts a new id, and either
way ``run_turn`` raises ``ResumeRefused`` before anything of that run is emitted (a
run on another id is stopped at its ``init`` line). The ``init`` line's id is
announced at once (``announce_bound``), and each line's outputs are emitted as the
line arrives.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from seedline_contracts.runner import ResumeExpect

from ..store import Conversation
from .base import Emit, EngineError, ResumeRefused, StartResult, TurnResult, announce_bound
from .claude_stream import ClaudeStream
from .cli_process import CliRun, failure_message, run_cli
from .permissions import ClaudePermissions
from .resume_proof import Proof, claude_record_proves
from .transcript_marks import RUNNER_ENV

log = structlog.get_logger(__name__)

# Linux refuses a single argument over 128 KiB; longer prompts go through stdin.
_MAX_PROMPT_ARG_BYTES = 100_000
_SAFE_RESUME_KEY = re.compile(r"[A-Za-z0-9_-]{1,128}")
_LABEL = "Claude Code"


def project_dir_names(workdir: Path) -> set[str]:
    """Names Claude Code gives the transcript folder of a working directory."""
    path = str(workdir)
    return {re.sub(r"[^A-Za-z0-9]", "-", path), path.replace("/", "-")}


def default_claude_home() -> Path:
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured) if configured else Path.home() / ".claude"


@dataclass
class _Binding:
    workdir: Path
    # The id the next run resumes; None until the first run reports one.
    session_id: str | None


@dataclass
class _Run:
    stream: ClaudeStream
    cli: CliRun


class _OtherConversation(Exception):
    """The CLI's init line named another conversation than the one it was asked to resume."""


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
        permissions: ClaudePermissions = ClaudePermissions(),
    ) -> None:
        self.name = name
        self._executable = executable
        self._workdir = Path(workdir) if workdir is not None else None
        # What it may do without asking: nobody can answer a question in -p mode.
        self._extra_args = [*permissions.args(extra_args), *extra_args]
        self._claude_home = Path(claude_home) if claude_home is not None else default_claude_home()
        self._env = dict(os.environ if env is None else env)
        # Marks this machine's runs in the engine's own transcript (transcript_marks.py).
        self._env.update(RUNNER_ENV["claude"])
        if claude_home is not None:
            self._env["CLAUDE_CONFIG_DIR"] = str(self._claude_home)
        self._bound: dict[str, _Binding] = {}

    async def start(
        self,
        conversation_id: str,
        resume_key: str | None,
        workdir: Path | None = None,
        expect: ResumeExpect | None = None,
    ) -> StartResult:
        checkout = (workdir or self._workdir or Path.cwd()).resolve()
        if resume_key is not None:
            # Reading a long transcript takes a moment: not on the event loop.
            proof = await asyncio.to_thread(self._prove, checkout, resume_key, expect)
            if proof.holds:
                self._bound[conversation_id] = _Binding(checkout, session_id=resume_key)
                return StartResult(
                    resumed=True, engine_session_id=resume_key, acceptance_pending=True
                )
            log.info("claude_resume_unproven", requested=resume_key, reason=proof.reason)
        self._bound[conversation_id] = _Binding(checkout, session_id=None)
        return StartResult(resumed=False, engine_session_id=None)

    async def run_turn(self, conversation: Conversation, prompt: str, emit: Emit) -> TurnResult:
        binding = self._bound.get(conversation.conversation_id)
        if binding is None:
            raise EngineError("Claude Code was given a turn before it was started.")
        requested = binding.session_id
        try:
            run = await self._run(binding.workdir, prompt, requested, emit)
        except _OtherConversation as other:
            binding.session_id = None
            log.info("claude_resume_refused", requested=requested, started=str(other))
            raise ResumeRefused(
                f"Claude Code started a new conversation instead of continuing {requested}."
            ) from None
        if requested is not None and run.stream.session_id is None:
            # The CLI refused the resume (exit 1, a result carrying the requested id,
            # no init line): the same message is answered in a new conversation.
            binding.session_id = None
            log.info("claude_resume_refused", requested=requested, errors=run.stream.errors)
            raise ResumeRefused(
                f"Claude Code could not continue its conversation {requested}: "
                "it found no record of it on this machine."
            )
        if run.stream.session_id is None:
            detail = run.stream.errors[0] if run.stream.errors else None
            raise EngineError(failure_message(_LABEL, run.cli, detail))
        if run.stream.unknown_types:
            log.warning("claude_unknown_lines", types=sorted(run.stream.unknown_types))
        binding.session_id = run.stream.session_id
        return TurnResult(
            engine_session_id=run.stream.session_id,
            resumed=None if requested is None else run.stream.session_id == requested,
        )

    async def end(self, conversation_id: str) -> None:
        self._bound.pop(conversation_id, None)

    @property
    def transcripts_home(self) -> Path:
        """Where the CLI keeps its transcripts (a restarted runner reads them back)."""
        return self._claude_home

    def _prove(self, checkout: Path, resume_key: str, expect: ResumeExpect | None) -> Proof:
        if not _SAFE_RESUME_KEY.fullmatch(resume_key):
            return Proof(False, "the id is not one Claude Code issues")
        projects = self._claude_home / "projects"
        for folder in project_dir_names(checkout):
            transcript = projects / folder / f"{resume_key}.jsonl"
            try:
                text = transcript.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            return claude_record_proves(text.splitlines(), expect)
        return Proof(False, "no transcript of it in the checkout's folder")

    async def _run(self, workdir: Path, prompt: str, resume: str | None, emit: Emit) -> _Run:
        stream = ClaudeStream()
        named: list[str] = []

        async def on_line(line: str) -> None:
            outputs = stream.feed(line)
            if stream.session_id is None:
                return  # before the init line only a refusal writes anything
            if not named:
                named.append(stream.session_id)
                if resume is not None and stream.session_id != resume:
                    raise _OtherConversation(stream.session_id)  # ends the run at once
                await announce_bound(emit, stream.session_id)
            for output in outputs:
                await emit(output)

        args = [self._executable, "-p"]
        prompt_via_stdin = len(prompt.encode("utf-8")) > _MAX_PROMPT_ARG_BYTES
        if not prompt_via_stdin:
            args.append(prompt)
        args += ["--output-format", "stream-json", "--verbose"]
        if resume is not None:
            args += ["--resume", resume]
        args += self._extra_args
        cli = await run_cli(
            args,
            label=_LABEL,
            cwd=workdir,
            env=self._env,
            stdin_text=prompt if prompt_via_stdin else None,
            on_line=on_line,
        )
        return _Run(stream=stream, cli=cli)
