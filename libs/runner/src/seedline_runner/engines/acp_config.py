"""How a machine names its ACP agents and answers their permission requests.

Kept apart from the engine so a command line can check its options without loading
the protocol's SDK.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Literal

ACP_ENGINE_PREFIX = "acp:"
# checkout (the default): allow what touches only the conversation's checkout (a tool call
# naming no file counts as inside: commands run there), refuse the rest; allow and
# reject: every request.
PermissionPolicy = Literal["checkout", "allow", "reject"]
PERMISSION_POLICIES: tuple[PermissionPolicy, ...] = ("checkout", "allow", "reject")
DEFAULT_PERMISSION_POLICY: PermissionPolicy = "checkout"


def acp_agent_name(engine_name: str) -> str | None:
    """``gemini`` for ``acp:gemini``; None for an engine that is not an ACP agent."""
    if not engine_name.startswith(ACP_ENGINE_PREFIX):
        return None
    return engine_name[len(ACP_ENGINE_PREFIX) :] or None


def parse_acp_agents(specs: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``NAME=command args`` pairs (``--acp`` options, ``SEEDLINE_ACP_AGENTS`` lines)."""
    agents: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        name, sep, command = spec.partition("=")
        name = name.strip()
        if name.startswith(ACP_ENGINE_PREFIX):
            name = name[len(ACP_ENGINE_PREFIX) :]
        argv = tuple(shlex.split(command)) if sep else ()
        if not name or not argv:
            raise ValueError(
                'An ACP agent is NAME=COMMAND, for example gemini="gemini --experimental-acp"; '
                f"not {spec!r}."
            )
        agents[name] = argv
    return agents
