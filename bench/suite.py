"""The whole benchmark suite in one run: `make bench`, `seedline bench`, `python -m bench.suite`.

Runs, each on its own real servers in a temporary folder:

1. ingest (bench.ingest): end to end / raw publish_async, 512 B and 4 KiB,
   with and without sync_interval: always;
2. projection lag (bench.lag) at half the end-to-end rate measured in step 1;
3. open latency (bench.open_latency) on repos of 1,000 and 1,000,000 entries;
4. memory and rebuild (bench.memory, bench.rebuild) on one fill of 100,000
   entries through the writer, the four services running as processes
   (--entries 200000 for the issue's full size: its fill alone takes about four
   minutes on 2 cores and the suite then runs past ten);
5. LangGraph's PostgresSaver against Seedline (bench.langgraph_compare);
6. the `seedline` command's start-up: import and wall time of --help and status, status also
   against a running system (bench.cli_startup);
9. concurrent opens: 50 callers on 50 repos against one caller (bench.concurrent_opens);
10. wake storm: 1,000 stopped conversations on 10 runner machines woken at once, with 1
    and 2 ingest partitions, and the CPU each wake costs per process (bench.wake_storm);
11. the platform's share of a real wake: the real Claude Code CLI woken by a message,
    message -> launch against launch -> the engine's first request (bench.real_wake);
12. what a relocation adds for a dirty working tree of 1 MB and 20 MB (the save as the
    conversation stops, the arrival on the next machine), against moving the same
    changes by hand with git diff --binary | git apply (bench.worktree_move).
13. what `seedline acp` adds to an editor's turn over the engine's own time, the official
    ACP client SDK as the editor, the scripted engine and the real Claude Code CLI
    (bench.acp_latency).
14. a runner machine's install (`uv tool install seedline-cli` from the wheels of `make
    dist`) against the whole of Seedline's: size, packages, `seedline --help`
    (bench.runner_install).
15. durable work per operation: events, entries, deliveries, acks, nats-server fsyncs,
    Postgres statements and transactions and CPU per open and per wake (one at a time and in
    a storm), and CPU per second at idle with ten machines (bench.durable_work); then the
    same durable work with nats-py and psycopg alone, the lean floor Seedline's CPU per storm
    wake is held to (bench.lean_floor).

Every figure is the median of several runs, with min and max; every ratio is
against a baseline measured in this run. Writes bench/results/summary.md and
summary.json (and each benchmark's own .md/.json beside them) and prints the table.

    python -m bench.suite [--entries 200000]
                          [--only ingest,lag,open,fill,langgraph,startup,concurrent,storm,
                                  realwake,worktree,acp,runner,durable]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench import report

PARTS = ("ingest", "lag", "open", "fill", "langgraph", "startup", "concurrent", "storm",
         "realwake", "worktree", "acp", "runner", "durable")
DEFAULTS = {
    "ingest_rounds": 3,
    "ingest_count": 10_000,
    "ingest_size": 512,
    "lag_rounds": 3,
    "lag_seconds": 10.0,
    "open_rounds": 3,
    "open_opens": 200,
    "entries": 100_000,
    "rebuild_rounds": 3,
    "langgraph_runs": 3,
    "langgraph_turns": 500,
    "startup_rounds": 7,
    "concurrent_rounds": 3,
    "concurrent_callers": 50,
    "concurrent_opens": 10,
    "storm_conversations": 1_000,
    "storm_instances": 100,
    "storm_runners": 10,
    "realwake_rounds": 10,
    "worktree_rounds": 3,
    "acp_rounds": 20,
    "runner_rounds": 7,
    "durable_storm": 100,
}
TIME_BUDGET_SECONDS = 600


def _missing_extra() -> list[str]:
    return [
        name
        for name in ("langgraph.checkpoint.postgres", "pyinstrument")
        if importlib.util.find_spec(name.split(".")[0]) is None
        or (name.startswith("langgraph") and importlib.util.find_spec(name) is None)
    ]


def _git_commit() -> str | None:
    """HEAD, and how many files of the measured code (libs/, services/) differ from it."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=here, timeout=5, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "libs", "services"],
                               capture_output=True, text=True, cwd=here, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    changed = len([line for line in dirty.splitlines() if line.strip()])
    return f"{head} (+{changed} uncommitted files in libs/ or services/)" if head and changed else head or None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


