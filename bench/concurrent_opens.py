"""Concurrent opens: many callers on many repos at once, against one caller in the same run.

The four services and a scripted runner each run as their own process on real servers
(bench.open_latency.start_system). First one caller opens the repos one after another;
then `callers` callers open together, each on a repo of its own, `opens` times each.
Reported: opens/s and p50/p99 request -> reply for both, the throughput ratio
(concurrent / single) and every failure. The open path's rule holds under load too:
one conversation live per repo, checked after the run (CONTRACT.md 4).

    python -m bench.concurrent_opens [--callers 50] [--opens 10] [--rounds 3]

Writes bench/results/concurrent_opens.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

from bench import report
from bench.open_latency import (INSTANCE, live_per_repo, open_once, start_system, summarise,
                                warm_up)

NAME = "concurrent_opens"


def repo_of(caller: int) -> str:
    return f"bench/concurrent-{caller:03d}"


async def _opens(nc, repos: list[str], per_repo: int) -> tuple[list[float], list, float]:
    """Each repo opened `per_repo` times, its opens one after another; the repos together.
    Returns (latencies in ms, failures, wall seconds)."""
    latencies: list[float] = []
    failures: list = []

    async def caller(repo: str) -> None:
        for _ in range(per_repo):
            started, done, reply = await open_once(nc, repo, timeout=60.0)
            if reply.get("ok"):
                latencies.append((done - started) * 1000)
            else:
                failures.append(reply.get("error"))

    began = time.perf_counter()
    await asyncio.gather(*(caller(repo) for repo in repos))
    return latencies, failures, time.perf_counter() - began


async def _round(callers: int, opens: int) -> dict:
    repos = [repo_of(n) for n in range(callers)]
    with tempfile.TemporaryDirectory(prefix="seedline-bench-concurrent-") as folder:
        async with AsyncExitStack() as stack:
            system = await start_system(Path(folder), stack)
            nc = system["nc"]
            await warm_up(nc, repos[0], 3)
            load = os.getloadavg()[0]
            for repo in repos:  # each repo's first open (fresh), so both runs find history
                await _opens(nc, [repo], 1)
            one_caller, one_failed, one_wall = [], [], 0.0
            for _ in range(opens):
                for repo in repos:
                    latencies, failed, wall = await _opens(nc, [repo], 1)
                    one_caller += latencies
                    one_failed += failed
                    one_wall += wall
            together, together_failed, together_wall = await _opens(nc, repos, opens)
            listed = await live_per_repo(nc, {INSTANCE})
            live = {repo: listed.get((INSTANCE, repo), 0) for repo in repos}
    total_single = len(one_caller) + len(one_failed)
    total_together = len(together) + len(together_failed)
    return {
        "load_average_1min_at_start": round(load, 2),
        "single": {"opens": total_single, "failures": len(one_failed),
                   "opens_per_s": total_single / one_wall if one_wall else None,
                   "open_ms": summarise(one_caller) if one_caller else None},
        "concurrent": {"opens": total_together, "failures": len(together_failed),
                       "opens_per_s": total_together / together_wall if together_wall else None,
                       "open_ms": summarise(together) if together else None},
        "repos_live_twice": sorted(r for r, n in live.items() if n > 1),
        "repos_live_none": sorted(r for r, n in live.items() if n == 0),
    }


def _median(rounds: list[dict], part: str, key: str) -> float | None:
    values = [r[part][key] for r in rounds if r[part].get(key) is not None]
    return statistics.median(values) if values else None


def _median_ms(rounds: list[dict], part: str, q: str) -> float | None:
    values = [r[part]["open_ms"][q] for r in rounds if r[part].get("open_ms")]
    return statistics.median(values) if values else None


def assemble(rounds: list[dict], callers: int, opens: int) -> dict:
    single_rate = _median(rounds, "single", "opens_per_s")
    together_rate = _median(rounds, "concurrent", "opens_per_s")
    return {
        "name": NAME,
        "conditions": {"callers": callers, "opens_per_caller": opens, "rounds": len(rounds),
                       "cpus": os.cpu_count(),
                       "load_average_1min_at_start": [r["load_average_1min_at_start"]
                                                      for r in rounds]},
        "single_opens_per_s": single_rate,
        "single_p50_ms": _median_ms(rounds, "single", "p50"),
        "single_p99_ms": _median_ms(rounds, "single", "p99"),
        "concurrent_opens_per_s": together_rate,
        "concurrent_p50_ms": _median_ms(rounds, "concurrent", "p50"),
        "concurrent_p99_ms": _median_ms(rounds, "concurrent", "p99"),
        "ratio": together_rate / single_rate if single_rate and together_rate else None,
        "failures": sum(r["single"]["failures"] + r["concurrent"]["failures"] for r in rounds),
        "repos_live_twice": sorted({x for r in rounds for x in r["repos_live_twice"]}),
        "rounds": rounds,
    }


def markdown(result: dict) -> str:
    c = result["conditions"]

    def f(value, digits=1):
        return "-" if value is None else f"{value:.{digits}f}"

    return "\n".join([
        f"## Concurrent opens: {c['callers']} callers on {c['callers']} repos",
        "",
        f"{c['rounds']} rounds, {c['opens_per_caller']} opens per caller, {c['cpus']} CPUs, "
        f"load average at start {c['load_average_1min_at_start']}; medians of the rounds.",
        "",
        "| | opens/s | p50 ms | p99 ms |",
        "|---|---|---|---|",
        f"| one caller | {f(result['single_opens_per_s'])} | {f(result['single_p50_ms'])} | "
        f"{f(result['single_p99_ms'])} |",
        f"| {c['callers']} callers | {f(result['concurrent_opens_per_s'])} | "
        f"{f(result['concurrent_p50_ms'])} | {f(result['concurrent_p99_ms'])} |",
        "",
        f"Throughput ratio (concurrent / one caller): {f(result['ratio'], 2)}; failures: "
        f"{result['failures']}; repos with two live conversations: "
        f"{len(result['repos_live_twice'])}.",
        "",
    ])


def run_concurrent_opens(rounds: int = 3, callers: int = 50, opens: int = 10) -> dict:
    per_round = [asyncio.run(_round(callers, opens)) for _ in range(rounds)]
    result = assemble(per_round, callers, opens)
    report.write(NAME, result, markdown(result))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--opens", type=int, default=10, help="opens per caller")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    for name in ("callers", "opens", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    print(markdown(run_concurrent_opens(args.rounds, args.callers, args.opens)))


if __name__ == "__main__":
    main()
