"""Wake storm: a morning when every idle-stopped conversation is woken by a person at once.

The four services and `runners` scripted runner machines each run as their own process
on real servers (bench.open_latency.start_system). `conversations` repos over
`instances` instances are opened once, spread evenly over the machines, and stopped.
Then one person's message per repo (a fresh `chat_user` entry) is published as fast as
the producer can, and each wake (CONTRACT.md 4: the platform opens the repo's
conversation on the machine of its last open, the message as the launch's instruction)
is timed from its message's publish to its `opened` event: the machine has the launch
and confirmed it. Reported: the time until every conversation is launched, wakes/s,
p50/p99 message -> launch, and failures, duplicates (a repo woken twice) and repos
live twice afterwards, which must all be 0. Then the same with ingest in 2 partitions
(two timeline-writers). CPU seconds per wake of each process are read from /proc over
the storm, so what limits the rate shows in the same run.

    python -m bench.wake_storm [--conversations 1000] [--instances 100] [--runners 10]
                               [--partitions 1 2] [--profile]

--profile also samples the four services with py-spy over the storm's first seconds and
names each one's busiest functions.

Writes bench/results/wake_storm.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

from bench import cpu_accounting, report
from bench.open_latency import (ENGINE, SERVICES, Spies, live_per_repo, request_json,
                                start_system, stop_live, summarise)

NAME = "wake_storm"
TARGETS = {"wakes_per_s_min": 250.0, "p99_ms_max": 500.0}
PREPARE_CONCURRENCY = 50  # opens and stops in flight while the conversations are set up
PUBLISH_WINDOW = 1_000
STORM_DEADLINE_S = 300.0
PROFILE_SECONDS = 10
MESSAGE = "Good morning. Where were we?"


def conversations_of(count: int, instances: int, runners: int) -> list[tuple[str, str, str]]:
    """(instance_id, repo, node_id) per conversation: repos spread evenly over the
    instances, and conversations round-robin over the machines."""
    nodes = nodes_of(runners)
    return [(f"storm{n % instances:03d}", f"bench/storm-{n // instances:03d}", nodes[n % runners])
            for n in range(count)]


def nodes_of(runners: int) -> tuple[str, ...]:
    return tuple(f"bench-storm-{n:02d}" for n in range(runners))


async def prepare(nc, conversations: list[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """Open every repo once on its machine, then stop it: (instance, repo) -> session_id."""
    from seedline_contracts import subjects

    gate = asyncio.Semaphore(PREPARE_CONCURRENCY)
    stopped: dict[tuple[str, str], str] = {}

    async def one(instance: str, repo: str, node: str) -> None:
        async with gate:
            reply = await request_json(nc, subjects.API_SESSIONS_OPEN, {
                "request_id": f"storm-{uuid.uuid4().hex}", "instance_id": instance,
                "repo": repo, "engine": ENGINE, "node_id": node})
            if not reply.get("ok"):
                raise RuntimeError(f"setting up {instance}/{repo} failed: {reply}")
            await stop_live(nc, reply["session_id"])
            stopped[(instance, repo)] = reply["session_id"]

    await asyncio.gather(*(one(*c) for c in conversations))
    await _until_none_live(nc, {instance for instance, _, _ in conversations})
    return stopped


async def _until_none_live(nc, instances: set[str]) -> None:
    deadline = time.monotonic() + 60
    while await live_per_repo(nc, instances):
        if time.monotonic() > deadline:
            raise RuntimeError("the stopped conversations still list as live after 60 s")
        await asyncio.sleep(0.2)


class WakeClock:
    """When this process saw each wake's `opened` or `open_failed` event, by repo."""

    def __init__(self) -> None:
        self.launched: dict[tuple[str, str], list[float]] = {}
        self.machines: dict[tuple[str, str], set[str]] = {}  # where each repo was launched
        self.failed: list[dict] = []

    async def on_event(self, msg) -> None:
        at = time.perf_counter()
        event = json.loads(msg.data)
        plan = event.get("plan") or {}
        if not plan.get("wake_seq"):
            return
        if event.get("type") == "opened":
            key = (plan["instance_id"], plan["repo"])
            self.launched.setdefault(key, []).append(at)
            self.machines.setdefault(key, set()).add(event["reply"]["node_id"])
        else:
            self.failed.append(event.get("error"))


def messages(stopped: dict[tuple[str, str], str]) -> list[tuple[tuple[str, str], bytes, str]]:
    """One person's message per stopped repo, serialised before the clock starts."""
    from seedline_contracts.times import now_text

    tag = uuid.uuid4().hex[:8]
    out = []
    for n, ((instance, repo), session_id) in enumerate(sorted(stopped.items())):
        entry_id = f"storm-{tag}-{n:05d}"
        body = {"entry_id": entry_id, "instance_id": instance, "repo": repo,
                "session_id": session_id, "kind": "chat_user", "content": MESSAGE,
                "at": now_text()}
        out.append(((instance, repo), json.dumps(body).encode(), entry_id))
    return out