async def _fill_benches(entries: int, rounds: int, profile_misses: bool) -> dict:
    from seedline_platform.logging import configure_logging

    from bench import memory, rebuild

    configure_logging("error", "bench")
    async with memory.system(prefix="seedline-bench-fill-") as sys_:
        facts = sys_.facts()
        fill = await memory.fill(sys_, entries)
        mem = memory.measure_memory(sys_)
        reb = await rebuild.measure_rebuild(sys_, rounds)
        if profile_misses and not reb["target_met"]:
            reb["profile"] = await rebuild.profile_rebuild(sys_)
    common = {
        "generated_at": report.stamp(),
        "machine": report.machine(),
        "servers": facts,
        "fill": fill,
    }
    mem_result = {"benchmark": "memory", **common, **mem}
    reb_result = {"benchmark": "rebuild", **common, **reb}
    report.write("memory", mem_result, memory.markdown(mem_result))
    report.write("rebuild", reb_result, rebuild.markdown(reb_result))
    return {"memory": mem_result, "rebuild": reb_result}


def run_suite(only: tuple[str, ...] = PARTS, profile_misses: bool = True, **options) -> dict:
    opts = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
    if "langgraph" in only and _missing_extra():
        raise RuntimeError(
            f"the bench extra is not installed ({', '.join(_missing_extra())} missing): run"
            " `.tools/bin/uv sync --frozen --all-packages --extra bench` (make bench does)"
        )
    if "langgraph" in only:
        # Imported now: a concurrent `uv sync` without the extra cannot take it away mid-run.
        import langchain_core.messages  # noqa: F401
        import langgraph.checkpoint.postgres  # noqa: F401
    started = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()]
    results: dict = {}
    runtime: dict = {}
    errors: dict = {}

    def step(name: str, fn):
        print(f"== {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            results[name] = fn()
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        runtime[name] = round(time.perf_counter() - t0, 1)
        print(f"== {name} done in {runtime[name]:.0f} s", file=sys.stderr, flush=True)

    if "ingest" in only:
        from bench.ingest import run_ingest_bench

        step(
            "ingest",
            lambda: run_ingest_bench(
                opts["ingest_rounds"], opts["ingest_count"], opts["ingest_size"]
            ),
        )
    if "lag" in only:
        from bench.lag import run_lag_bench

        rate = None
        if "ingest" in results:
            rate = (
                results["ingest"]["measurements"][f"seedline_{opts['ingest_size']}"]["median"] / 2
            )
        step("lag", lambda: run_lag_bench(rate, opts["lag_rounds"], opts["lag_seconds"]))
    if "open" in only:
        from bench.open_latency import run_open_bench

        step("open", lambda: run_open_bench(opts["open_rounds"], opts["open_opens"]))
    if "fill" in only:
        step(
            "fill",
            lambda: asyncio.run(
                _fill_benches(opts["entries"], opts["rebuild_rounds"], profile_misses)
            ),
        )
        if "fill" in results:
            results.update(results.pop("fill"))
    if "langgraph" in only:
        from bench.langgraph_compare import run_langgraph_compare

        step(
            "langgraph",
            lambda: run_langgraph_compare(opts["langgraph_runs"], opts["langgraph_turns"]),
        )

    if "startup" in only:
        from bench.cli_startup import run_startup_bench

        step("startup", lambda: run_startup_bench(opts["startup_rounds"]))

    if "concurrent" in only:
        from bench.concurrent_opens import run_concurrent_opens

        step("concurrent", lambda: run_concurrent_opens(
            opts["concurrent_rounds"], opts["concurrent_callers"], opts["concurrent_opens"]))

    if "storm" in only:
        from bench.wake_storm import run_wake_storm

        step("storm", lambda: run_wake_storm(
            opts["storm_conversations"], opts["storm_instances"], opts["storm_runners"]))

    if "realwake" in only:
        from bench.real_wake import run_real_wake

        step("realwake", lambda: run_real_wake(opts["realwake_rounds"]))

    if "worktree" in only:
        from bench.worktree_move import run_worktree_move

        step("worktree", lambda: run_worktree_move(opts["worktree_rounds"]))

    if "acp" in only:
        from bench.acp_latency import run_acp_latency

        step("acp", lambda: run_acp_latency(opts["acp_rounds"]))

    if "runner" in only:
        from bench.runner_install import run_runner_install_bench

        step("runner", lambda: run_runner_install_bench(opts["runner_rounds"]))

    if "durable" in only:
        from bench.durable_work import run as run_durable_work

        step("durable", lambda: asyncio.run(run_durable_work(
            wakes=10, opens=10, storm=opts["durable_storm"], idle=30.0, runners=10)))

    measured_seconds = time.perf_counter() - started
    profiles = {
        name: r["profile"]
        for name, r in results.items()
        if isinstance(r, dict) and isinstance(r.get("profile"), str)
    }
    compared, figures = rows(results, opts)
    summary = {
        "benchmark": "suite",
        "generated_at": report.stamp(),
        "commit": _git_commit(),
        "options": opts,
        "conditions": conditions(results, load_before, _servers(results, runtime)),
        "rows": compared,
        "figures": figures,
        "errors": errors,
        "runtime_seconds": {**runtime, "total": round(measured_seconds, 1)},
        "within_time_budget": measured_seconds <= TIME_BUDGET_SECONDS,
        "profiles": profiles,
    }
    text = markdown(summary)
    summary["markdown"] = text
    report.write("summary", summary, text)
    return summary


def servers_reported(results: dict) -> dict | None:
    """The server facts the first part that measured them reported (the open benchmark
    keeps them under its conditions; ingest reports none)."""
    for r in results.values():
        if not isinstance(r, dict):
            continue
        servers = r.get("servers") or (r.get("conditions") or {}).get("servers")
        if servers:
            return servers
    return None


def measure_servers() -> dict:
    """The facts of a nats-server and a Postgres started the way every benchmark starts
    them (seedline_devtools.embedded), for a run whose parts reported none."""
    from seedline_devtools.embedded import start_nats, start_postgres

    tmp = Path(tempfile.mkdtemp(prefix="seedline-bench-servers-"))
    nats_proc = postgres = None
    try:
        nats_proc = start_nats(tmp / "nats")
        postgres = start_postgres(tmp / "pg")
        return report.server_facts(nats_proc.monitor_url, postgres.ensure_database("facts"))
    finally:
        if nats_proc is not None:
            nats_proc.stop()
        if postgres is not None:
            postgres.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _servers(results: dict, runtime: dict) -> dict | None:
    """Reported by a part, or measured here once when parts ran and none reported them."""
    servers = servers_reported(results)
    if servers is None and runtime:
        print("== server facts ...", file=sys.stderr, flush=True)
        try:
            servers = measure_servers()
        except Exception:
            traceback.print_exc()
    return servers


def conditions(results: dict, load_before: list[float], servers: dict | None = None) -> dict:
    servers = servers or servers_reported(results)
    mem_total = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_total = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory": mem_total,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "nats_server": servers and servers.get("nats_server"),
        "nats_sync_interval_always": servers and servers.get("nats_sync_always"),
        "postgres": servers and servers.get("postgres"),
        "postgres_settings": servers and servers.get("postgres_settings"),
        "load_average_1_5_15_before": load_before,
        "load_average_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
    }


