"""Ingest throughput: Seedline end to end against raw JetStream publishing.

Starts its own nats-server (JetStream, sync_interval: always) and Postgres in a
temporary folder and measures, per entry size:

- raw: nats-py ``publish_async`` of the same payloads into one stream with the
  timeline's durability settings, a window of 1,000 pending acks, all awaited;
- seedline: the same payloads published to ``seedline.ingest.timeline`` while a
  timeline-writer process runs, timed until the last entry is readable through
  ``seedline.api.timeline.read`` (``min_seq``);
- raw without ``sync_interval: always`` on a second server: the price of durability.

Every entry is written durably twice on its way (ingest, then timeline) and
projected into Postgres. The ingest write costs what raw costs (one stored message
each); the timeline write is one atomic batch, one commit for up to 1,000 entries,
and SEEDLINE_INGEST keeps messages by age (limits retention, AckPolicy.ALL), so an
acknowledgement removes nothing and one ack settles a whole batch. The ceiling is
therefore raw itself (1.0); the target is 0.45.

    python -m bench.ingest [--rounds 3] [--count 20000] [--size 512] [--profile]

Writes bench/results/ingest.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import io
import json
import os
import platform
import pstats
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench import cpu_accounting

WINDOW = 1_000
LARGE_SIZE = 4_096
TARGET_RATIO = 0.45
INSTANCE = "benchingest"
REPOS = 8
RAW_STREAM = "BENCH_RAW"
RAW_SUBJECT = "bench.raw.entries"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
PARTITION_COUNTS = (1, 2, 4)
PARTITION_INSTANCES = 16
READY_TIMEOUT = 60.0
ROUND_TIMEOUT = 600.0


def payloads(tag: str, count: int, size: int, instances: int = 1) -> list[tuple[bytes, str]]:
    """(body, entry_id) pairs, serialised before any clock starts; entry n belongs to
    instance n mod `instances`."""
    content = ("seedline " * (size // 9 + 1))[:size]
    out = []
    for n in range(count):
        entry_id = f"{tag}-{n:07d}"
        body = {
            "entry_id": entry_id,
            "instance_id": instance_name(n % instances) if instances > 1 else INSTANCE,
            "repo": f"bench/repo-{n % REPOS}",
            "session_id": f"{tag}-s",
            "kind": "terminal",
            "content": content,
            "at": "2026-08-17T10:00:00Z",
            "engine": "claude",
        }
        out.append((json.dumps(body).encode(), entry_id))
    return out


def instance_name(n: int) -> str:
    return f"{INSTANCE}{n:02d}"


async def publish_all(js, subject, batch: list[tuple[bytes, str]]) -> None:
    """publish_async with at most WINDOW acks pending (the context's limit), all awaited;
    `subject` is a subject or a function of the entry's position (a per-instance subject)."""
    futures = [
        await js.publish_async(subject if isinstance(subject, str) else subject(n), body,
                               headers={"Nats-Msg-Id": entry_id})
        for n, (body, entry_id) in enumerate(batch)
    ]
    await asyncio.gather(*futures)


async def raw_round(js, size: int, count: int) -> float:
    batch = payloads(f"raw{uuid.uuid4().hex[:8]}", count, size)
    started = time.perf_counter()
    await publish_all(js, RAW_SUBJECT, batch)
    return count / (time.perf_counter() - started)


async def seedline_round(nc, js, size: int, count: int) -> float:
    from seedline_contracts import subjects
    from seedline_platform.replay import last_seq

    tag = f"sl{uuid.uuid4().hex[:8]}"
    batch = payloads(tag, count, size)
    target = await last_seq(js, subjects.TIMELINE_STREAM) + count
    last = json.loads(batch[-1][0])
    started = time.perf_counter()
    await publish_all(js, subjects.ingest_timeline_subject(INSTANCE), batch)
    await wait_readable(nc, last, target)
    return count / (time.perf_counter() - started)


async def partitioned_round(nc, js, size: int, count: int) -> float:
    """`count` entries over PARTITION_INSTANCES instances, each on its own instance's
    subject (which the server maps to a partition), timed until every instance's last
    entry is the newest one the timeline API answers for it."""
    from seedline_contracts import subjects

    tag = f"kp{uuid.uuid4().hex[:8]}"
    batch = payloads(tag, count, size, PARTITION_INSTANCES)
    newest = {}
    for body, entry_id in batch:
        entry = json.loads(body)
        newest[entry["instance_id"]] = (entry["repo"], entry["session_id"], entry_id)
    started = time.perf_counter()
    await publish_all(
        js, lambda n: subjects.ingest_timeline_subject(instance_name(n % PARTITION_INSTANCES)),
        batch,
    )
    await wait_newest(nc, newest)
    return count / (time.perf_counter() - started)


async def wait_newest(nc, newest: dict[str, tuple[str, str, str]]) -> None:
    """Until the newest entry of every (instance, repo, conversation) is the one expected."""
    from seedline_contracts import subjects
    from seedline_devtools.testing import request

    waiting = dict(newest)
    deadline = time.monotonic() + ROUND_TIMEOUT
    while waiting and time.monotonic() < deadline:
        for instance, (repo, session_id, entry_id) in list(waiting.items()):
            reply = await request(nc, subjects.API_TIMELINE_READ,
                                  {"instance_id": instance, "repo": repo,
                                   "session_id": session_id, "limit": 1},
                                  timeout=15)
            if not reply.get("ok"):
                raise RuntimeError(f"the read failed: {reply['error']}")
            if reply["entries"] and reply["entries"][-1]["entry_id"] == entry_id:
                del waiting[instance]
        if waiting:
            await asyncio.sleep(0.01)
    if waiting:
        raise RuntimeError(f"{len(waiting)} instances were not readable within {ROUND_TIMEOUT:.0f} s")


async def wait_readable(nc, last: dict, target_seq: int) -> None:
    from seedline_contracts import subjects
    from seedline_devtools.testing import request

    query = {"instance_id": INSTANCE, "repo": last["repo"], "session_id": last["session_id"],
             "min_seq": target_seq, "limit": 1}
    deadline = time.monotonic() + ROUND_TIMEOUT
    while time.monotonic() < deadline:
        reply = await request(nc, subjects.API_TIMELINE_READ, query, timeout=15)
        if reply.get("ok"):
            got = reply["entries"][-1]["entry_id"] if reply["entries"] else None
            if got != last["entry_id"]:
                raise RuntimeError(f"seq {target_seq} is readable but the newest entry is {got}")
            return
        if reply["error"]["code"] != "not_yet_visible":
            raise RuntimeError(f"the read failed: {reply['error']}")
    raise RuntimeError(f"seq {target_seq} was not readable within {ROUND_TIMEOUT:.0f} s")


class WriterProcess:
    """The timeline-writer console script, or the same module under a profiler."""

    def __init__(self, env: dict, log_path: Path, profile_to: Path | None = None) -> None:
        if profile_to is None:
            argv = [str(Path(sys.executable).with_name("timeline-writer"))]
        elif importlib.util.find_spec("pyinstrument"):
            argv = [sys.executable, "-m", "pyinstrument", "--renderer=text", "--show-all",
                    f"--outfile={profile_to}", "-m", "seedline_timeline_writer"]
        else:
            argv = [sys.executable, "-m", "cProfile", "-o", str(profile_to),
                    "-m", "seedline_timeline_writer"]
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)

    async def wait_ready(self, nc) -> None:
        from seedline_contracts import subjects

        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the timeline-writer exited with code {self.proc.returncode}")
            try:
                probe = json.dumps({"instance_id": INSTANCE, "repo": "x"}).encode()
                await nc.request(subjects.API_TIMELINE_READ, probe, timeout=1)
                return
            except Exception:
                await asyncio.sleep(0.2)
        raise RuntimeError("the timeline-writer did not answer reads within a minute")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def summary(runs: list[float]) -> dict:
    return {"median": statistics.median(runs), "min": min(runs), "max": max(runs),
            "runs": [round(r, 1) for r in runs]}