async def storm(nc, stopped: dict[tuple[str, str], str], homes: dict[tuple[str, str], str],
                cpu_of, spy_on: dict[str, int] | None = None) -> dict:
    """The messages published, every wake awaited; `homes` is each repo's machine (of its
    last open), where its wake must go; `spy_on` (name -> pid) is sampled with py-spy over
    the first PROFILE_SECONDS."""
    from seedline_contracts import subjects

    clock = WakeClock()
    subs = [await nc.subscribe(subjects.session_event_filter(kind), cb=clock.on_event)
            for kind in ("opened", "open_failed")]
    await nc.flush()
    batch = messages(stopped)
    js = nc.jetstream(publish_async_max_pending=PUBLISH_WINDOW)
    sent: dict[tuple[str, str], float] = {}
    spies = Spies(spy_on, PROFILE_SECONDS) if spy_on else None
    cpu_before = cpu_of()
    began = time.perf_counter()
    futures = []
    for key, body, entry_id in batch:
        sent[key] = time.perf_counter()
        futures.append(await js.publish_async(subjects.ingest_timeline_subject(key[0]), body,
                                              headers={"Nats-Msg-Id": entry_id}))
    await asyncio.gather(*futures)
    published = time.perf_counter() - began
    deadline = time.perf_counter() + STORM_DEADLINE_S
    while len(clock.launched) + len(clock.failed) < len(batch) and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    cpu_after = cpu_of()
    await asyncio.sleep(1.0)  # late duplicates, if any, arrive here
    for sub in subs:
        await sub.unsubscribe()
    firsts = {key: min(times) for key, times in clock.launched.items()}
    wall = (max(firsts.values()) - began) if firsts else None
    latencies = [(firsts[key] - sent[key]) * 1000 for key in firsts]
    live = await live_per_repo(nc, {instance for instance, _ in stopped})
    profile = None
    if spies:
        in_window = sum(1 for at in firsts.values() if at - began <= PROFILE_SECONDS)
        profile = await spies.summary(in_window, "wake")
    return {
        "wakes": len(batch),
        "launched": len(firsts),
        "failures": len(batch) - len(firsts),  # failed, or not launched by the deadline
        "failure_errors": clock.failed[:5],
        "duplicates": sum(len(times) - 1 for times in clock.launched.values()),
        "woken_elsewhere": sorted(f"{i}/{r}" for (i, r), nodes in clock.machines.items()
                                  if nodes != {homes[(i, r)]}),
        "repos_live_twice": sorted(f"{i}/{r}" for (i, r), n in live.items() if n > 1),
        "repos_live_none": len(stopped) - len(live),
        "publish_s": published,
        "all_launched_s": wall,
        "wakes_per_s": len(firsts) / wall if wall else None,
        "message_to_launch_ms": summarise(latencies) if latencies else None,
        "cpu_s_per_wake": {part: (cpu_after[part] - cpu_before[part]) / max(1, len(firsts))
                           for part in cpu_before},
        "profile": profile,
    }


def _cpu_reader(system: dict):
    """CPU seconds so far of each kind of process: the services, the runners, NATS, Postgres."""
    pids = system["pids"]

    def read() -> dict[str, float]:
        parts: dict[str, float] = {}
        for name, pid in pids.items():
            part = next((s for s in SERVICES if name.startswith(s)), "runners")
            parts[part] = parts.get(part, 0.0) + cpu_accounting.tree_cpu_seconds(pid)
        parts["nats-server"] = cpu_accounting.tree_cpu_seconds(system["nats"].proc.pid)
        parts["postgres"] = cpu_accounting.tree_cpu_seconds(system["postgres"].postmaster_pid())
        mine = os.times()
        parts["producer"] = mine.user + mine.system
        return parts

    return read


async def _round(partitions: int, conversations: int, instances: int, runners: int,
                 profile: bool) -> dict:
    plan = conversations_of(conversations, instances, runners)
    with tempfile.TemporaryDirectory(prefix="seedline-bench-storm-") as folder:
        async with AsyncExitStack() as stack:
            system = await start_system(Path(folder), stack, nodes=nodes_of(runners),
                                        partitions=partitions)
            nc = system["nc"]
            prepare_began = time.perf_counter()
            stopped = await prepare(nc, plan)
            prepared = time.perf_counter() - prepare_began
            load = os.getloadavg()[0]
            services = {name: pid for name, pid in system["pids"].items() if name in SERVICES}
            homes = {(instance, repo): node for instance, repo, node in plan}
            result = await storm(nc, stopped, homes, _cpu_reader(system),
                                 services if profile else None)
    result.update(partitions=partitions, prepare_s=prepared, load_average_1min_at_start=round(load, 2))
    return result


