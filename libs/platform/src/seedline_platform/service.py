"""Running a service: connect, start, run until SIGTERM/SIGINT, stop cleanly."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Protocol

from .logging import configure_logging, get_logger
from .settings import Settings, SettingsError

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
    await app.start()
    runner = asyncio.create_task(app.run())
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
    quiesce = getattr(app, "quiesce", None)
    if quiesce is not None and runner not in done:
        await quiesce()
    runner.cancel()
    waiter.cancel()
    await asyncio.gather(runner, waiter, return_exceptions=True)
    await app.stop()
    if runner in done and runner.exception():
        raise runner.exception()  # type: ignore[misc]


def main_for(name: str, create_app) -> None:
    """The console-script body every service shares."""
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    configure_logging(settings.log_level, name)
    try:
        asyncio.run(run_until_stopped(create_app(settings)))
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        log.error("service_failed", error=str(exc))
        print(f"{name}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