def profile_summary(path: Path, limit: int = 25) -> str:
    """Top functions by own time from a cProfile file; a pyinstrument report is already text."""
    if not path.exists():
        return "no profile was written"
    try:
        stats = pstats.Stats(str(path), stream=io.StringIO())
    except Exception:
        return path.read_text()
    stats.sort_stats("tottime").print_stats(limit)
    return stats.stream.getvalue()


async def _run(rounds: int, count: int, size: int, profile: bool, partitions: bool) -> dict:
    import nats

    from seedline_platform import natsio
    from seedline_devtools.embedded import start_nats, start_postgres
    from seedline_contracts.streams import TIMELINE, StreamSpec

    sizes = [size] + ([LARGE_SIZE] if size != LARGE_SIZE else [])
    raw_spec = StreamSpec(RAW_STREAM, (RAW_SUBJECT,), TIMELINE.retention, TIMELINE.discard,
                          TIMELINE.deny_delete, TIMELINE.deny_purge, TIMELINE.duplicate_window)
    runs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="seedline-bench-ingest-") as tmp_text:
        tmp = Path(tmp_text)
        durable = start_nats(tmp / "nats")
        loose = start_nats(tmp / "nats-nosync", sync_always=False)
        postgres = start_postgres(tmp / "postgres")
        connections = []
        writer = None
        try:
            database_url = postgres.ensure_database("seedline")
            env = dict(os.environ, SEEDLINE_NATS_URL=durable.url,
                       SEEDLINE_NATS_MONITOR_URL=durable.monitor_url,
                       SEEDLINE_DATABASE_URL=database_url, SEEDLINE_HOME=str(tmp / "home"),
                       SEEDLINE_STRICT_DURABILITY="1", SEEDLINE_LOG_LEVEL="warning",
                       SEEDLINE_HTTP_PORT="0")
            nc = await nats.connect(durable.url)
            nc_loose = await nats.connect(loose.url)
            connections += [nc, nc_loose]
            js = nc.jetstream(publish_async_max_pending=WINDOW)
            js_loose = nc_loose.jetstream(publish_async_max_pending=WINDOW)
            for context in (js, js_loose):
                await context.add_stream(natsio.stream_config(raw_spec))
            writer = WriterProcess(env, tmp / "writer.log")
            await writer.wait_ready(nc)
            version = nc._server_info.get("version")
            await seedline_round(nc, js, size, min(count, 2_000))  # warm-up, not counted
            for round_no in range(rounds):
                for s in sizes:
                    measured = {
                        "raw_sync": await raw_round(js, s, count),
                        "seedline": await seedline_round(nc, js, s, count),
                        "raw_nosync": await raw_round(js_loose, s, count),
                    }
                    for name, value in measured.items():
                        runs.setdefault(f"{name}_{s}", []).append(value)
                print(f"round {round_no + 1}/{rounds} done", file=sys.stderr)
            profile_text = None
            if profile:
                writer.stop()
                profile_path = tmp / "writer.prof"
                writer = WriterProcess(env, tmp / "writer.log", profile_to=profile_path)
                await writer.wait_ready(nc)
                await seedline_round(nc, js, size, count)
                writer.stop()
                writer = None
                profile_text = profile_summary(profile_path)
        finally:
            for c in connections:
                await c.close()
            if writer is not None:
                writer.stop()
            loose.stop()
            durable.stop()
            postgres.stop()
    partitioned = await _run_partitions(rounds, count, size) if partitions else None
    return assemble(runs, sizes, rounds, count, version, profile_text, partitioned)


