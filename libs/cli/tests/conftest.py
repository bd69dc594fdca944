"""Real servers for the CLI tests: a timeline-writer running in a background thread."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator

import pytest
import structlog
from typer.testing import CliRunner, Result

from seedline_cli import console as cli_console
from seedline_cli.main import app
from seedline_platform.logging import configure_logging
from seedline_platform.settings import Settings
from seedline_devtools.testing import running
from seedline_timeline_writer.app import create_app


class InBackground:
    """Runs a service in its own event loop on a thread, so tests can call the CLI directly."""

    def __init__(self, app_) -> None:
        self.app = app_
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def __enter__(self):
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the service did not start within 60 s")
        if self._error:
            raise self._error
        return self.app

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            async with running(self.app):
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


def env_for(settings: Settings) -> dict[str, str]:
    return {
        "SEEDLINE_NATS_URL": settings.nats_url,
        "SEEDLINE_NATS_MONITOR_URL": settings.nats_monitor_url,
        "SEEDLINE_DATABASE_URL": settings.database_url,
        "SEEDLINE_HOME": str(settings.home),
    }


@pytest.fixture
def cli_env(settings: Settings) -> Iterator[dict[str, str]]:
    """The environment a person would have, with a timeline-writer answering."""
    # Service logs go to stderr, never into the stdout a command's --json is read from.
    configure_logging("warning", "cli-tests")
    try:
        with InBackground(create_app(settings)):
            yield env_for(settings)
    finally:
        structlog.reset_defaults()


class Cli:
    """The real `seedline` command, invoked in-process."""

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> Result:
        # A new process reads COLUMNS when its consoles are made, at import; in one test
        # process they were made once, with whatever COLUMNS the first import saw.
        columns = (env or {}).get("COLUMNS") or os.environ.get("COLUMNS")
        for console in (cli_console.out, cli_console.err):
            console.width = int(columns) if columns else None
        return CliRunner().invoke(app, list(args), env=env)

    def read_json(self, env: dict[str, str], *args: str) -> dict:
        result = self("timeline", *args, "--json", env=env)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def wait_for_entries(
        self, env: dict[str, str], count: int, *args: str, timeout: float = 15.0
    ) -> dict:
        """Entries published to the ingest stream become readable a moment later."""
        deadline = time.monotonic() + timeout
        while True:
            reply = self.read_json(env, *args)
            if len(reply["entries"]) >= count or time.monotonic() > deadline:
                return reply
            time.sleep(0.1)


@pytest.fixture
def seedline() -> Cli:
    return Cli()
