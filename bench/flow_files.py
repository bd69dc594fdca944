"""How many files and packages each flow runs through, measured on the running system.

    python -m bench.flow_files [--settle 1.5]

The four services and a scripted runner run as their own processes, each with
bench/flow_trace/sitecustomize.py loaded: between two signals it records every Seedline
source file one of whose functions runs. For each flow the window is opened, the flow run
once and waited for, the system given `--settle` seconds more (consumers downstream), and
the window closed. The same window with nothing sent is measured first: files that run then
(heartbeats, presence, timers) are counted apart, not as the flow's. Works on any commit
whose bench.open_latency has start_system.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

from bench.open_latency import INSTANCE, NODE, start_system

TRACER = Path(__file__).parent / "flow_trace"
PACKAGE = re.compile(r"/(libs|services)/([^/]+)/src/(seedline_[a-z_]+/.*)$")


async def _window(pids: dict[str, int], out: Path, settle: float, flow) -> dict[str, set[str]]:
    for path in out.glob("*.json"):
        path.unlink()
    for pid in pids.values():
        os.kill(pid, signal.SIGUSR1)
    await asyncio.sleep(0.2)
    if flow is not None:
        await flow()
    await asyncio.sleep(settle)
    for pid in pids.values():
        os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + 10
    while len(list(out.glob("*.json"))) < len(pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    by_pid = {pid: name for name, pid in pids.items()}
    found = {by_pid[int(p.stem)]: set(json.loads(p.read_text())["files"])
             for p in out.glob("*.json")}
    return found


def _files(per_process: dict[str, set[str]]) -> set[str]:
    """Repo-relative paths, whichever process ran them."""
    files = set()
    for paths in per_process.values():
        for path in paths:
            match = PACKAGE.search(path)
            if match:
                files.add(f"{match.group(1)}/{match.group(2)}/src/{match.group(3)}")
    return files


def _package(path: str) -> str:
    return path.split("/")[1]


async def _request(nc, subject: str, body: dict, timeout: float = 30.0) -> dict:
    # bench.open_latency.request_json does this too, but older commits, which this tool
    # measures for a before/after, do not have it.
    return json.loads((await nc.request(subject, json.dumps(body).encode(), timeout=timeout)).data)


async def main(settle: float) -> dict:
    from seedline_contracts import subjects

    out = Path(tempfile.mkdtemp(prefix="seedline-flow-"))
    os.environ["SEEDLINE_FLOW_TRACE"] = str(out / "trace")
    (out / "trace").mkdir()
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(TRACER), os.environ.get("PYTHONPATH")]))
    async with AsyncExitStack() as stack:
        system = await start_system(out, stack)
        nc, pids = system["nc"], system["pids"]
        js = nc.jetstream()

        async def open_repo(repo: str) -> dict:
            return await _request(nc, subjects.API_SESSIONS_OPEN, {
                "instance_id": INSTANCE, "repo": repo, "engine": "scripted", "node_id": NODE,
                "request_id": uuid.uuid4().hex})

        async def live(repo: str) -> bool:
            listed = await _request(nc, subjects.API_SESSIONS_LIST, {"instance_id": INSTANCE})
            return any(row["repo"] == repo for row in listed.get("conversations", []))

        async def publish(repo: str, session_id: str, kind: str, content: str) -> int:
            entry = {"entry_id": uuid.uuid4().hex, "instance_id": INSTANCE, "repo": repo,
                     "session_id": session_id, "kind": kind, "content": content}
            ack = await js.publish(subjects.ingest_timeline_subject(INSTANCE),
                                   json.dumps(entry).encode(),
                                   headers={"Nats-Msg-Id": entry["entry_id"]})
            return ack.seq

        async def stored(repo: str, count: int) -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                read = await _request(nc, subjects.API_TIMELINE_READ,
                                      {"instance_id": INSTANCE, "repo": repo, "limit": 100})
                if len(read.get("entries", [])) >= count:
                    return
                await asyncio.sleep(0.05)
            raise RuntimeError(f"{repo}: {count} entries never stored")

        # Warm every path once, so the windows see the flows and not first imports.
        warm = await open_repo("flows/warm")
        await publish("flows/warm", warm["session_id"], "chat_assistant", "warm")
        await _request(nc, subjects.API_SESSIONS_STOP, {"session_id": warm["session_id"]})
        await publish("flows/warm", warm["session_id"], "chat_user", "wake up")
        for _ in range(300):
            if await live("flows/warm"):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(settle)

        idle = await _window(pids, out / "trace", settle + 1.0, None)

        async def ingest() -> None:
            await publish("flows/ingest", "csess_ingest", "chat_assistant", "one entry")
            await stored("flows/ingest", 1)

        async def open_flow() -> None:
            reply = await open_repo("flows/open")
            assert reply.get("ok"), reply

        woken = await open_repo("flows/wake")
        await _request(nc, subjects.API_SESSIONS_STOP, {"session_id": woken["session_id"]})
        await asyncio.sleep(settle)

        async def wake() -> None:
            await publish("flows/wake", woken["session_id"], "chat_user", "go on")
            for _ in range(300):
                if await live("flows/wake"):
                    return
                await asyncio.sleep(0.05)
            raise RuntimeError("the wake never launched")

        results = {}
        idle_files = _files(idle)
        for name, flow in (("ingest", ingest), ("open", open_flow), ("wake", wake)):
            window = await _window(pids, out / "trace", settle, flow)
            files = _files(window)
            own = files - idle_files
            results[name] = {
                "files": len(files), "packages": len({_package(f) for f in files}),
                "files_not_idle": len(own), "packages_not_idle": len({_package(f) for f in own}),
                "processes": sorted(n for n, f in window.items()
                                    if _files({n: f}) - idle_files),
                "list": sorted(files),
            }
        results["idle"] = {"files": len(idle_files), "list": sorted(idle_files)}
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settle", type=float, default=1.5)
    parser.add_argument("--json", type=Path, help="Write the whole result, file lists too.")
    args = parser.parse_args()
    found = asyncio.run(main(args.settle))
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    for name in ("ingest", "open", "wake"):
        row = found[name]
        print(f"{name:7} {row['files']:3} files in {row['packages']} packages; "
              f"{row['files_not_idle']} files in {row['packages_not_idle']} packages not run "
              f"when idle; processes: {', '.join(row['processes'])}")
    print(f"idle    {found['idle']['files']:3} files run with nothing sent")
