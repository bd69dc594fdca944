"""What `seedline acp` adds to an editor's turn over the engine's own time.

The four services run as processes; the runner runs in this process, so its engine's
times and the editor's are read on one clock. The editor is the official ACP client SDK
speaking to a real `seedline acp` process over stdio. Round after round it sends a
message and waits for the turn's answer:

- the editor's time: `session/prompt` sent -> its answer (`end_turn`) received;
- the engine's own time: the engine given the message -> the engine saying its turn is
  over (the output that ends the turn);
- added: the one less the other (the message's way to the engine: the person's entry,
  the timeline, the gateway's turn; and the end's way back: the runner's entry, the
  timeline, the push, the bridge's read).

Each message follows the last answer by a second, as a person's would.

Engines: the scripted engine made to take 200 ms, and the real Claude Code CLI against
the Messages API stand-in when `make engines` installed it. Target: under 100 ms added
at the median.

    python -m bench.acp_latency [--rounds 20]

Writes bench/results/acp_latency.json and .md and prints the markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from bench import report
from bench.open_latency import start_system, summarise
from bench.real_wake import Unavailable, _engine_tests, claude_executable

NAME = "acp_latency"
NODE = "bench-acp-1"
INSTANCE = "benchacp"
REPO = "bench/acp"
TARGET_MS = 100.0
SCRIPTED_SECONDS = 0.2
PAUSE_SECONDS = 1.0


class TimedEngine:
    """An engine whose turns are timed: given the message, and saying the turn is over."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.name = engine.name
        self.stateless = engine.stateless
        self.turns: list[tuple[float, float | None]] = []

    async def start(self, *args: Any, **kwargs: Any) -> Any:
        return await self._engine.start(*args, **kwargs)

    async def end(self, conversation_id: str) -> None:
        await self._engine.end(conversation_id)

    async def run_turn(self, conversation: Any, prompt: str, emit: Any) -> Any:
        index = len(self.turns)
        self.turns.append((time.perf_counter(), None))
        engine = self

        class Timed:
            async def __call__(self, output: Any) -> None:
                if output.ends_turn and engine.turns[index][1] is None:
                    engine.turns[index] = (engine.turns[index][0], time.perf_counter())
                await emit(output)

            async def bound(self, engine_session_id: str) -> None:
                if hasattr(emit, "bound"):
                    await emit.bound(engine_session_id)

        return await self._engine.run_turn(conversation, prompt, Timed())


def _scripted() -> Any:
    from seedline_runner.engines.scripted import ScriptedEngine

    class Working(ScriptedEngine):
        async def run_turn(self, conversation, prompt, emit):
            await asyncio.sleep(SCRIPTED_SECONDS)
            return await super().run_turn(conversation, prompt, emit)

    return Working()


