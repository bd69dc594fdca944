"""Start-up of the `seedline` command: import time of `seedline --help` and `seedline status`.

Measured with `python -X importtime` (the sum of the top-level imports' cumulative times,
so the interpreter's own start is left out), several runs each, median with min and max,
beside the import time of a bare `python -c pass`. `status` runs against a NATS port where
nothing listens: it imports everything it needs at start-up, then stops at the connection.
The target is 0.3 s for each (issue 23); commands import their modules only when they run
(libs/cli/src/seedline_cli/lazy_commands.py).

    python -m bench.cli_startup [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from bench import report

TARGET_SECONDS = 0.3
COMMANDS = {"--help": ["--help"], "status": ["status"]}


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


def run_startup_bench(rounds: int = 7) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")}
    env["SEEDLINE_NATS_URL"] = "nats://127.0.0.1:1"  # nothing listens on port 1
    load_before = [round(x, 2) for x in os.getloadavg()]
    bare = report.spread(import_seconds(["-c", "pass"], env) for _ in range(rounds))
    measured = {
        name: report.spread(import_seconds(["-m", "seedline_cli", *args], env)
                            for _ in range(rounds))
        for name, args in COMMANDS.items()
    }
    result = {
        "benchmark": "cli_startup",
        "generated_at": report.stamp(),
        "rounds": rounds,
        "load_before": load_before,
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "bare_python_seconds": bare,
        "seconds": measured,
        "target_seconds": TARGET_SECONDS,
        "target_met": all(m["median"] <= TARGET_SECONDS for m in measured.values()),
    }
    return result


def markdown(result: dict) -> str:
    lines = [f"# seedline start-up: import time (median of {result['rounds']} runs)", "",
             "| command | import s (min-max) | target |", "|---|---|---|"]
    for name, s in result["seconds"].items():
        lines.append(f"| seedline {name} | {report.cell(s, 3)} | <= {TARGET_SECONDS} s |")
    lines.append(f"| python -c pass | {report.cell(result['bare_python_seconds'], 3)} | - |")
    lines += ["", f"Load average before and after: {result['load_before']}, "
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
