"""Building engines by name, for the command line and the demo runner."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .base import Engine
from .claude import ClaudeEngine
from .codex import DEFAULT_CODEX_ARGS, CodexEngine
from .openai import OpenAIChatEngine
from .scripted import ScriptedEngine

ENGINE_NAMES = ("scripted", "claude", "codex", "openai")


@dataclass(frozen=True)
class EngineOptions:
    scripted_resumable: bool = True
    claude_executable: str = "claude"
    # Where Claude Code runs when the launch names no checkout (no --repos-dir/--repos-map).
    claude_workdir: str | Path | None = None
    claude_args: Sequence[str] = field(default_factory=tuple)
    codex_executable: str = "codex"
    # Added after the runner's own --skip-git-repo-check.
    codex_args: Sequence[str] = field(default_factory=tuple)
    # Default from SEEDLINE_OPENAI_BASE_URL / SEEDLINE_OPENAI_MODEL when not given.
    openai_base_url: str | None = None
    openai_model: str | None = None
    openai_api_key_env: str | None = "OPENAI_API_KEY"
    openai_system_prompt: str | None = None


def build_engines(
    names: Sequence[str], options: EngineOptions = EngineOptions()
) -> dict[str, Engine]:
    engines: dict[str, Engine] = {}
    for name in names:
        if name in engines:
            continue
        engines[name] = build_engine(name, options)
    return engines


def build_engine(name: str, options: EngineOptions = EngineOptions()) -> Engine:
    if name == "scripted":
        return ScriptedEngine(resumable=options.scripted_resumable)
    if name == "claude":
        return ClaudeEngine(
            executable=options.claude_executable,
            workdir=options.claude_workdir,
            extra_args=options.claude_args,
        )
    if name == "codex":
        return CodexEngine(
            executable=options.codex_executable,
            extra_args=[*DEFAULT_CODEX_ARGS, *options.codex_args],
        )
    if name == "openai":
        base_url = options.openai_base_url or os.environ.get("SEEDLINE_OPENAI_BASE_URL")
        model = options.openai_model or os.environ.get("SEEDLINE_OPENAI_MODEL")
        if not base_url or not model:
            raise ValueError(
                "The openai engine needs a base URL and a model "
                "(SEEDLINE_OPENAI_BASE_URL and SEEDLINE_OPENAI_MODEL)."
            )
        return OpenAIChatEngine(
            base_url=base_url,
            model=model,
            api_key_env=options.openai_api_key_env,
            system_prompt=options.openai_system_prompt,
        )
    raise ValueError(f"Unknown engine {name!r}; choose from: {', '.join(ENGINE_NAMES)}.")