async def _run_partitions(rounds: int, count: int, size: int) -> dict:
    """k timeline-writers, one per ingest partition, for each k in PARTITION_COUNTS:
    a fresh nats-server mapping ingest to k partitions and a fresh database each time."""
    import nats

    from seedline_devtools.embedded import start_nats, start_postgres

    rates: dict[int, list[float]] = {}
    cpu: dict[str, dict[str, float]] = {}  # k -> CPU seconds per 1,000 entries, by part
    with tempfile.TemporaryDirectory(prefix="seedline-bench-partitions-") as tmp_text:
        tmp = Path(tmp_text)
        postgres = start_postgres(tmp / "postgres")
        try:
            for k in PARTITION_COUNTS:
                server = start_nats(tmp / f"nats-k{k}", ingest_partitions=k)
                writers: list[WriterProcess] = []
                nc = None
                try:
                    env = dict(os.environ, SEEDLINE_NATS_URL=server.url,
                               SEEDLINE_NATS_MONITOR_URL=server.monitor_url,
                               SEEDLINE_DATABASE_URL=postgres.ensure_database(f"seedline_k{k}"),
                               SEEDLINE_HOME=str(tmp / f"home-k{k}"),
                               SEEDLINE_STRICT_DURABILITY="1", SEEDLINE_LOG_LEVEL="warning",
                               SEEDLINE_INGEST_PARTITIONS=str(k), SEEDLINE_HTTP_PORT="0")
                    nc = await nats.connect(server.url)
                    js = nc.jetstream(publish_async_max_pending=WINDOW)
                    writers = [
                        WriterProcess(dict(env, SEEDLINE_INGEST_PARTITION=str(i)),
                                      tmp / f"writer-k{k}-{i}.log")
                        for i in range(k)
                    ]
                    for writer in writers:
                        await writer.wait_ready(nc)
                    await partitioned_round(nc, js, size, min(count, 2_000))  # warm-up
                    before = _cpu(writers, server, postgres)
                    for _ in range(rounds):
                        rates.setdefault(k, []).append(await partitioned_round(nc, js, size, count))
                    cpu[str(k)] = cpu_accounting.per_thousand(
                        before, _cpu(writers, server, postgres), rounds * count)
                    print(f"{k} writer(s) done", file=sys.stderr)
                finally:
                    if nc is not None:
                        await nc.close()
                    for writer in writers:
                        writer.stop()
                    server.stop()
        finally:
            postgres.stop()
    measurements = {str(k): summary(v) for k, v in rates.items()}
    base = measurements[str(PARTITION_COUNTS[0])]["median"]
    one = cpu[str(PARTITION_COUNTS[0])]
    projected = cpu_accounting.projection(one)
    return {
        "size": size,
        "instances": PARTITION_INSTANCES,
        "measurements": measurements,
        "ratio_to_one": {k: m["median"] / base for k, m in measurements.items()},
        "cpu_seconds_per_1000": cpu,
        "projected_per_s": projected,
        "projected_limit": {k: cpu_accounting.limited_by(one, int(k)) for k in projected},
    }


