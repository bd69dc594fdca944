"""Rebuild: replay the timeline into a fresh projection / a raw read of the same stream.

Fills SEEDLINE_TIMELINE with 200,000 entries through the real writer (see
bench.memory), then, alternating the order each round:

- rebuild: ``timeline-writer rebuild``, the projection owner's command that
  ``seedline rebuild timeline`` runs, as its own process: in one transaction,
  digest the rows, TRUNCATE, replay the stream from seq 1 and COPY every entry
  back, digest again. Its rate is over the seconds the command reports (connect,
  replay, commit); the wall time with the process's start is kept beside it;
- raw: ``seedline_platform.replay.replay`` over the same range (the same
  ordered, ack-less ephemeral consumer), counting messages and writing nothing.

The ratio is rebuild rate / raw rate (target >= 0.5). The two digests are part
of the command; each is also timed alone, so the replay-and-COPY share shows.
Before the first round the filled table is vacuumed and a checkpoint taken, as
autovacuum and the checkpointer would after the fill, so neither runs mid-round.

    python -m bench.rebuild [--entries 200000] [--rounds 3]

Writes bench/results/rebuild.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from bench import memory, report

TARGET_RATIO = 0.5
ENTRIES = 200_000
ROUNDS = 3


async def raw_read(js, end: int) -> tuple[float, int]:
    from seedline_contracts import subjects
    from seedline_platform.replay import replay

    count = 0
    started = time.perf_counter()
    async for msgs in replay(js, subjects.TIMELINE_STREAM, subjects.TIMELINE_ALL, 1, end):
        count += len(msgs)
    return time.perf_counter() - started, count


async def run_rebuild_command(
    env: dict, log_path: Path, profile_to: Path | None = None
) -> tuple[dict, float]:
    """`timeline-writer rebuild` with the system's settings: its result line and the wall
    seconds of the whole process. Under pyinstrument when `profile_to` is given."""
    from seedline_platform.service import REBUILD_COMMAND

    if profile_to is None:
        argv = [str(Path(sys.executable).with_name("timeline-writer")), REBUILD_COMMAND]
    else:
        argv = [sys.executable, "-m", "pyinstrument", "--renderer=text", f"--outfile={profile_to}",
                "-m", "seedline_timeline_writer", REBUILD_COMMAND]
    started = time.perf_counter()
    with open(log_path, "ab") as log:
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=log
        )
        result = error = None
        assert proc.stdout is not None
        async for line in proc.stdout:  # progress lines while it works, then one result
            try:
                message = json.loads(line)
            except ValueError:
                continue
            result = message.get("result", result)
            error = message.get("error", error)
        await proc.wait()
    wall = time.perf_counter() - started
    if result is None or proc.returncode != 0:
        raise RuntimeError(
            f"timeline-writer rebuild failed (exit code {proc.returncode}):"
            f" {error or 'no result line'}; see {log_path}"
        )
    return result, wall


async def settle(database_url: str) -> None:
    """What autovacuum and the checkpointer would do after the fill, done before the clock starts."""
    import psycopg
    from seedline_timeline_view.postgres import TABLE

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"VACUUM (ANALYZE) {TABLE}")
        await conn.execute("CHECKPOINT")


async def digest_seconds(database_url: str) -> float:
    import psycopg
    from seedline_timeline_writer.store import digest

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        started = time.perf_counter()
        await digest(conn)
        return time.perf_counter() - started


async def measure_rebuild(sys_: memory.System, rounds: int = ROUNDS, profile: bool = False) -> dict:
    from seedline_contracts import subjects
    from seedline_platform.replay import last_seq

    end = await last_seq(sys_.js, subjects.TIMELINE_STREAM)
    await settle(sys_.database_url)
    raw_s, rebuild_s, wall_s, digest_s, identical = [], [], [], [], []
    for index in range(rounds):
        for step in ("raw", "rebuild") if index % 2 == 0 else ("rebuild", "raw"):
            if step == "raw":
                seconds, count = await raw_read(sys_.js, end)
                if count != end:
                    raise RuntimeError(f"the raw read returned {count} of {end} entries")
                raw_s.append(seconds)
            else:
                result, wall = await run_rebuild_command(sys_.env, sys_.tmp / "rebuild.log")
                if result["rows"] != end:
                    raise RuntimeError(f"the rebuild wrote {result['rows']} rows, expected {end}")
                rebuild_s.append(result["seconds"])
                wall_s.append(wall)
                identical.append(result["before_digest"] == result["after_digest"])
        digest_s.append(await digest_seconds(sys_.database_url))
    profile_text = await profile_rebuild(sys_) if profile else None
    raw_rate = report.spread(end / s for s in raw_s)
    rebuild_rate = report.spread(end / s for s in rebuild_s)
    ratio = rebuild_rate["median"] / raw_rate["median"]
    without_digests = [max(r - 2 * statistics.median(digest_s), 1e-9) for r in rebuild_s]
    return {
        "entries": end,
        "rounds": rounds,
        "raw_seconds": report.spread(raw_s),
        "rebuild_seconds": report.spread(rebuild_s),
        "rebuild_command_wall_seconds": report.spread(wall_s),
        "digest_seconds": report.spread(digest_s),
        "raw_rate": raw_rate,
        "rebuild_rate": rebuild_rate,
        "rebuild_rate_without_digests": report.spread(end / s for s in without_digests),
        "ratio": ratio,
        "ratio_without_digests": statistics.median([end / s for s in without_digests])
        / raw_rate["median"],
        "digests_identical": all(identical),
        "target_ratio": TARGET_RATIO,
        "target_met": ratio >= TARGET_RATIO,
        "profile": profile_text,
    }


async def profile_rebuild(sys_: memory.System) -> str:
    """One more `timeline-writer rebuild`, its process under pyinstrument."""
    import importlib.util

    if importlib.util.find_spec("pyinstrument") is None:
        return "pyinstrument is not installed (uv sync --extra bench)"
    path = sys_.tmp / "rebuild.profile.txt"
    await run_rebuild_command(sys_.env, sys_.tmp / "rebuild.log", profile_to=path)
    return path.read_text() if path.exists() else "no profile was written"


def markdown(result: dict) -> str:
    r = result
    lines = [
        "# Rebuild: replay into a fresh projection / raw ordered read",
        "",
        f"{r['entries']:,} entries in SEEDLINE_TIMELINE (filled through the writer), {r['rounds']} rounds,"
        " order alternating; entries/s as median (min - max).",
        "",
        "| timeline-writer rebuild (digest, TRUNCATE, replay + COPY, digest)"
        " | raw replay(), nothing written | ratio | target | met |",
        "|---|---|---:|---:|---|",
        f"| {report.cell(r['rebuild_rate'])} | {report.cell(r['raw_rate'])} | {r['ratio']:.2f}"
        f" | >= {r['target_ratio']} | {report.yes_no(r['target_met'])} |",
        "",
        f"Seconds: rebuild {report.cell(r['rebuild_seconds'], 2)} as the command reports it"
        f" ({report.cell(r['rebuild_command_wall_seconds'], 2)} with the process's start),"
        f" raw read {report.cell(r['raw_seconds'], 2)},"
        f" one digest of the projection {report.cell(r['digest_seconds'], 2)}. Without its two digests"
        f" the rebuild would run at {report.cell(r['rebuild_rate_without_digests'])} entries/s"
        f" (ratio {r['ratio_without_digests']:.2f}). Digests before and after equal in every round:"
        f" {'yes' if r['digests_identical'] else 'NO'}.",
    ]
    if r.get("profile"):
        lines += [
            "",
            "## Profile of one rebuild (pyinstrument)",
            "",
            "```",
            r["profile"].rstrip(),
            "```",
        ]
    return "\n".join(lines) + "\n"


async def _run(entries: int, rounds: int, profile: bool) -> dict:
    async with memory.system(prefix="seedline-bench-rebuild-") as sys_:
        facts = sys_.facts()
        fill_ = await memory.fill(sys_, entries)
        result = await measure_rebuild(sys_, rounds, profile)
    return {
        "benchmark": "rebuild",
        "generated_at": report.stamp(),
        "machine": report.machine(),
        "servers": facts,
        "fill": fill_,
        **result,
    }


def run_rebuild_bench(
    entries: int = ENTRIES, rounds: int = ROUNDS, profile: bool = False, write: bool = True
) -> dict:
    result = asyncio.run(_run(entries, rounds, profile))
    if write:
        report.write("rebuild", result, markdown(result))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.rebuild", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--entries", type=int, default=ENTRIES)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument(
        "--profile", action="store_true", help="profile one more rebuild (pyinstrument)"
    )
    args = parser.parse_args(argv)
    print(markdown(run_rebuild_bench(args.entries, args.rounds, args.profile)))


if __name__ == "__main__":
    main()
