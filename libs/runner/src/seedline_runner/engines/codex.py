"""The Codex CLI, driven headless one turn at a time.

A fresh conversation's first turn is ``codex exec --json -``; every later turn is
``codex exec --json resume <thread id> -`` with the thread id the earlier run's
``thread.started`` event named, and the prompt on standard input (no length limit, and
a prompt that starts with ``-`` is never read as an option). Codex keeps each thread
as a rollout file under ``$CODEX_HOME/sessions``, so the adapter is stateful and the
thread id is its resume key.

A resume needs two things. At start, the thread's rollout must name the thread and
hold the launch's expected turn (``resume_proof``); a thread whose rollout is missing,
empty or cut before that turn is not resumed at all. Then the first run's
``thread.started`` must name the very thread that was asked for: Codex refuses a
thread it cannot use (exit 1, before that event) and quietly starts a new thread for
an id that is not a UUID; either way ``run_turn`` raises ``ResumeRefused`` before
anything of that run is emitted (a run on another thread is stopped at once). The
thread id is announced the moment ``thread.started`` names it (``announce_bound``).
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
from .cli_process import CliRun, failure_message, run_cli
from .codex_stream import CodexStream
from .permissions import CodexPermissions
from .resume_proof import Proof, codex_record_proves
from .transcript_marks import RUNNER_ENV

log = structlog.get_logger(__name__)

_SAFE_THREAD_ID = re.compile(r"[A-Za-z0-9-]{1,128}")
_LABEL = "Codex"
# The runner is pointed at each checkout on purpose; Codex's own guard against
# running outside a git repository would refuse a checkout that is not one.
DEFAULT_CODEX_ARGS = ("--skip-git-repo-check",)


def default_codex_home() -> Path:
    configured = os.environ.get("CODEX_HOME")
    return Path(configured) if configured else Path.home() / ".codex"


@dataclass
class _Binding:
    workdir: Path
    thread_id: str | None


@dataclass
class _Run:
    stream: CodexStream
    cli: CliRun


class _OtherThread(Exception):
    """thread.started named another thread than the one the run was asked to resume."""


class CodexEngine:
    stateless = False

    def __init__(
        self,
        *,
        executable: str = "codex",
        extra_args: Sequence[str] = DEFAULT_CODEX_ARGS,
        codex_home: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        name: str = "codex",
        permissions: CodexPermissions = CodexPermissions(),
    ) -> None:
        self.name = name
        self._executable = executable
        # Its sandbox and approval policy first: nobody can answer a question in exec mode.
        self._extra_args = [*permissions.args(extra_args), *extra_args]
        self._codex_home = Path(codex_home) if codex_home is not None else default_codex_home()
        self._env = dict(os.environ if env is None else env)
        # Marks this machine's runs in the engine's own transcript (transcript_marks.py).
        self._env.update(RUNNER_ENV["codex"])
        if codex_home is not None:
            self._env["CODEX_HOME"] = str(self._codex_home)
        self._bound: dict[str, _Binding] = {}

    async def start(
        self,
        conversation_id: str,
        resume_key: str | None,
        workdir: Path | None = None,
        expect: ResumeExpect | None = None,
    ) -> StartResult:
        checkout = (workdir or Path.cwd()).resolve()
        if resume_key is not None:
            # Reading a long rollout takes a moment: not on the event loop.
            proof = await asyncio.to_thread(self._prove, resume_key, expect)
            if proof.holds:
                self._bound[conversation_id] = _Binding(checkout, thread_id=resume_key)
                return StartResult(
                    resumed=True, engine_session_id=resume_key, acceptance_pending=True
                )
            log.info("codex_resume_unproven", requested=resume_key, reason=proof.reason)
        self._bound[conversation_id] = _Binding(checkout, thread_id=None)
        return StartResult(resumed=False, engine_session_id=None)

    async def run_turn(self, conversation: Conversation, prompt: str, emit: Emit) -> TurnResult:
        binding = self._bound.get(conversation.conversation_id)
        if binding is None:
            raise EngineError("Codex was given a turn before it was started.")
        requested = binding.thread_id
        try:
            run = await self._run(binding.workdir, prompt, requested, emit)
        except _OtherThread as other:
            binding.thread_id = None
            log.info("codex_resume_refused", requested=requested, started=str(other))
            raise ResumeRefused(
                f"Codex started a new thread instead of continuing {requested}."
            ) from None
        if requested is not None and run.stream.thread_id is None:
            # Codex refused the resume before starting: the same message is answered
            # in a new thread.
            binding.thread_id = None
            log.info("codex_resume_refused", requested=requested, stderr=run.cli.stderr_tail)
            raise ResumeRefused(
                f"Codex could not continue its thread {requested}: "
                "it found no usable record of it on this machine."
            )
        if run.stream.thread_id is None:
            raise EngineError(failure_message(_LABEL, run.cli))
        if run.stream.unknown_types:
            log.warning("codex_unknown_events", types=sorted(run.stream.unknown_types))
        binding.thread_id = run.stream.thread_id
        return TurnResult(
            engine_session_id=run.stream.thread_id,
            resumed=None if requested is None else run.stream.thread_id == requested,
        )

    async def end(self, conversation_id: str) -> None:
        self._bound.pop(conversation_id, None)

    @property
    def transcripts_home(self) -> Path:
        """Where the CLI keeps its transcripts (a restarted runner reads them back)."""
        return self._codex_home

    def _sandbox_given(self) -> str | None:
        """The sandbox its commands run in, as the command line says (the last one given)."""
        args = self._extra_args
        given = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg in ("--sandbox", "-s")]
        given += [arg.split("=", 1)[1] for arg in args if arg.startswith("--sandbox=")]
        return given[-1] if given else None

    def _prove(self, thread_id: str, expect: ResumeExpect | None) -> Proof:
        if not _SAFE_THREAD_ID.fullmatch(thread_id):
            return Proof(False, "the id is not one Codex issues")
        sessions = self._codex_home / "sessions"
        # sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl
        for rollout in sorted(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl")):
            try:
                text = rollout.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            return codex_record_proves(text.splitlines(), thread_id, expect)
        return Proof(False, "no rollout of the thread")

    async def _run(self, workdir: Path, prompt: str, resume: str | None, emit: Emit) -> _Run:
        stream = CodexStream(sandbox=self._sandbox_given())
        named: list[str] = []

        async def on_line(line: str) -> None:
            outputs = stream.feed(line)
            if stream.thread_id is not None and not named:
                named.append(stream.thread_id)
                if resume is not None and stream.thread_id != resume:
                    raise _OtherThread(stream.thread_id)  # ends the run at once
                await announce_bound(emit, stream.thread_id)
            for output in outputs:
                await emit(output)

        # Options go before `resume`: `codex exec resume` refuses some of them (--sandbox).
        args = [self._executable, "exec", "--json", *self._extra_args]
        args += ["resume", resume, "-"] if resume is not None else ["-"]
        cli = await run_cli(
            args, label=_LABEL, cwd=workdir, env=self._env, stdin_text=prompt, on_line=on_line
        )
        return _Run(stream=stream, cli=cli)