def _cpu(writers: list, server, postgres) -> dict[str, float]:
    """CPU seconds so far of the writers, nats-server, Postgres and this publisher."""
    mine = os.times()
    return {
        "writers": sum(cpu_accounting.tree_cpu_seconds(w.proc.pid) for w in writers),
        "nats": cpu_accounting.tree_cpu_seconds(server.proc.pid),
        "postgres": cpu_accounting.tree_cpu_seconds(postgres.postmaster_pid()),
        "publisher": mine.user + mine.system,
    }


def assemble(runs: dict, sizes: list[int], rounds: int, count: int, version, profile_text,
             partitioned: dict | None = None) -> dict:
    measurements = {name: summary(values) for name, values in runs.items()}
    ratios = {
        str(s): measurements[f"seedline_{s}"]["median"] / measurements[f"raw_sync_{s}"]["median"]
        for s in sizes
    }
    price = {
        str(s): measurements[f"raw_nosync_{s}"]["median"] / measurements[f"raw_sync_{s}"]["median"]
        for s in sizes
    }
    return {
        "benchmark": "ingest",
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "nats_server": version},
        "config": {"rounds": rounds, "count": count, "sizes": sizes, "window": WINDOW},
        "measurements": measurements,
        "ratio_seedline_to_raw": ratios,
        "raw_nosync_to_sync": price,
        "target_ratio": TARGET_RATIO,
        "target_met": all(r >= TARGET_RATIO for r in ratios.values()),
        "profile": profile_text,
        "partitions": partitioned,
    }


