"""The platform's share of a real wake: the real Claude Code CLI, woken by a person's message.

The four services and a runner whose engine is the real `claude` CLI (installed by `make
engines`) each run as their own process; the CLI talks to the project's Messages API
stand-in (tests/engines/anthropic_standin.py), which answers at once. A conversation is
opened and stopped; then, round after round, a person's message wakes it and the
conversation is stopped again once the engine has answered. Each wake is timed on one
clock, this process's:

- message: just before the `chat_user` entry is published;
- launch: the launch request reaching the machine (this process listens on the machine's
  launch subject beside the runner);
- first request: the stand-in receiving the engine's first request.

The platform's part is message -> launch; the rest (the runner's proof check, the engine's
start, its first request) is launch -> first request. Target: the platform's part at most 5%
of the whole. The platform's part is split by when this process saw each step on the wire:
the entry in the timeline (timeline-writer), `wake_requested` (runner-gateway),
`continuity_decided` (continuity-resolver), `seed_composed` (seed-composer), the launch
(runner-gateway).

    python -m bench.real_wake [--rounds 10]

Writes bench/results/real_wake.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path

from bench import report
from bench.open_latency import request_json, start_system, summarise

NAME = "real_wake"
ROOT = Path(__file__).resolve().parents[1]
ENGINE_TESTS = ROOT / "tests" / "engines"  # the stand-in, and the CLI's environment
CLAUDE = ROOT / ".tools" / "engines" / "node_modules" / ".bin" / "claude"
NODE = "bench-claude-1"
INSTANCE = "benchwake"
REPO = "bench/real-wake"
TARGET_SHARE = 0.05
STEP_TIMEOUT_S = 90.0
# The wake's steps on the wire, in order, and who takes each one (from the step before).
STEPS = (("chat_user", "timeline-writer"), ("wake_requested", "runner-gateway"),
         ("continuity_decided", "continuity-resolver"), ("seed_composed", "seed-composer"),
         ("launch", "runner-gateway"))


class Unavailable(RuntimeError):
    """What this bench needs is not installed here."""


def claude_executable() -> Path:
    path = Path(os.environ.get("SEEDLINE_CLAUDE_BIN") or CLAUDE)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise Unavailable(f"the Claude Code CLI is not installed at {path}: `make engines` "
                          "installs it (or set SEEDLINE_CLAUDE_BIN)")
    return path


def _engine_tests(name: str):
    """A module of tests/engines (not a package), as its conftest loads it."""
    spec = importlib.util.spec_from_file_location(f"seedline_bench_{name}",
                                                  ENGINE_TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def _until(check, what: str, timeout: float = STEP_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        await asyncio.sleep(0.01)
    raise TimeoutError(f"no {what} within {timeout:.0f} s")


async def _say(nc, session_id: str, text: str) -> None:
    from seedline_contracts import subjects
    from seedline_contracts.times import now_text

    entry_id = f"wake-{uuid.uuid4().hex}"
    body = {"entry_id": entry_id, "instance_id": INSTANCE, "repo": REPO,
            "session_id": session_id, "kind": "chat_user", "content": text, "at": now_text()}
    await nc.jetstream().publish(subjects.ingest_timeline_subject(INSTANCE),
                                 json.dumps(body).encode(), headers={"Nats-Msg-Id": entry_id})


async def _answered(standin, before: int) -> None:
    """Until the engine's conversation request after `before` was answered, and the CLI
    had a moment to write its transcript and end."""
    await _until(lambda: len(standin.conversation_requests()) > before, "engine request")
    await asyncio.sleep(1.5)


async def _rounds(rounds: int) -> list[dict]:
    from seedline_contracts import subjects

    executable = claude_executable()
    claude_env = _engine_tests("cli_env").claude_env
    standin = _engine_tests("anthropic_standin").AnthropicStandIn().start()
    try:
        with tempfile.TemporaryDirectory(prefix="seedline-bench-wake-") as folder:
            tmp = Path(folder)
            (tmp / "repos" / REPO).mkdir(parents=True)
            async with AsyncExitStack() as stack:
                system = await start_system(
                    tmp, stack, nodes=(NODE,), engine="claude",
                    runner_args=("--repos-dir", str(tmp / "repos"),
                                 "--claude-bin", str(executable)),
                    runner_env=claude_env(tmp / "claude-home", tmp / "claude-config",
                                          standin.base_url))
                nc = system["nc"]
                woken: list[str] = []
                seen: dict[str, list[float]] = {step: [] for step, _ in STEPS}
                launches = seen["launch"]

                async def on_launch(msg) -> None:
                    launches.append(time.perf_counter())

                async def on_step(msg) -> None:
                    kind = msg.subject.rsplit(".", 1)[-1]
                    if kind in seen:
                        seen[kind].append(time.perf_counter())

                async def on_opened(msg) -> None:
                    event = json.loads(msg.data)
                    if (event.get("plan") or {}).get("wake_seq"):
                        woken.append(event["reply"]["session_id"])

                await nc.subscribe(subjects.runner_subject(NODE, "launch"), cb=on_launch)
                await nc.subscribe(subjects.session_event_filter("opened"), cb=on_opened)
                await nc.subscribe(subjects.TIMELINE_CHAT_USER, cb=on_step)
                await nc.subscribe(subjects.SESSION_EVENTS_ALL, cb=on_step)
                before = len(standin.conversation_requests())
                opened = await request_json(nc, subjects.API_SESSIONS_OPEN, {
                    "request_id": f"bench-{uuid.uuid4().hex}", "instance_id": INSTANCE,
                    "repo": REPO, "engine": "claude", "node_id": NODE,
                    "instruction": "Start with the board."})
                if not opened.get("ok"):
                    raise RuntimeError(f"the first open failed: {opened}")
                await _answered(standin, before)
                session_id = opened["session_id"]
                measured = []
                for n in range(rounds):
                    await request_json(nc, subjects.API_SESSIONS_STOP, {"session_id": session_id},
                                       STEP_TIMEOUT_S)
                    seen_launches, seen_arrivals = len(launches), len(standin.arrivals)
                    before = len(standin.conversation_requests())
                    message = time.perf_counter()
                    await _say(nc, session_id, f"Round {n + 1}: where were we?")
                    launch = await _until(lambda: launches[seen_launches:], "launch")
                    first = await _until(
                        lambda: [t for t in standin.arrivals[seen_arrivals:] if t >= launch[0]],
                        "engine request")
                    [session_id] = await _until(lambda: woken[n:n + 1], "opened event")
                    await _answered(standin, before)
                    marks = [message] + [min(t for t in seen[step] if t >= message)
                                         for step, _ in STEPS]
                    measured.append({"platform_ms": (launch[0] - message) * 1000,
                                     "rest_ms": (first[0] - launch[0]) * 1000,
                                     "whole_ms": (first[0] - message) * 1000,
                                     "steps_ms": {step: (marks[i + 1] - marks[i]) * 1000
                                                  for i, (step, _) in enumerate(STEPS)}})
                await request_json(nc, subjects.API_SESSIONS_STOP, {"session_id": session_id},
                                   STEP_TIMEOUT_S)
                return measured
    finally:
        standin.stop()


def assemble(measured: list[dict]) -> dict:
    shares = [m["platform_ms"] / m["whole_ms"] for m in measured]
    share = statistics.median(shares)
    return {
        "name": NAME,
        "conditions": {"rounds": len(measured), "cpus": os.cpu_count(),
                       "engine": "claude (real CLI) against the Messages API stand-in",
                       "target_share": TARGET_SHARE},
        "platform_ms": summarise([m["platform_ms"] for m in measured]),
        "rest_ms": summarise([m["rest_ms"] for m in measured]),
        "whole_ms": summarise([m["whole_ms"] for m in measured]),
        "steps_p50_ms": {step: statistics.median(m["steps_ms"][step] for m in measured)
                         for step, _ in STEPS},
        "share_median": share,
        "ratio": share / TARGET_SHARE,
        "met": share <= TARGET_SHARE,
        "rounds": measured,
    }


def markdown(result: dict) -> str:
    c = result["conditions"]
    rows = [("message -> launch at the machine (the platform)", result["platform_ms"]),
            ("launch -> the engine's first request (runner, CLI start)", result["rest_ms"]),
            ("message -> the engine's first request", result["whole_ms"])]
    return "\n".join([
        "## The platform's share of a real wake",
        "",
        f"{c['rounds']} wakes of one conversation, {c['engine']}, {c['cpus']} CPUs.",
        "",
        "| part | p50 ms | min ms | max ms |",
        "|---|---|---|---|",
        *(f"| {name} | {s['p50']:.1f} | {s['min']:.1f} | {s['max']:.1f} |" for name, s in rows),
        "",
        f"The platform's share, median of the wakes: {result['share_median']:.1%} "
        f"(target at most {c['target_share']:.0%}: {report.yes_no(result['met'])}).",
        "",
        "The platform's part by step, p50 ms (from the step before to this one on the wire):",
        "",
        "| step | taken by | p50 ms |",
        "|---|---|---|",
        *(f"| {step} | {who} | {result['steps_p50_ms'][step]:.1f} |" for step, who in STEPS),
        "",
    ])


def run_real_wake(rounds: int = 10) -> dict:
    result = assemble(asyncio.run(_rounds(rounds)))
    report.write(NAME, result, markdown(result))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        print(markdown(run_real_wake(args.rounds)))
    except Unavailable as exc:
        parser.exit(1, f"{exc}\n")


if __name__ == "__main__":
    main()
