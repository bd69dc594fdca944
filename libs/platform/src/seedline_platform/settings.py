"""Settings, read from the environment in one place (DESIGN.md rule 6)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Mapping


class SettingsError(ValueError):
    """A setting whose value cannot be used; the message names the variable."""


# Every variable a Seedline process reads, with its default and meaning.
# The README's configuration table and the compose test are checked against it.
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "SEEDLINE_NATS_URL": ("nats://127.0.0.1:4222", "NATS server(s), comma-separated"),
    "SEEDLINE_NATS_MONITOR_URL": (
        "http://127.0.0.1:8222",
        "nats-server monitoring endpoint, used to check sync_interval: always at start",
    ),
    "SEEDLINE_DATABASE_URL": (
        "embedded Postgres under SEEDLINE_HOME",
        "Postgres connection URL for the projections",
    ),
    "SEEDLINE_HOME": ("./.seedline", "where `seedline up` keeps the embedded servers' data"),
    "SEEDLINE_STRICT_DURABILITY": ("0", "1 refuses to start when durability is weaker than required"),
    "SEEDLINE_LOG_LEVEL": ("info", "debug, info, warning or error"),
    "SEEDLINE_RESUME_WINDOW_HOURS": ("96", "resume window of the continuity decision (4 days)"),
    "SEEDLINE_STATELESS_ENGINES": ("raw,openai", "engines that keep no conversation of their own"),
    "SEEDLINE_IDLE_STOP_MINUTES": ("360", "stop a conversation idle this long (6 hours)"),
    "SEEDLINE_IDLE_SWEEP_SECONDS": ("30", "how often the gateway looks for idle conversations"),
    "SEEDLINE_OPEN_TIMEOUT_SECONDS": ("30", "longest an open or relocation waits for the machine"),
    "SEEDLINE_LAUNCH_TIMEOUT_SECONDS": ("10", "longest the gateway waits for a launch reply"),
    "SEEDLINE_MAX_DELIVER": ("5", "deliveries before a message that keeps failing is parked"),
    "SEEDLINE_BATCH_SIZE": ("256", "messages fetched and applied per transaction"),
    "SEEDLINE_STREAM_REPLICAS": (
        "1",
        "copies of each stream a service creates; 3 on a three-server NATS cluster",
    ),
    "SEEDLINE_WEB_HOST": (
        "127.0.0.1",
        "address the web process (HTTP API, console, MCP) listens on",
    ),
    "SEEDLINE_WEB_PORT": ("8080", "port of the web process"),
    "SEEDLINE_WEB_MAX_BODY_BYTES": (
        "4194304",
        "largest HTTP request body the web process reads (4 MiB)",
    ),
}


def _get(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    return value if value not in (None, "") else SETTINGS_DOC[name][0]


def _int(env: Mapping[str, str], name: str, minimum: int = 1) -> int:
    raw = _get(env, name)
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a whole number, not {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be at least {minimum}, not {value}")
    return value


def default_database_url(home: Path) -> str:
    """The embedded Postgres listens on a Unix socket inside its data folder."""
    return f"postgresql://postgres@/seedline?host={(home / 'postgres').resolve()}"


@dataclass(frozen=True)
class Settings:
    nats_url: str = "nats://127.0.0.1:4222"
    nats_monitor_url: str = "http://127.0.0.1:8222"
    database_url: str = ""
    home: Path = Path(".seedline")
    strict_durability: bool = False
    log_level: str = "info"
    resume_window: timedelta = timedelta(hours=96)
    stateless_engines: frozenset[str] = frozenset({"raw", "openai"})
    idle_stop: timedelta = timedelta(minutes=360)
    idle_sweep_seconds: float = 30.0
    open_timeout_seconds: float = 30.0
    launch_timeout_seconds: float = 10.0
    max_deliver: int = 5
    batch_size: int = 256
    stream_replicas: int = 1
    web_host: str = "127.0.0.1"
    web_port: int = 8080
    web_max_body_bytes: int = 4 * 1024 * 1024
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def nats_servers(self) -> list[str]:
        return [s.strip() for s in self.nats_url.split(",") if s.strip()]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        home = Path(_get(env, "SEEDLINE_HOME"))
        strict = _get(env, "SEEDLINE_STRICT_DURABILITY")
        if strict not in ("0", "1"):
            raise SettingsError(f"SEEDLINE_STRICT_DURABILITY must be 0 or 1, not {strict!r}")
        level = _get(env, "SEEDLINE_LOG_LEVEL").lower()
        if level not in ("debug", "info", "warning", "error"):
            raise SettingsError(f"SEEDLINE_LOG_LEVEL must be debug, info, warning or error, not {level!r}")
        engines = frozenset(
            e.strip() for e in _get(env, "SEEDLINE_STATELESS_ENGINES").split(",") if e.strip()
        )
        return cls(
            nats_url=_get(env, "SEEDLINE_NATS_URL"),
            nats_monitor_url=_get(env, "SEEDLINE_NATS_MONITOR_URL"),
            database_url=env.get("SEEDLINE_DATABASE_URL") or default_database_url(home),
            home=home,
            strict_durability=strict == "1",
            log_level=level,
            resume_window=timedelta(hours=_int(env, "SEEDLINE_RESUME_WINDOW_HOURS")),
            stateless_engines=engines,
            idle_stop=timedelta(minutes=_int(env, "SEEDLINE_IDLE_STOP_MINUTES")),
            idle_sweep_seconds=float(_int(env, "SEEDLINE_IDLE_SWEEP_SECONDS")),
            open_timeout_seconds=float(_int(env, "SEEDLINE_OPEN_TIMEOUT_SECONDS")),
            launch_timeout_seconds=float(_int(env, "SEEDLINE_LAUNCH_TIMEOUT_SECONDS")),
            max_deliver=_int(env, "SEEDLINE_MAX_DELIVER", minimum=2),
            batch_size=_int(env, "SEEDLINE_BATCH_SIZE"),
            stream_replicas=_int(env, "SEEDLINE_STREAM_REPLICAS"),
            web_host=_get(env, "SEEDLINE_WEB_HOST"),
            web_port=_int(env, "SEEDLINE_WEB_PORT"),
            web_max_body_bytes=_int(env, "SEEDLINE_WEB_MAX_BODY_BYTES", minimum=1024),
        )
