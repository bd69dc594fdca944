"""Building engines by name, for the command line and the demo runner."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .acp_config import ACP_ENGINE_PREFIX, acp_agent_name, parse_acp_agents
from .base import Engine
from .claude import ClaudeEngine
from .codex import DEFAULT_CODEX_ARGS, CodexEngine
from .permissions import (
    DEFAULT_CLAUDE_ALLOWED_TOOLS,
    DEFAULT_CLAUDE_PERMISSION_MODE,
    DEFAULT_CODEX_APPROVAL,
    DEFAULT_CODEX_SANDBOX,
    ClaudePermissions,
    CodexPermissions,
)
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
    # What each engine may do without asking (engines/permissions.py).
    claude_permission_mode: str = DEFAULT_CLAUDE_PERMISSION_MODE
    claude_allowed_tools: Sequence[str] = DEFAULT_CLAUDE_ALLOWED_TOOLS
    codex_sandbox: str = DEFAULT_CODEX_SANDBOX
    codex_approval: str = DEFAULT_CODEX_APPROVAL
    codex_executable: str = "codex"
    # Added after the runner's own --skip-git-repo-check.
    codex_args: Sequence[str] = field(default_factory=tuple)
    # Default from SEEDLINE_OPENAI_BASE_URL / SEEDLINE_OPENAI_MODEL when not given.
    openai_base_url: str | None = None
    openai_model: str | None = None
    openai_api_key_env: str | None = "OPENAI_API_KEY"
    openai_system_prompt: str | None = None
    # ACP agents by name (engine acp:NAME) -> command; default from SEEDLINE_ACP_AGENTS
    # (one NAME=command per line). How their permission requests are answered.
    acp_agents: Mapping[str, Sequence[str]] = field(default_factory=dict)
    acp_permission_policy: str = "checkout"


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
            permissions=ClaudePermissions(options.claude_permission_mode,
                                          tuple(options.claude_allowed_tools)),
        )
    if name == "codex":
        return CodexEngine(
            executable=options.codex_executable,
            extra_args=[*DEFAULT_CODEX_ARGS, *options.codex_args],
            permissions=CodexPermissions(options.codex_sandbox, options.codex_approval),
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
    if name.startswith(ACP_ENGINE_PREFIX):
        # Imported only here: the protocol's SDK is large and most runners never need it.
        from .acp import AcpEngine

        agent = acp_agent_name(name) or ""
        agents = dict(options.acp_agents) or acp_agents_setting()
        if agent not in agents:
            known = ", ".join(sorted(agents)) or "none"
            raise ValueError(
                f"The engine {name!r} needs its command: --acp {agent}=\"COMMAND ARGS\" "
                f"(or a line {agent}=COMMAND in SEEDLINE_ACP_AGENTS); configured: {known}."
            )
        return AcpEngine(
            agent,
            agents[agent],
            workdir=options.claude_workdir,
            permission_policy=options.acp_permission_policy,  # type: ignore[arg-type]
        )
    raise ValueError(
        f"Unknown engine {name!r}; choose from: {', '.join(ENGINE_NAMES)}, "
        f"or {ACP_ENGINE_PREFIX}NAME for an ACP agent."
    )


def acp_agents_setting(environ: Mapping[str, str] = os.environ) -> dict[str, tuple[str, ...]]:
    """ACP agents configured for this machine in ``SEEDLINE_ACP_AGENTS``."""
    lines = environ.get("SEEDLINE_ACP_AGENTS", "").splitlines()
    return parse_acp_agents([line for line in lines if line.strip()])
