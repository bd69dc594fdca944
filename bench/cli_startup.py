"""Start-up of the `seedline` command: import time and wall time of `seedline --help` and
`seedline status`.

Import time is measured with `python -X importtime` (the sum of the top-level imports'
cumulative times, so the interpreter's own start is left out), wall time as the whole run
of the command; several runs each, median with min and max, beside a bare `python -c pass`.
`status` is measured twice: against a NATS port where nothing listens (what it imports
before it connects), and against a running system (nats-server, Postgres and the four
services, bench.memory.system) as a second shell of `seedline up` runs it (SEEDLINE_HOME
holds the embedded Postgres, which status asks on its socket), so every import of a whole
status counts. The target is 0.3 s of imports for each; commands import their modules
only when they run (libs/cli/src/seedline_cli/lazy_commands.py).

    python -m bench.cli_startup [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import report

TARGET_SECONDS = 0.3
UNREACHABLE = "nats://127.0.0.1:1"  # nothing listens on port 1


def import_seconds(argv: list[str], env: dict[str, str]) -> float:
    """Seconds of imports in one run of ``python -X importtime`` with these arguments."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=120)
    total = 0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line.split(":", 1)[1].split("|")
        if not name.startswith("  "):  # top level: one space after the bar, no nesting
            total += int(cumulative)
    return total / 1e6


def wall_seconds(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from the start of the command to its end, as a person waits for it."""
    started = time.perf_counter()
    subprocess.run([sys.executable, *argv], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)
    return time.perf_counter() - started


def _measure(runs: dict[str, tuple[list[str], dict[str, str]]], rounds: int) -> dict:
    measured: dict[str, dict] = {"import": {}, "wall": {}}
    for name, (args, env) in runs.items():
        argv = ["-m", "seedline_cli", *args]
        measured["import"][name] = report.spread(import_seconds(argv, env) for _ in range(rounds))
        measured["wall"][name] = report.spread(wall_seconds(argv, env) for _ in range(rounds))
    return measured


async def _against_a_running_system(base: dict[str, str], rounds: int) -> dict:
    from bench.memory import system

    async with system(prefix="seedline-bench-startup-") as running:
        home = Path(tempfile.mkdtemp(prefix="seedline-bench-home-"))
        (home / "postgres").symlink_to(running.postgres.data_dir.resolve())
        env = {**base, "SEEDLINE_NATS_URL": running.nats.url,
               "SEEDLINE_NATS_MONITOR_URL": running.nats.monitor_url,
               "SEEDLINE_HOME": str(home)}
        return await asyncio.to_thread(_measure, {"status": (["status"], env)}, rounds)


def run_startup_bench(rounds: int = 7) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")}
    quiet = {**base, "SEEDLINE_NATS_URL": UNREACHABLE}
    load_before = [round(x, 2) for x in os.getloadavg()]
    bare = report.spread(import_seconds(["-c", "pass"], quiet) for _ in range(rounds))
    alone = _measure({"--help": (["--help"], quiet),
                      "status (nothing listening)": (["status"], quiet)}, rounds)
    running = asyncio.run(_against_a_running_system(base, rounds))
    imports = {**alone["import"], "status (a running system)": running["import"]["status"]}
    walls = {**alone["wall"], "status (a running system)": running["wall"]["status"]}
    return {
        "benchmark": "cli_startup",
        "generated_at": report.stamp(),
        "rounds": rounds,
        "load_before": load_before,
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "bare_python_seconds": bare,
        "seconds": imports,
        "wall_seconds": walls,
        "target_seconds": TARGET_SECONDS,
        "target_met": all(m["median"] <= TARGET_SECONDS for m in imports.values()),
    }


def markdown(result: dict) -> str:
    lines = [f"# seedline start-up (median of {result['rounds']} runs)", "",
             "| command | import s (min-max) | wall s (min-max) | import target |",
             "|---|---|---|---|"]
    for name, s in result["seconds"].items():
        wall = result["wall_seconds"][name]
        lines.append(f"| seedline {name} | {report.cell(s, 3)} | {report.cell(wall, 3)} "
                     f"| <= {TARGET_SECONDS} s |")
    lines.append(f"| python -c pass | {report.cell(result['bare_python_seconds'], 3)} | - | - |")
    lines += ["", "A running system: nats-server (sync_interval: always), Postgres and the four "
              "services on this machine, status run as a second shell of `seedline up` runs it.",
              f"Load average before and after: {result['load_before']}, "
              f"{result['load_after']} (2 cores: a load above 2 stretches every figure)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    result = run_startup_bench(args.rounds)
    text = markdown(result)
    report.write("cli_startup", result, text)
    sys.stdout.write(text)
    return result


if __name__ == "__main__":
    main()