async def _rounds(rounds: int, engine_kind: str) -> list[dict]:
    import nats
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
    from acp.schema import ClientCapabilities

    from seedline_runner.checkouts import Checkouts
    from seedline_runner.runner import Runner

    standin = None
    with tempfile.TemporaryDirectory(prefix="seedline-bench-acp-") as folder:
        tmp = Path(folder)
        (tmp / "repos" / REPO).mkdir(parents=True)
        async with AsyncExitStack() as stack:
            if engine_kind == "claude":
                from seedline_runner.engines.claude import ClaudeEngine

                standin = _engine_tests("anthropic_standin").AnthropicStandIn().start()
                stack.callback(standin.stop)
                env = _engine_tests("cli_env").claude_env(
                    tmp / "claude-home", tmp / "claude-config", standin.base_url)
                inner = ClaudeEngine(executable=str(claude_executable()), env=env,
                                     claude_home=tmp / "claude-config")
            else:
                inner = _scripted()
            engine = TimedEngine(inner)
            system = await start_system(tmp, stack, nodes=())
            nc = await nats.connect(system["nats"].url, name="bench-acp-runner")
            stack.push_async_callback(nc.close)
            runner = Runner(nc, NODE, "Bench box", {engine_kind: engine}, presence_interval=1.0,
                            checkouts=Checkouts(repos_dir=tmp / "repos"))
            await runner.start()
            stack.push_async_callback(runner.stop)

            class Editor:
                async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
                    return None

                async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
                    raise RuntimeError("not asked")

            env = dict(os.environ, SEEDLINE_NATS_URL=system["nats"].url,
                       SEEDLINE_HOME=str(tmp / "home"))
            command = [sys.executable, "-m", "seedline_cli", "acp", "--instance", INSTANCE,
                       "--repo", REPO, "--node", NODE, "--engine", engine_kind]
            conn, _ = await stack.enter_async_context(
                spawn_agent_process(Editor(), *command, env=env, cwd=str(tmp)))
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities())
            session = (await conn.new_session(cwd=str(tmp), mcp_servers=[])).session_id
            measured = []
            for n in range(rounds + 1):
                # The next message a second later, as a person's: a command-line engine is
                # still ending its run (writing its transcript, exiting) just after it said
                # the turn was over, and the runner gives it the next message only then.
                await asyncio.sleep(PAUSE_SECONDS)
                sent = time.perf_counter()
                answer = await conn.prompt(session_id=session,
                                           prompt=[text_block(f"round {n}: next move")])
                answered = time.perf_counter()
                given, ended = engine.turns[-1]
                if answer.stop_reason != "end_turn" or ended is None:
                    raise RuntimeError(f"round {n} was not answered by the engine: {answer}")
                if n == 0:
                    continue  # the first turn starts the conversation's engine: not counted
                measured.append({"editor_ms": (answered - sent) * 1000,
                                 "engine_ms": (ended - given) * 1000,
                                 "to_engine_ms": (given - sent) * 1000,
                                 "back_ms": (answered - ended) * 1000})
            for m in measured:
                m["added_ms"] = m["editor_ms"] - m["engine_ms"]
            return measured


def assemble(runs: dict[str, list[dict]]) -> dict:
    result: dict = {"name": NAME, "target_ms": TARGET_MS,
                    "conditions": {"cpus": os.cpu_count(), "rounds": {
                        kind: len(m) for kind, m in runs.items()}}, "engines": {}}
    for kind, measured in runs.items():
        added = statistics.median(m["added_ms"] for m in measured)
        result["engines"][kind] = {
            key: summarise([m[key] for m in measured])
            for key in ("editor_ms", "engine_ms", "added_ms", "to_engine_ms", "back_ms")
        } | {"met": added < TARGET_MS, "ratio": added / TARGET_MS, "rounds": measured}
    return result


def markdown(result: dict) -> str:
    lines = ["## What `seedline acp` adds to an editor's turn", "",
             f"Official ACP client SDK as the editor, {result['conditions']['cpus']} CPUs; "
             f"target: under {result['target_ms']:.0f} ms added at the median.", "",
             "| engine | editor's time p50 | engine's own p50 | added p50 | added min / max "
             "| message -> engine p50 | end -> editor p50 | met |",
             "|---|---|---|---|---|---|---|---|"]
    for kind, r in result["engines"].items():
        lines.append(
            f"| {kind} | {r['editor_ms']['p50']:.1f} ms | {r['engine_ms']['p50']:.1f} ms | "
            f"{r['added_ms']['p50']:.1f} ms | {r['added_ms']['min']:.1f} / "
            f"{r['added_ms']['max']:.1f} ms | {r['to_engine_ms']['p50']:.1f} ms | "
            f"{r['back_ms']['p50']:.1f} ms | {report.yes_no(r['met'])} |")
    return "\n".join([*lines, ""])


def run_acp_latency(rounds: int = 20) -> dict:
    runs = {"scripted": asyncio.run(_rounds(rounds, "scripted"))}
    try:
        claude_executable()
    except Unavailable:
        pass
    else:
        runs["claude"] = asyncio.run(_rounds(max(3, rounds // 4), "claude"))
    result = assemble(runs)
    report.write(NAME, result, markdown(result))
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    print(markdown(run_acp_latency(args.rounds)))


if __name__ == "__main__":
    main()