def _row(bench: str, measure: str, seedline: str, baseline: str, ratio: float,
         target: str, met: bool) -> dict:
    """A compared figure: `ratio` is Seedline against the baseline of the same run, or
    against the target where there is no baseline (p50 of 8 ms against 10 ms is 0.8)."""
    return {"bench": bench, "measure": measure, "seedline": seedline, "baseline": baseline,
            "ratio": round(float(ratio), 4), "target": target, "met": bool(met)}


def _figure(bench: str, measure: str, seedline: str, baseline: str = "-",
            ratio: float | None = None) -> dict:
    """A figure shown for context, with no target of its own."""
    return {"bench": bench, "measure": measure, "seedline": seedline, "baseline": baseline,
            "ratio": None if ratio is None else round(float(ratio), 4)}


def rows(results: dict, opts: dict) -> tuple[list[dict], list[dict]]:
    """(rows, figures): every row has a numeric ratio and a boolean met; figures are the
    context around them (the price of durability, p50 beside a p99 target, sizes)."""
    out: list[dict] = []
    figures: list[dict] = []
    cell = report.cell
    if "ingest" in results:
        r = results["ingest"]
        m = r["measurements"]
        for size in r["config"]["sizes"]:
            ratio = r["ratio_seedline_to_raw"][str(size)]
            out.append(_row(
                "1 ingest", f"{size:,} B entries, msg/s: end to end vs raw publish_async (sync always)",
                cell(m[f"seedline_{size}"]), cell(m[f"raw_sync_{size}"]), ratio,
                f">= {r['target_ratio']}", ratio >= r["target_ratio"]))
        for size in r["config"]["sizes"]:
            figures.append(_figure(
                "1 ingest", f"{size:,} B, raw msg/s: no sync_interval vs sync always (price of durability)",
                cell(m[f"raw_nosync_{size}"]), cell(m[f"raw_sync_{size}"]),
                r["raw_nosync_to_sync"][str(size)]))
        part = r.get("partitions")
        if part:
            for k, spread_k in part["measurements"].items():
                figures.append(_figure(
                    "1 ingest", f"{k} partitioned timeline-writer(s), {part['size']:,} B, msg/s"
                    f" over {part['instances']} instances, vs 1 writer",
                    cell(spread_k), cell(part["measurements"]["1"]), part["ratio_to_one"][k]))
            for k, rate in (part.get("projected_per_s") or {}).items():
                figures.append(_figure(
                    "1 ingest", f"{k} writer(s) projected on enough cores from CPU s per 1,000 "
                    f"entries at k = 1 (limited by {part['projected_limit'][k]}), vs 1 writer",
                    f"{rate:,.0f}", f"{part['projected_per_s']['1']:,.0f}",
                    rate / part["projected_per_s"]["1"]))
    if "lag" in results:
        r = results["lag"]
        figures.append(_figure(
            "2 lag", f"publish -> readable p50 ms at {r['rate']:,.0f} entries/s ({r['content_bytes']} B)",
            cell(r["p50_ms"], 1)))
        out.append(_row(
            "2 lag", f"publish -> readable p99 ms at {r['rate']:,.0f} entries/s",
            cell(r["p99_ms"], 1), "-", r["p99_ms"]["median"] / r["target_p99_ms"],
            f"<= {r['target_p99_ms']:.0f} ms", r["target_met"]))
        figures.append(_figure(
            "2 lag", f"publish -> readable max ms (entries over 500 ms per round:"
            f" {', '.join(str(n) for n in r['entries_over_500_ms'])}"
            f" of {r['per_round'][0]['entries_measured']:,})", cell(r["max_ms"], 1)))
    if "open" in results:
        r = results["open"]
        per = {size: [x["open_ms"] for x in r["repos"][size]["rounds"]] for size in ("small", "large")}
        sp = {(size, stat): report.spread(x[stat] for x in per[size])
              for size in per for stat in ("p50", "p99")}
        t = r["targets"]
        for size, label in (("small", "1,000"), ("large", "1,000,000")):
            for stat, limit in (("p50", t["p50_ms_max"]), ("p99", t["p99_ms_max"])):
                median = sp[size, stat]["median"]
                out.append(_row(
                    "3 open", f"request -> reply {stat} ms, repo of {label} entries",
                    cell(sp[size, stat], 2), "-", median / limit, f"<= {limit:.0f} ms",
                    median <= limit))
        for stat in ("p50", "p99"):
            ratio = r["ratios"]["large/small"][stat]
            out.append(_row(
                "3 open", f"{stat}: 1,000,000-entry repo vs 1,000-entry repo",
                cell(sp["large", stat], 2), cell(sp["small", stat], 2), ratio,
                f"<= {t['ratio_max']}x", ratio <= t["ratio_max"]))
    if "rebuild" in results:
        r = results["rebuild"]
        out.append(_row(
            "4 rebuild",
            f"{r['entries']:,} entries/s: timeline-writer rebuild vs raw ordered replay()",
            cell(r["rebuild_rate"]), cell(r["raw_rate"]), r["ratio"], f">= {r['target_ratio']}",
            r["target_met"]))
    if "memory" in results:
        r = results["memory"]
        for name, v in r["services_mb"].items():
            out.append(_row(
                "5 memory", f"{name} peak RSS MB after {r['fill']['entries']:,} entries",
                f"{v['VmHWM']:.1f}", "-", v["VmHWM"] / r["target_mb"],
                f"<= {r['target_mb']:.0f} MB", v["VmHWM"] <= r["target_mb"]))
    if "langgraph" in results:
        r = results["langgraph"]
        lg, sl = r["sides"]["langgraph"], r["sides"]["seedline"]
        marks = r["config"]["marks"]
        for mark in marks:
            figures.append(_figure(
                "6 vs LangGraph", f"Postgres KB after turn {mark} (LangGraph as baseline)",
                report.cell(_scaled(sl["bytes"][mark]), 0), report.cell(_scaled(lg["bytes"][mark]), 0),
                sl["bytes"][mark]["median"] / lg["bytes"][mark]["median"]))
        for stretch in (r["stretches"]["early"], r["stretches"]["late"]):
            figures.append(_figure(
                "6 vs LangGraph", f"Postgres bytes per turn, turns {stretch}",
                cell(sl["bytes_per_turn"][stretch]), cell(lg["bytes_per_turn"][stretch]),
                sl["bytes_per_turn"][stretch]["median"] / lg["bytes_per_turn"][stretch]["median"]))
        flat = r["ratios"]["seedline_bytes_per_turn_late_over_early"]
        out.append(_row(
            "6 vs LangGraph",
            f"bytes per turn, turns {r['stretches']['late']} / turns {r['stretches']['early']}",
            f"{flat:.2f}x", f"{r['ratios']['langgraph_bytes_per_turn_late_over_early']:.2f}x (LangGraph)",
            flat, f"Seedline flat (<= {r['target_flat_limit']}x)", r["target_met"]))
        end = marks[-1]
        figures.append(_figure(
            "6 vs LangGraph", f"write turn {end}, ms", cell(sl["write_ms"][end], 2),
            cell(lg["write_ms"][end], 2), 1 / r["ratios"]["write_ms_at_end_langgraph_over_seedline"]))
        figures.append(_figure(
            "6 vs LangGraph", f"context at turn {end}, ms: Seedline brief vs LangGraph get_tuple",
            cell(sl["context_ms"], 2), cell(lg["context_ms"], 2),
            1 / r["ratios"]["context_ms_langgraph_over_seedline_brief"]))
        journal = r.get("journal")
        if journal:
            for mark in journal["marks"]:
                figures.append(_figure(
                    "7 vs journal", f"stored KB after turn {mark}: Seedline's stream vs a durable-"
                    "execution journal of every model call's input (model, lower bound)",
                    f"{journal['seedline_stream_bytes'][mark] / 1024:,.0f}",
                    f"{journal['journal_bytes'][mark] / 1024:,.0f}",
                    1 / journal["journal_over_seedline"][mark]))
            over = journal["journal_passes_limit_at_turn"]
            figures.append(_figure(
                "7 vs journal", "turn at which the journal passes Temporal's 50 MB history limit",
                "never (linear)", str(over)))
            linear = journal["seedline_stream_per_turn_last_over_first"]
            out.append(_row(
                "7 vs journal", f"Seedline stream bytes per turn, turn {journal['marks'][-1]}"
                f" / turn {journal['marks'][0]}", f"{linear:.2f}x", "-", linear,
                f"linear (<= {FLAT_STREAM_LIMIT}x)", linear <= FLAT_STREAM_LIMIT))
    if "startup" in results:
        r = results["startup"]
        for name, s in r["seconds"].items():
            out.append(_row("8 CLI start-up", f"import time of seedline {name}, s",
                            cell(s, 3), cell(r["bare_python_seconds"], 3) + " (python -c pass)",
                            s["median"] / r["target_seconds"], f"<= {r['target_seconds']} s",
                            s["median"] <= r["target_seconds"]))
        for name, s in r.get("wall_seconds", {}).items():
            figures.append(_figure("8 CLI start-up", f"wall time of seedline {name}, s",
                                   cell(s, 3), "-"))
    if "worktree" in results:
        for size, s in results["worktree"]["seconds"].items():
            figures.append(_figure(
                "12 relocation, dirty tree", f"{size} MB: seconds a relocation adds (save "
                f"{cell(s['save'], 3)}, arrival {cell(s['arrive'], 3)}) vs git diff | git apply",
                cell(s["seedline"], 3), cell(s["by_hand"], 3),
                s["seedline"]["median"] / s["by_hand"]["median"]))
    if "concurrent" in results:
        r = results["concurrent"]
        callers = r["conditions"]["callers"]
        out.append(_row(
            "9 concurrent opens", f"opens/s, {callers} callers on {callers} repos vs one caller"
            f" (p99 {r['concurrent_p99_ms']:.0f} ms vs {r['single_p99_ms']:.0f} ms)",
            f"{r['concurrent_opens_per_s']:.1f}", f"{r['single_opens_per_s']:.1f}",
            r["ratio"] or 0.0,
            ">= 1x, 0 failures, none live twice",
            (r["ratio"] or 0.0) >= 1 and r["failures"] == 0 and not r["repos_live_twice"]))
    if "storm" in results:
        out += _storm_rows(results["storm"], figures)
    if "realwake" in results:
        r = results["realwake"]
        platform, whole = r["platform_ms"]["p50"], r["whole_ms"]["p50"]
        out.append(_row(
            "11 real wake", "the platform's share of a real wake, median: message -> launch"
            f" ({platform:.1f} ms p50) of message -> the Claude Code CLI's first request"
            f" ({whole:.1f} ms p50)", f"{r['share_median']:.1%}",
            f"{r['conditions']['target_share']:.0%} (target)", r["ratio"],
            f"<= {r['conditions']['target_share']:.0%}", r["met"]))
        steps = r["steps_p50_ms"]
        figures.append(_figure(
            "11 real wake", "the platform's part by step, p50 ms: " + " / ".join(steps),
            " / ".join(f"{ms:.1f}" for ms in steps.values())))
    if "acp" in results:
        r = results["acp"]
        for kind, e in r["engines"].items():
            out.append(_row(
                "13 editor turn", f"ms `seedline acp` adds to a turn over the engine's own time, "
                f"p50, {kind} (turn {e['editor_ms']['p50']:.0f} ms, engine "
                f"{e['engine_ms']['p50']:.0f} ms)", f"{e['added_ms']['p50']:.1f}",
                f"{r['target_ms']:.0f} (target)", e["ratio"], f"< {r['target_ms']:.0f} ms",
                e["met"]))
    if "runner" in results:
        r = results["runner"]
        for what, key in (("MB on disk", "bytes"), ("packages", "packages")):
            scale = 1e6 if key == "bytes" else 1
            figures.append(_figure(
                "14 runner install", f"{what}: the runner's install vs everything",
                f"{r['runner'][key] / scale:.0f}", f"{r['full'][key] / scale:.0f}",
                r["runner"][key] / r["full"][key]))
        figures.append(_figure(
            "14 runner install", "wall time of seedline --help, s: the runner's vs everything",
            cell(r["runner"]["help_seconds"], 3), cell(r["full"]["help_seconds"], 3),
            r["runner"]["help_seconds"]["median"] / r["full"]["help_seconds"]["median"]))
    if "durable" in results:
        out += _durable_rows(results["durable"], figures)
    return out, figures


