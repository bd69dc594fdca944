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
            cur = await conn.execute("SELECT applied_seq FROM projection_offsets WHERE projection = 'timeline'")
            applied = (await cur.fetchone())[0] - base
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
            acks.append(await sys_.js.publish_async(subjects.INGEST_TIMELINE, bodies[sent],
                                                    headers={"Nats-Msg-Id": f"{tag}-{sent:07d}"}))
            sent += 1
        await asyncio.sleep(TICK_SECONDS)
    publish_seconds = time.perf_counter() - started
    await asyncio.gather(*acks)
    await asyncio.wait_for(done.wait(), 60)
    await poller
    cur = await conn.execute(
        "SELECT entry_id FROM timeline_entries WHERE seq > %s AND seq <= %s ORDER BY seq", (base, base + total))
    ids = [row[0] async for row in cur]
    await conn.close()
    expected = [f"{tag}-{n:07d}" for n in range(total)]
    if ids != expected:
        raise RuntimeError("the round's entries are not at base + k in publish order; the lag would be wrong")
    skip = int(rate * WARMUP_SECONDS)
    lags = [(v - p) * 1000 for p, v in zip(published[skip:], visible[skip:])]
    return {"entries_measured": len(lags), "offered_rate": rate, "achieved_publish_rate": total / publish_seconds,
            "p50_ms": statistics.median(lags), "p99_ms": report.percentile(lags, 0.99), "max_ms": max(lags),
            "mean_ms": statistics.fmean(lags), "polls": polls}


async def measure_lag(sys_: memory.System, rate: float | None = None, rounds: int = ROUNDS,
                      seconds: float = SECONDS) -> dict:
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
        "per_round": per_round,
        "target_p99_ms": TARGET_P99_MS,
        "target_met": p99["median"] <= TARGET_P99_MS,
    }


def markdown(result: dict) -> str:
    r = result
    source = ("half the end-to-end rate measured in the same run" if r["sustained_rate_probe"] is None
              else f"half of {r['sustained_rate_probe']:,.0f}/s measured here over {PROBE_ENTRIES:,} entries")
    return "\n".join([
        "# Projection lag at half the sustained rate",
        "",
        f"{r['rate']:,.0f} entries/s ({source}), {r['content_bytes']} B content, {r['rounds']} rounds of"
        f" {r['seconds_per_round']:.0f} s after {r['warmup_seconds']:.0f} s warm-up; publish -> readable"
        " (projection offset reached), ms as median over rounds (min - max).",
        "",
        "| p50 ms | p99 ms | max ms | target p99 | met |",
        "|---|---|---|---:|---|",
        f"| {report.cell(r['p50_ms'], 1)} | {report.cell(r['p99_ms'], 1)} | {report.cell(r['max_ms'], 1)}"
        f" | <= {r['target_p99_ms']:.0f} ms | {report.yes_no(r['target_met'])} |",
    ]) + "\n"


async def _run(rate: float | None, rounds: int, seconds: float) -> dict:
    async with memory.system(services=("timeline-writer",), prefix="seedline-bench-lag-") as sys_:
        facts = sys_.facts()
        result = await measure_lag(sys_, rate, rounds, seconds)
    return {"benchmark": "lag", "generated_at": report.stamp(), "machine": report.machine(),
            "servers": facts, **result}


def run_lag_bench(rate: float | None = None, rounds: int = ROUNDS, seconds: float = SECONDS,
                  write: bool = True) -> dict:
    result = asyncio.run(_run(rate, rounds, seconds))
    if write:
        report.write("lag", result, markdown(result))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lag", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--seconds", type=float, default=SECONDS, help="measured seconds per round")
    parser.add_argument("--rate", type=float, help="entries/s (default: half of a short end-to-end burst)")
    args = parser.parse_args(argv)
    print(markdown(run_lag_bench(args.rate, args.rounds, args.seconds)))


if __name__ == "__main__":
    main()
