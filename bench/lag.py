"""Projection lag at half the sustained ingest rate: publish -> readable, p50 and p99.

Starts nats-server (JetStream, sync_interval: always), Postgres and the
timeline-writer as its own process (its console script). A producer publishes
512-byte entries to seedline.ingest.timeline at a steady rate: half the
end-to-end rate (given, e.g. by bench.ingest in the same suite run, or measured
here first over a short burst). It stamps the moment it hands each entry to
``publish_async``.

Visibility is read without loading the writer: one poller reads the projection's
``applied_seq`` (one primary-key row) every 2 ms; rows and offset commit in one
transaction, so an entry is readable once the offset reaches its seq. The
stream is idle when a round starts and one producer publishes in order, so the
k-th entry of a round lands at timeline seq base + k; that mapping is checked
against the table after every round. Lag resolution: the poll interval plus one
query (~2.5 ms).

    python -m bench.lag [--rounds 3] [--seconds 10] [--rate N]

Writes bench/results/lag.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench import memory, report

SIZE = 512
TARGET_P99_MS = 100.0
ROUNDS = 3
SECONDS = 10.0
WARMUP_SECONDS = 2.0
POLL_SECONDS = 0.002
TICK_SECONDS = 0.005
PROBE_ENTRIES = 5_000


async def probe_rate(sys_: memory.System) -> float:
    """A short end-to-end burst: entries published in windows until readable."""
    result = await memory.fill(sys_, PROBE_ENTRIES, SIZE, tag="probe")
    return result["rate_per_s"]


async def one_round(sys_: memory.System, rate: float, seconds: float, tag: str) -> dict:
    import psycopg
    from seedline_contracts import subjects
    from seedline_platform.replay import last_seq
    from seedline_timeline_view.postgres import TABLE

    content = ("seedline " * (SIZE // 9 + 1))[:SIZE]
    total = int(rate * (seconds + WARMUP_SECONDS))
    bodies = [memory.entry_body(tag, n, SIZE, content) for n in range(total)]
    base = await last_seq(sys_.js, subjects.TIMELINE_STREAM)
    published = [0.0] * total
    visible = [0.0] * total
    done = asyncio.Event()
    conn = await psycopg.AsyncConnection.connect(sys_.database_url, autocommit=True)
    polls = 0

    async def poll() -> None:
        nonlocal polls
        seen = 0  # entries of this round known visible
        while seen < total:
            applied = await memory.read_applied(conn) - base
            at = time.perf_counter()
            polls += 1
            while seen < min(applied, total):
                visible[seen] = at
                seen += 1
            if seen < total:
                await asyncio.sleep(POLL_SECONDS)
        done.set()

    poller = asyncio.create_task(poll())
    acks = []
    started = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - started) * rate) + 1)
        while sent < due:
            published[sent] = time.perf_counter()
            acks.append(
                await sys_.js.publish_async(
                    subjects.INGEST_TIMELINE,
                    bodies[sent],
                    headers={"Nats-Msg-Id": f"{tag}-{sent:07d}"},
                )
            )
            sent += 1
        await asyncio.sleep(TICK_SECONDS)
    publish_seconds = time.perf_counter() - started
    await asyncio.gather(*acks)
    await asyncio.wait_for(done.wait(), 60)
    await poller
    cur = await conn.execute(
        f"SELECT entry_id FROM {TABLE} WHERE seq > %s AND seq <= %s ORDER BY seq",
        (base, base + total),
    )
    ids = [row[0] async for row in cur]
    await conn.close()
    expected = [f"{tag}-{n:07d}" for n in range(total)]
    if ids != expected:
        raise RuntimeError(
            "the round's entries are not at base + k in publish order; the lag would be wrong"
        )
    skip = int(rate * WARMUP_SECONDS)
    lags = [(v - p) * 1000 for p, v in zip(published[skip:], visible[skip:])]
    return {
        "entries_measured": len(lags),
        "offered_rate": rate,
        "achieved_publish_rate": total / publish_seconds,
        "p50_ms": statistics.median(lags),
        "p99_ms": report.percentile(lags, 0.99),
        "max_ms": max(lags),
        "mean_ms": statistics.fmean(lags),
        "over_500_ms": sum(lag > 500 for lag in lags),
        "polls": polls,
        # Where the slowest entries sit (seconds into the measured part, ms): a stall or a trend.
        "slowest": sorted(
            (
                (round(published[skip + i] - published[skip], 3), round(lag, 1))
                for i, lag in enumerate(lags)
            ),
            key=lambda p: -p[1],
        )[:10],
    }


async def measure_lag(
    sys_: memory.System, rate: float | None = None, rounds: int = ROUNDS, seconds: float = SECONDS
) -> dict:
    sustained = None
    if rate is None:
        sustained = await probe_rate(sys_)
        rate = sustained / 2
    per_round = []
    for index in range(rounds):
        await memory.wait_drained(sys_.js, 60)
        per_round.append(await one_round(sys_, rate, seconds, f"lag{index}"))
    p99 = report.spread(r["p99_ms"] for r in per_round)
    return {
        "rate": rate,
        "sustained_rate_probe": sustained,
        "content_bytes": SIZE,
        "rounds": rounds,
        "seconds_per_round": seconds,
        "warmup_seconds": WARMUP_SECONDS,
        "p50_ms": report.spread(r["p50_ms"] for r in per_round),
        "p99_ms": p99,
        "max_ms": report.spread(r["max_ms"] for r in per_round),
        "entries_over_500_ms": [r["over_500_ms"] for r in per_round],
        "per_round": per_round,
        "target_p99_ms": TARGET_P99_MS,
        "target_met": p99["median"] <= TARGET_P99_MS,
    }


def markdown(result: dict) -> str:
    r = result
    source = (
        "given; a suite run passes half the 512 B end-to-end ingest median"
        if r["sustained_rate_probe"] is None
        else f"half of {r['sustained_rate_probe']:,.0f}/s measured here over {PROBE_ENTRIES:,} entries"
    )
    lines = [
        "# Projection lag at half the sustained rate",
        "",
        f"{r['rate']:,.0f} entries/s ({source}), {r['content_bytes']} B content, {r['rounds']} rounds of"
        f" {r['seconds_per_round']:.0f} s after {r['warmup_seconds']:.0f} s warm-up; publish -> readable"
        " (projection offset reached), ms as median over rounds (min - max).",
        "",
        "| p50 ms | p99 ms | max ms | entries over 500 ms, per round | target p99 | met |",
        "|---|---|---|---|---:|---|",
        f"| {report.cell(r['p50_ms'], 1)} | {report.cell(r['p99_ms'], 1)} | {report.cell(r['max_ms'], 1)}"
        f" | {', '.join(str(n) for n in r['entries_over_500_ms'])} of {r['per_round'][0]['entries_measured']:,}"
        f" | <= {r['target_p99_ms']:.0f} ms | {report.yes_no(r['target_met'])} |",
    ]
    if r.get("profile"):
        extra = r.get("profile_round") or {}
        lines += [
            "",
            f"## Timeline-writer profile over one more round (pyinstrument, wall clock; that round:"
            f" p50 {extra.get('p50_ms', 0):.1f} ms, p99 {extra.get('p99_ms', 0):.1f} ms)",
            "",
            "```",
            r["profile"].rstrip(),
            "```",
        ]
    return "\n".join(lines) + "\n"


async def profile_writer(sys_: memory.System, rate: float, seconds: float) -> tuple[str, dict]:
    """One more round with the timeline-writer restarted under pyinstrument (wall clock)."""
    import importlib.util

    if importlib.util.find_spec("pyinstrument") is None:
        return "pyinstrument is not installed (uv sync --extra bench)", {}
    sys_.stop_services()
    await sys_.start_services(("timeline-writer",), profile=("timeline-writer",))
    await memory.wait_drained(sys_.js, 60)
    measured = await one_round(sys_, rate, seconds, "lagprofile")
    sys_.stop_services()
    path = sys_.tmp / "timeline-writer.profile.txt"
    return (path.read_text() if path.exists() else "no profile was written"), measured


async def _run(rate: float | None, rounds: int, seconds: float, profile: bool | None) -> dict:
    from seedline_platform.logging import configure_logging

    configure_logging("error", "bench")
    async with memory.system(services=("timeline-writer",), prefix="seedline-bench-lag-") as sys_:
        facts = sys_.facts()
        result = await measure_lag(sys_, rate, rounds, seconds)
        if profile or (profile is None and not result["target_met"]):
            result["profile"], result["profile_round"] = await profile_writer(
                sys_, result["rate"], seconds
            )
    return {
        "benchmark": "lag",
        "generated_at": report.stamp(),
        "machine": report.machine(),
        "servers": facts,
        **result,
    }


def run_lag_bench(
    rate: float | None = None,
    rounds: int = ROUNDS,
    seconds: float = SECONDS,
    profile: bool | None = None,
    write: bool = True,
) -> dict:
    """profile=None profiles the writer over one more round only when the target is missed."""
    result = asyncio.run(_run(rate, rounds, seconds, profile))
    if write:
        report.write("lag", result, markdown(result))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lag", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--seconds", type=float, default=SECONDS, help="measured seconds per round")
    parser.add_argument(
        "--rate", type=float, help="entries/s (default: half of a short end-to-end burst)"
    )
    parser.add_argument(
        "--profile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="profile the writer over one more round (default: only when the target is missed)",
    )
    args = parser.parse_args(argv)
    print(markdown(run_lag_bench(args.rate, args.rounds, args.seconds, args.profile)))


if __name__ == "__main__":
    main()