def _durable_rows(r: dict, figures: list[dict]) -> list[dict]:
    """The durable work per storm wake and per one-at-a-time wake, and idle CPU, against the
    targets; the other counts beside them."""
    target, per = r["targets"], r["per_operation"]
    storm, single = per["wake, in a storm"], per["wake, one at a time"]
    out = []
    for key, label in (("statements", "Postgres statements"), ("transactions",
                       "Postgres transactions"), ("deliveries", "deliveries to consumers")):
        limit = target[f"storm_{key}"]
        out.append(_row("15 durable work", f"{label} per storm wake", f"{storm[key]:g}",
                        f"{limit} (target)", storm[key] / limit, f"<= {limit}",
                        storm[key] <= limit))
    limit = target["single_fsyncs"]
    out.append(_row("15 durable work", "nats-server fsyncs per wake, one at a time",
                    f"{single['fsyncs']:g}", f"{limit} (target)", single["fsyncs"] / limit,
                    f"<= {limit}", single["fsyncs"] <= limit))
    idle, limit = r["idle_cpu_ms_per_s_total"], target["idle_cpu_ms_per_s"]
    out.append(_row("15 durable work", f"idle CPU ms/s, all processes, "
                    f"{r['conditions']['runners']} machines", f"{idle:g}",
                    f"{limit:g} (target)", idle / limit, f"<= {limit:g}", idle <= limit))
    counted = ("events", "ingest_entries", "timeline_entries", "deliveries", "acks",
               "statements", "transactions", "cpu_ms_total")
    for kind, counts in per.items():
        figures.append(_figure(
            "15 durable work", f"{kind}: events / ingest / timeline entries / deliveries / "
            "acks / statements / transactions / CPU ms",
            " / ".join(f"{counts[k]:g}" for k in counted)))
    if "floor" in r:  # the same work with nats-py and psycopg alone, right after
        from bench import durable_work

        floor, limit = r["floor"], r["floor_ratio_max"]
        ratio = durable_work.floor_ratio(r)
        out.append(_row("15 durable work", "CPU ms per storm wake, all processes, vs the lean "
                        "floor (the same durable work with nats-py and psycopg alone)",
                        f"{storm['cpu_ms_total']:g}", f"{floor['cpu_ms_per_wake']:g} (floor)",
                        ratio, f"<= {limit:g}x floor", ratio <= limit))
        fstorm = floor["per_operation"]["wake, in a storm"]
        figures.append(_figure(
            "15 durable work", "lean floor, storm wake: events / ingest / timeline entries / "
            "deliveries / acks / statements / transactions / CPU ms; per open CPU ms; storm "
            "wakes/s and open p50 ms (Seedline's beside it)",
            " / ".join(f"{fstorm[k]:g}" for k in counted)
            + f"; open {floor['cpu_ms_per_open']:g} ms; {floor['storm_wakes_per_s']:g}/s, "
            f"p50 {floor['open_p50_ms']:g} ms",
            f"Seedline: open {per['open, one at a time']['cpu_ms_total']:g} ms; "
            f"{r['storm_wakes_per_s']:g}/s, p50 {r['open_p50_ms']:g} ms"))
    return out


