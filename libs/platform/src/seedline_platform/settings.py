"""Settings, read from the environment in one place (DESIGN.md rule 6)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:  # the brief's code is imported where a budget is read, not by every command
    from seedline_core.brief import Budget


class SettingsError(ValueError):
    """A setting whose value cannot be used; the message names the variable."""


# Every variable a Seedline process reads, with its default and meaning.
# The README's configuration table and the compose test are checked against it.
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "SEEDLINE_NATS_URL": ("nats://127.0.0.1:4222", "NATS server(s), comma-separated"),
    "SEEDLINE_NATS_MONITOR_URL": (
        "http://127.0.0.1:8222",
        "nats-server monitoring endpoint(s), comma-separated, used to check sync_interval: "
        "always at start (on a cluster, every node's: each that answers is checked)",
    ),
    "SEEDLINE_DATABASE_URL": (
        "embedded Postgres under SEEDLINE_HOME",
        "Postgres connection URL for the projections",
    ),
    "SEEDLINE_HOME": ("./.seedline", "where `seedline up` keeps the embedded servers' data"),
    "SEEDLINE_MIN_FREE_MB": (
        "100",
        "free space (megabytes) the disk of SEEDLINE_HOME must keep: below it the disk counts "
        "as full, new work is refused with a sentence that says so and `seedline up` waits "
        "for room",
    ),
    "SEEDLINE_STRICT_DURABILITY": ("0", "1 refuses to start when durability is weaker than required"),
    "SEEDLINE_LOG_LEVEL": ("info", "debug, info, warning or error"),
    "SEEDLINE_RESUME_WINDOW_HOURS": ("96", "resume window of the continuity decision (4 days)"),
    "SEEDLINE_STATELESS_ENGINES": ("raw,openai", "engines that keep no conversation of their own"),
    "SEEDLINE_IDLE_STOP_MINUTES": ("360", "stop a conversation idle this long (6 hours)"),
    "SEEDLINE_IDLE_SWEEP_SECONDS": ("30", "how often the gateway looks for idle conversations"),
    "SEEDLINE_OPEN_TIMEOUT_SECONDS": ("30", "longest an open or relocation waits for the machine"),
    "SEEDLINE_LAUNCH_TIMEOUT_SECONDS": ("10", "longest the gateway waits for a launch reply"),
    # Read by the runner (seedline_runner.runner); listed here so the README's table is whole.
    "SEEDLINE_RESUME_PROOF_SECONDS": (
        "5", "longest a runner's launch reply waits for an engine's first line to accept a resume"
    ),
    "SEEDLINE_MAX_DELIVER": ("5", "deliveries before a message that keeps failing is parked"),
    "SEEDLINE_BATCH_SIZE": ("256", "messages fetched and applied per transaction"),
    "SEEDLINE_INGEST_PARTITIONS": (
        "1",
        "timeline-writers sharing ingest by instance (the server maps ingest subjects to them)",
    ),
    "SEEDLINE_INGEST_PARTITION": ("0", "which of those partitions this timeline-writer takes"),
    "SEEDLINE_NATS_CA_FILE": (
        "(none)",
        "CA certificate (PEM) to trust for a nats-server behind TLS (tls:// URLs); "
        "see deploy/nats-tls.conf",
    ),
    "SEEDLINE_HTTP_HOST": ("127.0.0.1", "address a service serves /metrics, /healthz and /readyz on"),
    "SEEDLINE_HTTP_PORT": (
        "0",
        "side port of /metrics, /healthz and /readyz; 0: any free port (logged at start, "
        "shown by `seedline status`); a port set here that is taken is logged as an error",
    ),
    "SEEDLINE_OTLP_ENDPOINT": (
        "(none)",
        "OpenTelemetry collector (OTLP over HTTP, e.g. http://127.0.0.1:4318); "
        "OTEL_EXPORTER_OTLP_ENDPOINT works too",
    ),
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
    "SEEDLINE_WEB_HEADER_TIMEOUT_SECONDS": (
        "10",
        "longest the web process waits for a request's headers; the connection is then closed",
    ),
    "SEEDLINE_WEB_BODY_TIMEOUT_SECONDS": (
        "30",
        "longest the web process waits for a request's whole body; it then answers 408",
    ),
    "SEEDLINE_WEB_MAX_CONNECTIONS_PER_CLIENT": (
        "100",
        "open connections one client address may hold to the web process; more get 503",
    ),
    "SEEDLINE_WEB_MAX_STREAMS_PER_TOKEN": (
        "20",
        "notice and console streams one token (or its console logins) may hold open; more get 429",
    ),
    "SEEDLINE_WEB_MAX_STREAMS_PER_CLIENT": (
        "40",
        "notice and console streams one client address may hold open; more get 429",
    ),
    "SEEDLINE_BRIEF_BUDGETS": (
        "(none: 60:12000 for every engine)",
        "brief budget per engine as ENGINE=ROWS:CHARS, comma-separated "
        "(e.g. claude=120:40000,codex=80:20000); rows 11 to 1000, characters 3200 to 100000",
    ),
    "SEEDLINE_BRIEF_SUMMARY_URL": (
        "(none: no summary)",
        "OpenAI-compatible chat endpoint (e.g. http://127.0.0.1:8000/v1) that writes a labelled "
        "summary of what a brief leaves out",
    ),
    "SEEDLINE_BRIEF_SUMMARY_MODEL": ("(none)", "model asked for that summary; needed with the URL"),
    "SEEDLINE_BRIEF_SUMMARY_KEY_ENV": (
        "OPENAI_API_KEY",
        "environment variable holding that endpoint's API key (unset: no key is sent)",
    ),
    "SEEDLINE_BRIEF_SUMMARY_TIMEOUT_SECONDS": (
        "10",
        "longest the composer waits for a summary; past it the brief goes without one",
    ),
    "SEEDLINE_SEAL_AT_REST": (
        "1",
        "seal entry content and brief text at rest with a key per instance (0: store them "
        "plain)",
    ),
    "SEEDLINE_REDACT_AT_INGEST": (
        "0",
        "1 leaves secrets out of entries as the timeline-writer stores them (briefs leave "
        "them out always)",
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


def _flag(env: Mapping[str, str], name: str) -> bool:
    value = _get(env, name)
    if value not in ("0", "1"):
        raise SettingsError(f"{name} must be 0 or 1, not {value!r}")
    return value == "1"


def _brief_budgets(env: Mapping[str, str]) -> tuple[tuple[str, Budget], ...]:
    """SEEDLINE_BRIEF_BUDGETS: `claude=120:40000,codex=80:20000`."""
    if not env.get("SEEDLINE_BRIEF_BUDGETS", "").strip():
        return ()
    from seedline_core.brief import MAX_BUDGET, MIN_BUDGET, Budget

    name = "SEEDLINE_BRIEF_BUDGETS"
    budgets: dict[str, Budget] = {}
    for item in filter(None, (part.strip() for part in env.get(name, "").split(","))):
        engine, _, value = (text.strip() for text in item.partition("="))
        rows, colon, chars = value.partition(":")
        if not engine or not colon:
            raise SettingsError(
                f"{name} must be ENGINE=ROWS:CHARS pairs separated by commas, such as "
                f"claude=120:40000,codex=80:20000; {item!r} is not one"
            )
        try:
            budget = Budget(int(rows), int(chars))
        except ValueError:
            raise SettingsError(
                f"{name}: the rows and characters of {engine} must be whole numbers, "
                f"as in {engine}=120:40000, not {value!r}"
            ) from None
        if engine in budgets:
            raise SettingsError(f"{name} names {engine} twice; give each engine one budget")
        for what, got, low, high in (
            ("rows", budget.rows, MIN_BUDGET.rows, MAX_BUDGET.rows),
            ("characters", budget.chars, MIN_BUDGET.chars, MAX_BUDGET.chars),
        ):
            if not low <= got <= high:
                why = (
                    "room for the person's instructions and the newest entry"
                    if got < low
                    else "a brief that travels in one message"
                )
                raise SettingsError(
                    f"{name}: the {what} of {engine} must be between {low} and {high} "
                    f"({why}), not {got}"
                )
        budgets[engine] = budget
    return tuple(budgets.items())


def _summary_url(env: Mapping[str, str]) -> str:
    url = env.get("SEEDLINE_BRIEF_SUMMARY_URL") or ""
    if url and not url.startswith(("http://", "https://")):
        raise SettingsError(
            f"SEEDLINE_BRIEF_SUMMARY_URL must be an http:// or https:// URL, not {url!r}"
        )
    if url and not env.get("SEEDLINE_BRIEF_SUMMARY_MODEL"):
        raise SettingsError(
            "SEEDLINE_BRIEF_SUMMARY_URL is set but SEEDLINE_BRIEF_SUMMARY_MODEL is not; "
            "name the model to ask, or unset the URL to offer briefs without a summary"
        )
    return url


def _partition(env: Mapping[str, str]) -> int:
    partition = _int(env, "SEEDLINE_INGEST_PARTITION", minimum=0)
    partitions = _int(env, "SEEDLINE_INGEST_PARTITIONS")
    if partition >= partitions:
        raise SettingsError(
            f"SEEDLINE_INGEST_PARTITION must be below SEEDLINE_INGEST_PARTITIONS ({partitions}), "
            f"not {partition}"
        )
    return partition


def default_database_url(home: Path) -> str:
    """The embedded Postgres listens on a Unix socket inside its data folder."""
    return f"postgresql://postgres@/seedline?host={(home / 'postgres').resolve()}"


@dataclass(frozen=True)
class Settings:
    nats_url: str = "nats://127.0.0.1:4222"
    nats_monitor_url: str = "http://127.0.0.1:8222"
    database_url: str = ""
    home: Path = Path(".seedline")
    min_free_mb: int = 100
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
    ingest_partitions: int = 1
    ingest_partition: int = 0
    stream_replicas: int = 1
    nats_ca_file: str | None = None
    http_host: str = "127.0.0.1"
    http_port: int = 0  # 0: any free port, so copies run side by side (CONTRACT.md)
    otlp_endpoint: str | None = None
    web_host: str = "127.0.0.1"
    web_port: int = 8080
    web_max_body_bytes: int = 4 * 1024 * 1024
    web_header_timeout_seconds: float = 10.0
    web_body_timeout_seconds: float = 30.0
    web_max_connections_per_client: int = 100
    web_max_streams_per_token: int = 20
    web_max_streams_per_client: int = 40
    brief_budgets: tuple[tuple[str, Budget], ...] = ()
    brief_summary_url: str = ""
    brief_summary_model: str = ""
    brief_summary_key_env: str = "OPENAI_API_KEY"
    brief_summary_timeout_seconds: float = 10.0
    # Leave secrets out of entries as they are stored, not only out of briefs.
    redact_at_ingest: bool = False
    # Seal entry content and brief text at rest with a key per instance.
    seal_at_rest: bool = True
    extra: dict[str, str] = field(default_factory=dict)

    def brief_budget(self, engine: str) -> Budget:
        """The budget of a brief for `engine`: its own, or the default."""
        from seedline_core.brief import DEFAULT_BUDGET

        return dict(self.brief_budgets).get(engine, DEFAULT_BUDGET)

    def nats_tls(self):
        """The TLS context to connect with when a CA is set, else None."""
        if not self.nats_ca_file:
            return None
        import ssl

        try:
            return ssl.create_default_context(cafile=self.nats_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise SettingsError(
                f"SEEDLINE_NATS_CA_FILE {self.nats_ca_file!r} cannot be read as a CA: {exc}"
            ) from None

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
            min_free_mb=_int(env, "SEEDLINE_MIN_FREE_MB", minimum=0),
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
            ingest_partitions=_int(env, "SEEDLINE_INGEST_PARTITIONS"),
            ingest_partition=_partition(env),
            stream_replicas=_int(env, "SEEDLINE_STREAM_REPLICAS"),
            nats_ca_file=env.get("SEEDLINE_NATS_CA_FILE") or None,
            http_host=_get(env, "SEEDLINE_HTTP_HOST"),
            http_port=_int(env, "SEEDLINE_HTTP_PORT", minimum=0),
            otlp_endpoint=(
                env.get("SEEDLINE_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None
            ),
            web_host=_get(env, "SEEDLINE_WEB_HOST"),
            web_port=_int(env, "SEEDLINE_WEB_PORT"),
            web_max_body_bytes=_int(env, "SEEDLINE_WEB_MAX_BODY_BYTES", minimum=1024),
            web_header_timeout_seconds=float(_int(env, "SEEDLINE_WEB_HEADER_TIMEOUT_SECONDS")),
            web_body_timeout_seconds=float(_int(env, "SEEDLINE_WEB_BODY_TIMEOUT_SECONDS")),
            web_max_connections_per_client=_int(env, "SEEDLINE_WEB_MAX_CONNECTIONS_PER_CLIENT"),
            web_max_streams_per_token=_int(env, "SEEDLINE_WEB_MAX_STREAMS_PER_TOKEN"),
            web_max_streams_per_client=_int(env, "SEEDLINE_WEB_MAX_STREAMS_PER_CLIENT"),
            brief_budgets=_brief_budgets(env),
            brief_summary_url=_summary_url(env),
            brief_summary_model=env.get("SEEDLINE_BRIEF_SUMMARY_MODEL") or "",
            brief_summary_key_env=_get(env, "SEEDLINE_BRIEF_SUMMARY_KEY_ENV"),
            brief_summary_timeout_seconds=float(
                _int(env, "SEEDLINE_BRIEF_SUMMARY_TIMEOUT_SECONDS")
            ),
            redact_at_ingest=_flag(env, "SEEDLINE_REDACT_AT_INGEST"),
            seal_at_rest=_flag(env, "SEEDLINE_SEAL_AT_REST"),
        )
