"""The entry point a command line wraps: connect, run a runner until told to stop."""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import nats
import structlog

from seedline_contracts.subjects import runner_inbox_prefix
from seedline_contracts.tokens import escape_token

from .checkouts import Checkouts
from .worktree.snapshot import Limits
from .connection_log import connection_callbacks
from .engines.registry import EngineOptions, build_engines
from .tracing import configure_tracing
from .runner import DEFAULT_PRESENCE_INTERVAL_SECONDS, Runner

log = structlog.get_logger(__name__)

CLOSE_SECONDS = 0.5

_ENGINE_OPTION_NAMES = frozenset(f.name for f in fields(EngineOptions))


class CredentialsRefused(Exception):
    """NATS refused the machine's credentials while it ran: it was removed, or its line
    replaced. The runner stopped; trying again would be refused again."""


async def run_runner(
    nats_url: str | Sequence[str],
    node_id: str,
    label: str,
    engine_names: Sequence[str],
    *,
    presence_interval: float = DEFAULT_PRESENCE_INTERVAL_SECONDS,
    stop_signals: bool = True,
    instances: Sequence[str] = (),
    checkouts: Checkouts = Checkouts(),
    state_dir: Path | None = None,
    worktree_limits: Limits = Limits(),
    tls: ssl.SSLContext | None = None,
    user: str | None = None,
    password: str | None = None,
    **engine_options: Any,
) -> None:
    """Serve ``node_id`` until cancelled (or SIGTERM/SIGINT), then stop cleanly.

    ``instances``: the only instances this machine serves (empty: every instance).
    ``checkouts``: where each repo is checked out (``load_checkouts``; default: the
    current directory for every conversation).
    ``state_dir``: what a run started again must know, such as the step each engine
    was on (default: ``runners/<node>`` under SEEDLINE_HOME, ``./.seedline``).
    ``worktree_limits``: the most a conversation's saved checkout may hold (CONTRACT.md 6).
    ``tls``, ``user``, ``password``: how a machine that joined a platform connects (its CA,
    its own NATS user); credentials may ride in the URL instead. Raises CredentialsRefused
    when NATS refuses them while it runs.
    ``engine_options`` are the fields of ``EngineOptions`` (``scripted_resumable``,
    ``claude_executable``, ``claude_workdir``, ``claude_args``, ``codex_executable``,
    ``codex_args``, ``openai_base_url``, ``openai_model``, ``openai_api_key_env``,
    ``openai_system_prompt``). A ValueError says what in them cannot be used.
    """
    unknown = set(engine_options) - _ENGINE_OPTION_NAMES
    if unknown:
        raise TypeError(f"unknown engine options: {', '.join(sorted(unknown))}")
    if not engine_names:
        raise ValueError("A runner needs at least one engine.")
    engines = build_engines(engine_names, EngineOptions(**engine_options))
    tracing = configure_tracing(node_id)
    refused = asyncio.Event()
    letting_go = asyncio.Event()
    # The inbox prefix is the one a least-privilege runner user may subscribe to.
    nc = await nats.connect(
        servers_of(nats_url),
        name=f"seedline-runner:{node_id}",
        inbox_prefix=runner_inbox_prefix(node_id).encode(),
        max_reconnect_attempts=-1,
        tls=tls, user=user, password=password,
        **connection_callbacks(node_id, on_refused=refused.set, letting_go=letting_go.is_set),
    )
    try:
        runner = Runner(
            nc,
            node_id,
            label,
            engines,
            presence_interval=presence_interval,
            instances=instances,
            checkouts=checkouts,
            state_dir=state_dir or default_state_dir(node_id),
            worktree_limits=worktree_limits,
        )
        await _serve_until_stopped(runner, stop_signals, refused)
    finally:
        for engine in engines.values():
            close = getattr(engine, "aclose", None)
            if close is not None:
                await close()
        letting_go.set()
        await _let_go(nc)
        if tracing is not None:
            tracing.shutdown()


def servers_of(nats_url: str | Sequence[str]) -> list[str]:
    """SEEDLINE_NATS_URL's servers: one URL, or a cluster's, separated by commas (a joined
    machine's configuration holds them as a list)."""
    urls = nats_url.split(",") if isinstance(nats_url, str) else nats_url
    return [url.strip() for url in urls if url.strip()]


def default_state_dir(node_id: str) -> Path:
    home = Path(os.environ.get("SEEDLINE_HOME") or ".seedline")
    return (home / "runners" / escape_token(node_id)).resolve()


async def _let_go(nc) -> None:
    """Drain what is pending when NATS is there; when it is not, close at once: a drain
    would wait on a reconnect that may never come (Ctrl-C took 5 to 14 s)."""
    if nc.is_connected:
        try:
            await asyncio.wait_for(nc.drain(), CLOSE_SECONDS)
            return
        except Exception:
            pass
    if not nc.is_closed:
        # Closing a connection whose socket is gone raises (ConnectionResetError): it is
        # closed all the same, and the stop goes on.
        try:
            await asyncio.wait_for(nc.close(), CLOSE_SECONDS)
        except Exception:
            pass


async def _serve_until_stopped(runner: Runner, stop_signals: bool,
                               refused: asyncio.Event) -> None:
    # What ends the runner, set as well as its task is cancelled: a cancellation can be lost
    # (Python 3.11's wait_for drops one that lands as the awaited reply arrives, as a stop
    # signal right after the first presence put did), and then the run sees this instead.
    stopping = asyncio.Event()
    serving = asyncio.create_task(runner.run(stopping), name="runner")
    signalled = asyncio.Event()

    def stop() -> None:
        stopping.set()
        serving.cancel()

    async def stop_when_refused() -> None:
        await refused.wait()
        stop()

    watching = asyncio.create_task(stop_when_refused(), name="credentials")

    def on_signal() -> None:
        # Said, so that a stop that takes long can be told from a signal that never came.
        log.info("runner_stopping", node_id=runner.node_id)
        signalled.set()
        stop()

    loop = asyncio.get_running_loop()
    installed: list[int] = []
    if stop_signals:
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(signum, on_signal)
                installed.append(signum)
            except (NotImplementedError, RuntimeError):
                pass
    try:
        await serving
    except asyncio.CancelledError:
        # Let the runner finish its clean stop before the connection goes away.
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        if not (signalled.is_set() or refused.is_set()):
            raise
    finally:
        watching.cancel()
        for signum in installed:
            loop.remove_signal_handler(signum)
    if refused.is_set():
        raise CredentialsRefused(runner.node_id)