def met(result: dict) -> bool | None:
    rate, lat = result.get("wakes_per_s"), result.get("message_to_launch_ms")
    if rate is None or lat is None:
        return None
    return (rate >= TARGETS["wakes_per_s_min"] and lat["p99"] <= TARGETS["p99_ms_max"]
            and result["failures"] == 0 and result["duplicates"] == 0
            and not result["woken_elsewhere"]
            and not result["repos_live_twice"])


def limited_by(result: dict, cores: int) -> dict:
    """The busiest process, and the machine's bound: CPU seconds per wake over all
    processes against `cores`."""
    costs = result["cpu_s_per_wake"]
    total = sum(costs.values())
    return {
        "busiest": max(costs, key=costs.get) if total else None,
        "cpu_s_per_wake_total": total,
        "machine_bound_wakes_per_s": cores / total if total else None,
    }


def assemble(runs: list[dict], conversations: int, instances: int, runners: int) -> dict:
    cores = os.cpu_count() or 1
    for run in runs:
        run["met"] = met(run)
        run["limited_by"] = limited_by(run, cores)
    first = runs[0]
    return {
        "name": NAME,
        "conditions": {"conversations": conversations, "instances": instances,
                       "runners": runners, "cpus": cores, "engine": ENGINE,
                       "targets": TARGETS},
        "runs": runs,
        "wakes_per_s": first["wakes_per_s"],
        "p99_ms": (first["message_to_launch_ms"] or {}).get("p99"),
        "met": first["met"],
    }


def markdown(result: dict) -> str:
    c = result["conditions"]

    def f(value, digits=1):
        return "-" if value is None else f"{value:.{digits}f}"

    lines = [
        f"## Wake storm: {c['conversations']} stopped conversations, {c['instances']} instances, "
        f"{c['runners']} runner machines",
        "",
        f"{c['cpus']} CPUs, scripted engine; one message per repo published as fast as one "
        "producer can; message -> `opened` (the machine confirmed the launch).",
        "",
        "| partitions | all launched s | wakes/s | p50 ms | p99 ms | failures | duplicates "
        "| live twice | woken elsewhere | met |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        lat = run["message_to_launch_ms"] or {}
        lines.append(
            f"| {run['partitions']} | {f(run['all_launched_s'], 2)} | {f(run['wakes_per_s'])} | "
            f"{f(lat.get('p50'))} | {f(lat.get('p99'))} | {run['failures']} | "
            f"{run['duplicates']} | {len(run['repos_live_twice'])} | "
            f"{len(run['woken_elsewhere'])} | {report.yes_no(run['met'])} |")
    lines += ["", "CPU ms per wake, by process kind (what limits the rate):", ""]
    parts = sorted({p for run in result["runs"] for p in run["cpu_s_per_wake"]})
    lines += ["| partitions | " + " | ".join(parts) + " | total | machine bound wakes/s |",
              "|---" * (len(parts) + 3) + "|"]
    for run in result["runs"]:
        bound = run["limited_by"]
        lines.append(f"| {run['partitions']} | "
                     + " | ".join(f(run["cpu_s_per_wake"].get(p, 0) * 1000, 2) for p in parts)
                     + f" | {f(bound['cpu_s_per_wake_total'] * 1000, 2)} | "
                     f"{f(bound['machine_bound_wakes_per_s'])} |")
    for run in result["runs"]:
        if not run.get("profile"):
            continue
        lines += ["", f"py-spy, {run['partitions']} partition(s), the storm's first "
                  f"{run['profile']['seconds']} s: busy ms per wake and busiest functions", ""]
        for name, proc in run["profile"]["processes"].items():
            top = ", ".join(f"{t['frame']} ({t['samples']})" for t in proc["top_self"][:4])
            lines.append(f"- {name}: {proc['busy_ms_per_wake']:.2f} ms/wake; {top}")
    return "\n".join(lines + [""])


def run_wake_storm(conversations: int = 1_000, instances: int = 100, runners: int = 10,
                   partitions: tuple[int, ...] = (1, 2), profile: bool = False) -> dict:
    runs = [asyncio.run(_round(k, conversations, instances, runners, profile))
            for k in partitions]
    result = assemble(runs, conversations, instances, runners)
    report.write(NAME, result, markdown(result))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1_000)
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--runners", type=int, default=10)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--profile", action="store_true",
                        help="sample the services with py-spy during the storm")
    args = parser.parse_args(argv)
    for name in ("conversations", "instances", "runners"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if any(k < 1 for k in args.partitions):
        parser.error("--partitions must each be at least 1")
    if args.instances > args.conversations:
        parser.error("--instances must not exceed --conversations")
    print(markdown(run_wake_storm(args.conversations, args.instances, args.runners,
                                  tuple(args.partitions), args.profile)))


if __name__ == "__main__":
    main()
