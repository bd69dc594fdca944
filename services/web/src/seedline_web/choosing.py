"""Which machine and engine an MCP open uses when the person names neither: the repo's
live conversation, else its most recent open, else the only machine online. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from . import mcp_text
from .errors import WebError
from .tenant import Machine


@dataclass(frozen=True)
class Previous:
    """Where the repo was last worked on by the platform."""

    session_id: str
    node_id: str
    engine: str
    live: bool


def choose(machine: str | None, engine: str | None, previous: Previous | None,
           online: Sequence[Machine]) -> tuple[str, str]:
    """(node_id, engine), or a WebError saying what to name."""
    if machine is None:
        if previous is not None:
            machine = previous.node_id
        elif len(online) == 1:
            machine = online[0].node_id
        elif not online:
            raise WebError("runner_offline", mcp_text.NO_MACHINE_ONLINE)
        else:
            raise WebError("invalid_request", mcp_text.choose_machine(online))
    if engine is None:
        offered = next((m.engines for m in online if m.node_id == machine), None)
        if previous is not None and (offered is None or previous.engine in offered):
            engine = previous.engine
        elif offered is None:
            raise WebError("runner_offline", mcp_text.engines_unknown(machine))
        elif len(offered) == 1:
            engine = offered[0]
        elif not offered:
            raise WebError("invalid_request", mcp_text.no_engine(machine))
        else:
            raise WebError("invalid_request", mcp_text.choose_engine(machine, offered))
    return machine, engine
