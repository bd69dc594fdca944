"""What every benchmark in the suite shares: statistics, conditions, writing results.

Figures are medians over runs with their min and max; percentiles are nearest
rank. Results go to bench/results/ (gitignored) as <name>.json and <name>.md.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the samples at or below it."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples")
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def spread(values: Iterable[float]) -> dict:
    """Median, min and max of several runs, and the runs themselves."""
    runs = list(values)
    return {
        "median": statistics.median(runs),
        "min": min(runs),
        "max": max(runs),
        "runs": [round(v, 4) for v in runs],
    }


def cell(s: dict | None, digits: int = 0, unit: str = "") -> str:
    """'median (min - max)' for a spread, '-' for nothing."""
    if not s:
        return "-"
    f = f"{{:,.{digits}f}}"
    if s["min"] == s["max"]:
        return f"{f.format(s['median'])}{unit}"
    return f"{f.format(s['median'])}{unit} ({f.format(s['min'])} - {f.format(s['max'])})"


def machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }


def server_facts(monitor_url: str, database_url: str) -> dict:
    """nats-server version and sync setting, Postgres version and durability settings."""
    import psycopg

    with urllib.request.urlopen(f"{monitor_url}/varz", timeout=5) as response:
        varz = json.loads(response.read())
    with psycopg.connect(database_url) as conn:
        pg_version = conn.execute("SHOW server_version").fetchone()[0]
        settings = dict(
            conn.execute(
                "SELECT name, setting || COALESCE(unit, '') FROM pg_settings"
                " WHERE name IN ('shared_buffers', 'fsync', 'synchronous_commit', 'wal_sync_method')"
            ).fetchall()
        )
    return {
        "nats_server": varz.get("version"),
        "nats_sync_always": bool(varz.get("jetstream", {}).get("config", {}).get("sync_always")),
        "postgres": pg_version,
        "postgres_settings": settings,
    }


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write(name: str, result: dict, markdown: str) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (RESULTS_DIR / f"{name}.md").write_text(markdown)


def yes_no(met: bool | None) -> str:
    return "-" if met is None else ("yes" if met else "**no**")