def _storm_rows(r: dict, figures: list[dict]) -> list[dict]:
    """Wakes/s and p99 per partition count against the targets; the rate the CPU per wake
    allows on this machine beside them."""
    c, target = r["conditions"], r["conditions"]["targets"]
    out = []
    for run in r["runs"]:
        rate, p99 = run["wakes_per_s"] or 0.0, (run["message_to_launch_ms"] or {}).get("p99")
        clean = f"{run['failures']} failures, {run['duplicates']} duplicates, " \
                f"{len(run['repos_live_twice'])} live twice, " \
                f"{len(run['woken_elsewhere'])} woken elsewhere"
        out.append(_row(
            "10 wake storm", f"wakes/s, {c['conversations']:,} stopped conversations on "
            f"{c['runners']} machines, {run['partitions']} partition(s) (p99 {p99 or 0:.0f} ms; "
            f"{clean})", f"{rate:.1f}", f"{target['wakes_per_s_min']:.0f} (target)",
            rate / target["wakes_per_s_min"],
            f">= {target['wakes_per_s_min']:.0f}/s, p99 <= {target['p99_ms_max']:.0f} ms, 0/0/0/0",
            bool(run["met"])))
        bound = run["limited_by"]
        figures.append(_figure(
            "10 wake storm", f"{run['partitions']} partition(s): CPU ms per wake, all processes"
            f" (busiest: {bound['busiest']}); the rate it allows on {c['cpus']} cores",
            f"{bound['cpu_s_per_wake_total'] * 1000:.1f} ms",
            f"{bound['machine_bound_wakes_per_s'] or 0:.1f} wakes/s"))
    return out


