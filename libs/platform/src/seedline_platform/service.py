"""Running a service: connect, start, run until SIGTERM/SIGINT, stop cleanly.

A service that owns a projection also answers `<console script> rebuild`: it replays
the streams into its own tables and writes JSON lines on stdout, `{"progress": ...}`
while it works and one `{"result": ...}` at the end, which is how `seedline rebuild`
drives it without importing the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from typing import Any, Awaitable, Callable, Protocol

from .logging import configure_logging, get_logger
from .settings import Settings, SettingsError
from .tasks import cancel_and_wait

log = get_logger(__name__)


class Service(Protocol):
    async def start(self) -> None: ...
    async def run(self) -> None: ...
    async def stop(self) -> None: ...


async def run_until_stopped(app: Service) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await app.start()
    except BaseException:
        # Close what started: psycopg's pool workers take the cancel asyncio.run sends at
        # exit as a failed connection attempt and go on, and the process would never end
        # (a supervisor restarts a service that exits, not one that hangs).
        with contextlib.suppress(Exception):
            await app.stop()
        raise
    runner = asyncio.create_task(app.run())
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
    quiesce = getattr(app, "quiesce", None)
    if quiesce is not None and runner not in done:
        await quiesce()
    waiter.cancel()
    await cancel_and_wait(runner)
    await app.stop()
    if runner in done and runner.exception():
        raise runner.exception()  # type: ignore[misc]


Progress = Callable[..., None]
Rebuild = Callable[[Settings, Progress], Awaitable[dict[str, Any]]]
REBUILD_COMMAND = "rebuild"


def main_for(name: str, create_app, rebuild: Rebuild | None = None) -> None:
    """The console-script body every service shares; `rebuild` answers `<script> rebuild`,
    a run that returns a dict with before_digest and after_digest."""
    args = sys.argv[1:]
    if args and not (rebuild is not None and args == [REBUILD_COMMAND]):
        usage = f" | {name} {REBUILD_COMMAND}" if rebuild is not None else ""
        print(f"{name}: unexpected arguments {' '.join(args)!r}; usage: {name}{usage}",
              file=sys.stderr)
        raise SystemExit(2)
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args:
        # stdout carries the JSON lines; logs go to stderr, errors only.
        configure_logging("error", name)
        raise SystemExit(_run_rebuild(name, rebuild, settings))
    configure_logging(settings.log_level, name)
    try:
        asyncio.run(run_until_stopped(create_app(settings)))
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        log.error("service_failed", error=str(exc))
        print(f"{name}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def _run_rebuild(name: str, rebuild: Rebuild, settings: Settings) -> int:
    def progress(**figures: Any) -> None:
        _line({"progress": figures})

    try:
        result = asyncio.run(rebuild(settings, progress))
    except Exception as exc:
        _line({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    _line({"result": result})
    return 0


def _line(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
