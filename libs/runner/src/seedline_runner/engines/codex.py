"""The Codex CLI, driven headless one turn at a time.

A fresh conversation's first turn is ``codex exec --json -``; every later turn is
``codex exec --json resume <thread id> -`` with the thread id the earlier run's
``thread.started`` event named, and the prompt on standard input (no length limit, and
a prompt that starts with ``-`` is never read as an option). Codex keeps each thread
as a rollout file under ``$CODEX_HOME/sessions``, so the adapter is stateful and the
thread id is its resume key.

A resume has really landed only when ``thread.started`` names the very thread that was
asked for: Codex refuses a UUID it has no rollout for (exit 1, before that event) and
quietly starts a new thread for an id that is not a UUID. Before any turn, the adapter
can only check that the thread's rollout file is there; the first turn confirms it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from ..store import Conversation
from .base import Emit, EngineError, StartResult, TurnResult
from .cli_process import CliRun, failure_message, run_cli
from .codex_stream import CodexStream

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
    ) -> None:
        self.name = name
        self._executable = executable
        self._extra_args = list(extra_args)
        self._codex_home = Path(codex_home) if codex_home is not None else default_codex_home()
        self._env = dict(os.environ if env is None else env)
        if codex_home is not None:
            self._env["CODEX_HOME"] = str(self._codex_home)
        self._bound: dict[str, _Binding] = {}

    async def start(
        self, conversation_id: str, resume_key: str | None, workdir: Path | None = None
    ) -> StartResult:
        checkout = (workdir or Path.cwd()).resolve()
        if resume_key is not None and self._rollout_exists(resume_key):
            self._bound[conversation_id] = _Binding(checkout, thread_id=resume_key)
            return StartResult(resumed=True, engine_session_id=resume_key)
        self._bound[conversation_id] = _Binding(checkout, thread_id=None)
        return StartResult(resumed=False, engine_session_id=None)

    async def run_turn(self, conversation: Conversation, prompt: str, emit: Emit) -> TurnResult:
        binding = self._bound.get(conversation.conversation_id)
        if binding is None:
            raise EngineError("Codex was given a turn before it was started.")
        requested = binding.thread_id
        run = await self._run(binding.workdir, prompt, requested, emit)
        if requested is not None and run.stream.thread_id is None:
            # Codex refused the resume before starting: answer in a new thread.
            log.info("codex_resume_refused", requested=requested, stderr=run.cli.stderr_tail)
            run = await self._run(binding.workdir, prompt, None, emit)
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

    def _rollout_exists(self, thread_id: str) -> bool:
        if not _SAFE_THREAD_ID.fullmatch(thread_id):
            return False
        sessions = self._codex_home / "sessions"
        # sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl
        return any(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))

    async def _run(self, workdir: Path, prompt: str, resume: str | None, emit: Emit) -> _Run:
        stream = CodexStream()

        async def on_line(line: str) -> None:
            for output in stream.feed(line):
                await emit(output)

        # Options go before `resume`: `codex exec resume` refuses some of them (--sandbox).
        args = [self._executable, "exec", "--json", *self._extra_args]
        args += ["resume", resume, "-"] if resume is not None else ["-"]
        cli = await run_cli(
            args, label=_LABEL, cwd=workdir, env=self._env, stdin_text=prompt, on_line=on_line
        )
        return _Run(stream=stream, cli=cli)