# Stream bytes per turn late against early: each entry is stored once, so the ratio
# stays near 1 (messages vary in length, so not exactly 1).
FLAT_STREAM_LIMIT = 1.5


def _scaled(s: dict, by: float = 1024) -> dict:
    return {"median": s["median"] / by, "min": s["min"] / by, "max": s["max"] / by}


def markdown(summary: dict) -> str:
    c = summary["conditions"]
    lines = [
        "| # | measure | Seedline | baseline (same run) | ratio | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in summary["rows"]:
        lines.append(
            f"| {row['bench']} | {row['measure']} | {row['seedline']} | {row['baseline']}"
            f" | {row['ratio']:.2f} | {row['target']} | {report.yes_no(row['met'])} |"
        )
    if summary["figures"]:
        lines += ["", "Around them (no target of their own):", "",
                  "| # | measure | Seedline | compared with | ratio |", "|---|---|---|---|---|"]
        for fig in summary["figures"]:
            ratio = "-" if fig["ratio"] is None else f"{fig['ratio']:.2f}"
            lines.append(f"| {fig['bench']} | {fig['measure']} | {fig['seedline']}"
                         f" | {fig['baseline']} | {ratio} |")
    o = summary["options"]
    pg = c.get("postgres_settings") or {}
    lines += [
        "",
        "Figures: median (min - max) over runs. Conditions:",
        "",
        f"- machine: {c['cpus']} cores ({c['cpu_model']}), {c['memory']} RAM, {c['platform']}, Python {c['python']};"
        f" 1-min load average {c['load_average_1_5_15_before'][0]} before, {c['load_average_1_5_15_after'][0]} after",
        f"- nats-server {c['nats_server']}, JetStream file storage, sync_interval: always"
        f" ({'checked on the server' if c['nats_sync_interval_always'] else 'NOT confirmed'}); the no-sync ingest"
        " baseline runs on a second server without it",
        f"- Postgres {c['postgres']} (pgserver wheel, local Unix socket): fsync {pg.get('fsync')},"
        f" synchronous_commit {pg.get('synchronous_commit')}, shared_buffers {pg.get('shared_buffers')}",
        "- every benchmark starts its own nats-server and Postgres in a temporary folder; every service"
        " and the open benchmark's scripted runner run as their own processes (console scripts)",
        f"- ingest: {o['ingest_count']:,} entries per run, {o['ingest_rounds']} rounds, content 512 B and 4 KiB,"
        " window of 1,000 pending acks; then 1, 2 and 4 partitioned timeline-writers on the same cores",
        f"- lag: {o['lag_rounds']} rounds of {o['lag_seconds']:.0f} s, 512 B content, at half the 512 B"
        " end-to-end ingest rate above; visibility polled on the projection offset every 2 ms",
        f"- open: {o['open_rounds']} rounds of up to {o['open_opens']} sequential opens per repo, entry content"
        " 200-2,000 chars; the 1,000,000-entry repo is COPYed into the projection",
        f"- rebuild and memory: {o['entries']:,} entries of 512 B content ingested through the writer with all"
        f" four services running{'' if o['entries'] >= 200_000 else ' (the issue names 200,000: --entries 200000; that fill alone takes about four minutes here)'};"
        f" table vacuumed and checkpointed after the fill; rebuild {o['rebuild_rounds']} rounds, alternating"
        " with the raw read",
        f"- LangGraph: langgraph-checkpoint-postgres PostgresSaver, one checkpoint per turn holding the whole"
        f" message list; {o['langgraph_turns']} turns, person 100-600 / assistant 300-3,000 chars,"
        f" {o['langgraph_runs']} runs on fresh databases of the same Postgres",
    ]
    if summary["errors"]:
        lines += ["", "Failed:", ""] + [f"- {k}: {v}" for k, v in summary["errors"].items()]
    rt = summary["runtime_seconds"]
    lines += ["", f"Commit: {summary['commit']}, {summary['generated_at']}."]
    lines += ["", "Suite runtime: " + ", ".join(f"{k} {v:.0f} s" for k, v in rt.items()) + "."]
    if not summary["within_time_budget"]:
        lines.append(f"The suite took longer than {TIME_BUDGET_SECONDS // 60} minutes.")
    for name, text in summary.get("profiles", {}).items():
        lines += ["", f"Profile of {name} (target missed):", "", "```", text.rstrip(), "```"]
    lines += ["", "Details of each benchmark: bench/results/<name>.md and .json."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m bench.suite", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--only", help=f"comma-separated parts to run, of {','.join(PARTS)}")
    parser.add_argument(
        "--entries", type=int, help="entries for the memory and rebuild fill (default 100,000)"
    )
    parser.add_argument("--ingest-count", type=int, help="entries per ingest run (default 10,000)")
    parser.add_argument("--open-opens", type=int, help="opens per series (default 200)")
    parser.add_argument("--no-profile", action="store_true", help="do not profile a missed target")
    args = parser.parse_args(argv)
    only = tuple(p.strip() for p in args.only.split(",")) if args.only else PARTS
    unknown = set(only) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {', '.join(sorted(unknown))}; choose from {', '.join(PARTS)}")
    summary = run_suite(
        only,
        not args.no_profile,
        entries=args.entries,
        ingest_count=args.ingest_count,
        open_opens=args.open_opens,
    )
    print(summary["markdown"])
    return summary


if __name__ == "__main__":
    main()