def markdown(result: dict) -> str:
    cfg, m = result["config"], result["measurements"]
    lines = [
        "# Ingest throughput",
        "",
        f"{cfg['count']:,} entries per run, {cfg['rounds']} rounds, window of "
        f"{cfg['window']:,} pending acks; msg/s as median (min - max). "
        f"nats-server {result['machine']['nats_server']}, {result['machine']['cpus']} CPUs.",
        "",
        "| entry content | raw publish_async, sync always | Seedline end to end | ratio "
        "| raw, no sync_interval | price of durability |",
        "|---|---|---|---|---|---|",
    ]
    for s in cfg["sizes"]:
        raw, sl, loose = m[f"raw_sync_{s}"], m[f"seedline_{s}"], m[f"raw_nosync_{s}"]
        lines.append(
            f"| {s:,} B | {_cell(raw)} | {_cell(sl)} "
            f"| {result['ratio_seedline_to_raw'][str(s)]:.2f} "
            f"| {_cell(loose)} | {result['raw_nosync_to_sync'][str(s)]:.1f}x |"
        )
    lines += [
        "",
        f"Target: Seedline end to end at least {result['target_ratio']:.2f} of raw. "
        f"{'Met.' if result['target_met'] else 'Not met.'} Every entry is written durably "
        "twice (ingest, then timeline), but the timeline write is one atomic batch (one "
        "commit for up to 1,000 entries) and ingest keeps messages by age, so an "
        "acknowledgement removes nothing: raw itself is the ceiling.",
        "",
        "Seedline end to end is timed from the first publish to `seedline.api.timeline.read` "
        "answering the last entry (`min_seq`); the timeline-writer runs as its own process.",
    ]
    part = result.get("partitions")
    if part:
        lines += [
            "",
            "## Partitioned timeline-writers",
            "",
            f"{part['size']:,} B entries over {part['instances']} instances, each published on "
            "its instance's ingest subject, which the server maps to one of k partitions; one "
            f"timeline-writer per partition, all on {result['machine']['cpus']} CPUs.",
            "",
            "| writers (k) | msg/s end to end | ratio to k = 1 |",
            "|---|---|---|",
        ]
        for k, m in part["measurements"].items():
            lines.append(f"| {k} | {_cell(m)} | {part['ratio_to_one'][k]:.2f} |")
        lines += [
            "",
            "CPU seconds per 1,000 entries over the measured rounds (from /proc):",
            "",
            "| writers (k) | timeline-writers | nats-server | Postgres | publisher |",
            "|---|---|---|---|---|",
        ]
        for k, c in part["cpu_seconds_per_1000"].items():
            lines.append(f"| {k} | {c['writers']:.3f} | {c['nats']:.3f} | {c['postgres']:.3f} "
                         f"| {c['publisher']:.3f} |")
        lines += [
            "",
            "Projected on a machine with enough cores, from the k = 1 costs (assumptions in "
            "`bench/cpu_accounting.py`: a core per writer and per writer's Postgres backend, "
            f"nats-server's work on at most {cpu_accounting.NATS_CORES} cores, one per stream "
            "an entry is written to):",
            "",
            "| writers (k) | projected entries/s | limited by |",
            "|---|---|---|",
        ]
        for k, rate in part["projected_per_s"].items():
            lines.append(f"| {k} | {rate:,.0f} | {part['projected_limit'][k]} |")
    if result.get("profile"):
        lines += ["", "## Timeline-writer profile (one run)", "", "```",
                  result["profile"].rstrip(), "```"]
    return "\n".join(lines) + "\n"


def _cell(s: dict) -> str:
    return f"{s['median']:,.0f} ({s['min']:,.0f} - {s['max']:,.0f})"


def run_ingest_bench(rounds: int = 3, count: int = 20_000, size: int = 512,
                     profile: bool = False, write: bool = True, partitions: bool = True) -> dict:
    result = asyncio.run(_run(rounds, count, size, profile, partitions))
    if write:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        (RESULTS_DIR / "ingest.json").write_text(json.dumps(result, indent=2) + "\n")
        (RESULTS_DIR / "ingest.md").write_text(markdown(result))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=20_000, help="entries per run")
    parser.add_argument("--size", type=int, default=512,
                        help="content bytes (4 KiB is always measured too)")
    parser.add_argument("--profile", action="store_true",
                        help="profile the timeline-writer over one more run "
                        "(pyinstrument, else cProfile)")
    parser.add_argument("--no-partitions", action="store_true",
                        help="skip the runs with 1, 2 and 4 partitioned timeline-writers")
    args = parser.parse_args(argv)
    print(markdown(run_ingest_bench(args.rounds, args.count, args.size, args.profile,
                                    partitions=not args.no_partitions)))


if __name__ == "__main__":
    main()
