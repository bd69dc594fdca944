"""conversations, runners, relocate and stop: the real commands against the whole system.

The four services and the runner machines run in an event loop of their own on a
background thread (as in tests/conftest.py, but out of the CLI's way, since every
command runs its own asyncio.run).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from contextlib import AsyncExitStack

import nats
import pytest
import structlog
from nats.js.api import AckPolicy, ConsumerConfig

from seedline_contracts import subjects
from seedline_contracts.subjects import SESSIONS_STREAM
from seedline_continuity_resolver.app import create_app as create_resolver
from seedline_core.notices import wording_violations
from seedline_devtools.embedded import free_port
from seedline_platform.logging import configure_logging
from seedline_platform.settings import Settings
from seedline_devtools.testing import running
from seedline_runner.engines.scripted import ScriptedEngine
from seedline_runner.runner import Runner
from seedline_runner_gateway.app import create_app as create_gateway
from seedline_seed_composer.app import create_app as create_composer
from seedline_timeline_writer.app import create_app as create_writer

pytestmark = pytest.mark.servers

INSTANCE = "bd43f4de"
REPO = "apps/chess-academy"


class WholeSystem:
    """Four services (and runners added on demand) in a loop on a background thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.runners: dict[str, Runner] = {}
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def __enter__(self) -> "WholeSystem":
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)
        self._thread.start()
        if not self._ready.wait(90):
            raise RuntimeError("the services did not start within 90 s")
        if self._error:
            raise self._error
        return self

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                for create in (create_writer, create_resolver, create_composer, create_gateway):
                    await stack.enter_async_context(running(create(self.settings)))
                self._stack = stack
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)

    def _in_loop(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def settle(self, timeout: float = 15.0) -> None:
        """Wait until the resolver has applied every conversation event recorded so far."""

        async def caught_up() -> None:
            nc = await nats.connect(self.settings.nats_url)
            try:
                js = nc.jetstream()
                deadline = asyncio.get_running_loop().time() + timeout
                while True:
                    info = await js.consumer_info(
                        subjects.SESSIONS_STREAM, "continuity-resolver-sessions"
                    )
                    if info.num_pending == 0 and info.num_ack_pending == 0:
                        return
                    if asyncio.get_running_loop().time() > deadline:
                        raise AssertionError("the resolver did not catch up in time")
                    await asyncio.sleep(0.05)
            finally:
                await nc.close()

        self._in_loop(caught_up())

    def start_runner(self, node_id: str, label: str, **engines: ScriptedEngine) -> Runner:
        engines = engines or {"scripted": ScriptedEngine()}

        async def start() -> Runner:
            nc = await nats.connect(self.settings.nats_url)
            runner = Runner(nc, node_id, label, engines, presence_interval=1.0)
            await runner.start()

            async def close() -> None:
                await runner.stop()
                await nc.close()

            self._stack.push_async_callback(close)
            return runner

        self.runners[node_id] = self._in_loop(start())
        return self.runners[node_id]


@pytest.fixture
def env(settings: Settings):
    configure_logging("warning", "cli-tests")
    try:
        with WholeSystem(settings) as system:
            yield {
                "SEEDLINE_NATS_URL": settings.nats_url,
                "SEEDLINE_NATS_MONITOR_URL": settings.nats_monitor_url,
                "SEEDLINE_DATABASE_URL": settings.database_url,
                "SEEDLINE_HOME": str(settings.home),
                "SEEDLINE_OPEN_TIMEOUT_SECONDS": "10",
                "SEEDLINE_LAUNCH_TIMEOUT_SECONDS": "3",
                "COLUMNS": "200",
                "_system": system,
            }
    finally:
        structlog.reset_defaults()


def run(seedline, env: dict, *args: str):
    return seedline(*args, env={k: v for k, v in env.items() if not k.startswith("_")})


def system_of(env: dict) -> WholeSystem:
    return env["_system"]


def open_one(seedline, env, node: str = "mac-mini-1", repo: str = REPO) -> str:
    result = run(
        seedline,
        env,
        "open",
        "--instance",
        INSTANCE,
        "--repo",
        repo,
        "--engine",
        "scripted",
        "--node",
        node,
        "--json",
        "Add castling",
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["session_id"]


def live(seedline, env, *args: str) -> list[dict]:
    result = run(seedline, env, "conversations", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["conversations"]


def assert_plain_words(text: str) -> None:
    """The wording rules of CONTRACT.md 3.3, with ids and command names exempt."""
    text = re.sub(r"\bcsess_\w+", "", text)
    assert not wording_violations(text), text


# -- conversations ----------------------------------------------------------------------------


def test_conversations_lists_the_live_conversation_with_machine_engine_and_idle_time(seedline, env):
    system_of(env).start_runner("mac-mini-1", "Mac mini")
    conversation = open_one(seedline, env)

    rows = live(seedline, env)
    assert len(rows) == 1
    row = rows[0]
    assert row["session_id"] == conversation
    assert (row["instance_id"], row["repo"], row["node_id"], row["engine"]) == (
        INSTANCE,
        REPO,
        "mac-mini-1",
        "scripted",
    )
    assert row["machine_online"] is True
    assert 0 <= row["idle_seconds"] < 60

    table = run(seedline, env, "conversations")
    assert table.exit_code == 0, table.output
    for text in (conversation, INSTANCE, REPO, "mac-mini-1 (Mac mini)", "scripted", "idle"):
        assert text in table.stdout, text
    assert re.search(r"\b\d+ s\b", table.stdout)
    assert_plain_words(table.stdout)


def test_conversations_for_another_instance_says_there_are_none(seedline, env):
    system_of(env).start_runner("mac-mini-1", "Mac mini")
    open_one(seedline, env)

    assert [r["instance_id"] for r in live(seedline, env, "--instance", INSTANCE)] == [INSTANCE]
    assert live(seedline, env, "--instance", "someone-else") == []
    result = run(seedline, env, "conversations", "--instance", "someone-else")
    assert result.exit_code == 0
    assert "No live conversations on instance someone-else" in result.stdout
    assert "seedline open" in result.stdout
    assert_plain_words(result.stdout)


def test_conversations_with_an_empty_instance_is_a_usage_error(seedline, env):
    result = run(seedline, env, "conversations", "--instance", "")
    assert result.exit_code == 2
    assert "--instance must not be empty" in result.stderr


# -- runners -----------------------------------------------------------------------------


def test_runners_lists_presence_with_engines_and_heartbeat_age(seedline, env):
    raw = ScriptedEngine(name="raw")
    raw.stateless = True
    system_of(env).start_runner("mac-mini-1", "Mac mini")
    system_of(env).start_runner("gpu box", "The GPU box", scripted=ScriptedEngine(), raw=raw)

    result = run(seedline, env, "runners", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["node_id"]: r for r in json.loads(result.stdout)["runners"]}
    assert sorted(rows) == ["gpu box", "mac-mini-1"]
    assert rows["mac-mini-1"]["label"] == "Mac mini"
    assert rows["mac-mini-1"]["engines"] == ["scripted"]
    assert rows["mac-mini-1"]["stateless_engines"] == []
    assert rows["gpu box"]["engines"] == ["scripted", "raw"]
    assert rows["gpu box"]["stateless_engines"] == ["raw"]
    for row in rows.values():
        assert 0 <= row["heartbeat_age_seconds"] < 30
        assert row["heartbeat_at"].endswith("Z")

    table = run(seedline, env, "runners")
    assert table.exit_code == 0
    for text in ("2 runner machine(s) online", "Mac mini", "The GPU box", "gpu box", "raw", "ago"):
        assert text in table.stdout, text
    assert_plain_words(table.stdout)

    # A machine that stopped deleted its key: the listing skips the delete marker.
    system = system_of(env)
    system._in_loop(system.runners.pop("mac-mini-1").stop())
    after = json.loads(run(seedline, env, "runners", "--json").stdout)["runners"]
    assert [r["node_id"] for r in after] == ["gpu box"]


def test_runners_with_no_machine_online_says_how_to_start_one(seedline, env):
    result = run(seedline, env, "runners")
    assert result.exit_code == 0, result.output
    assert "No runner machine is online" in result.stdout
    assert "seedline runner --node-id" in result.stdout
    assert json.loads(run(seedline, env, "runners", "--json").stdout) == {"ok": True, "runners": []}


def test_runners_and_conversations_without_nats_exit_3_and_say_how_to_start(seedline, tmp_path):
    closed = {
        "SEEDLINE_NATS_URL": f"nats://127.0.0.1:{free_port()}",
        "SEEDLINE_HOME": str(tmp_path),
    }
    for command in (
        ["runners"],
        ["conversations"],
        ["stop", "csess_x"],
        ["relocate", "x", "--node", "n"],
    ):
        result = seedline(*command, env=closed)
        assert result.exit_code == 3, (command, result.output)
        assert "Cannot reach NATS" in result.stderr and "make run" in result.stderr


# -- relocate ----------------------------------------------------------------------------


def test_relocate_moves_the_conversation_and_keeps_its_id(seedline, env):
    system = system_of(env)
    old = system.start_runner("mac-mini-1", "Mac mini")
    new = system.start_runner("mac-studio", "Mac Studio")
    conversation = open_one(seedline, env)
    # Relocating before the resolver has applied `opened` loses the old machine
    # (reported to the resolver's owner); this test is about the command.
    system.settle()

    result = run(seedline, env, "relocate", conversation, "--node", "mac-studio", "--json")

    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert reply["ok"] is True and reply["session_id"] == conversation
    assert reply["node_id"] == "mac-studio"
    assert reply["continuity"]["reason_code"] == "other_machine"
    assert reply["resumed"] is False
    assert [r["node_id"] for r in live(seedline, env)] == ["mac-studio"]
    assert conversation in new.live_conversations
    assert conversation not in old.live_conversations


def test_relocate_prints_the_notice_and_the_decision(seedline, env):
    system = system_of(env)
    system.start_runner("mac-mini-1", "Mac mini")
    system.start_runner("mac-studio", "Mac Studio")
    conversation = open_one(seedline, env)

    result = run(seedline, env, "relocate", conversation, "--node", "mac-studio")

    assert result.exit_code == 0, result.output
    assert "machine" in result.stdout and "mac-studio" in result.stdout
    assert "decision" in result.stdout and "fresh" in result.stdout
    assert_plain_words(result.stdout)


def test_relocating_an_unknown_conversation_fails_with_the_servers_message(seedline, env):
    system_of(env).start_runner("mac-studio", "Mac Studio")

    result = run(seedline, env, "relocate", "csess_nope", "--node", "mac-studio")

    assert result.exit_code == 1
    assert "seedline conversations" in result.stderr
    assert_plain_words(result.stderr)
    as_json = run(seedline, env, "relocate", "csess_nope", "--node", "mac-studio", "--json")
    assert json.loads(as_json.stdout)["error"]["code"] == "not_found"


def test_relocating_to_an_offline_machine_names_it_and_points_to_runners(seedline, env):
    system_of(env).start_runner("mac-mini-1", "Mac mini")
    conversation = open_one(seedline, env)

    result = run(seedline, env, "relocate", conversation, "--node", "mac-studio")

    assert result.exit_code == 1, result.output
    assert "offline" in result.stderr and "seedline runners" in result.stderr
    assert [r["node_id"] for r in live(seedline, env)] == ["mac-mini-1"]
    assert_plain_words(result.stderr)


def test_relocating_an_older_conversation_is_a_refusal_not_a_usage_error(seedline, env):
    system = system_of(env)
    system.start_runner("mac-mini-1", "Mac mini")
    system.start_runner("mac-studio", "Mac Studio")
    older = open_one(seedline, env)
    system.settle()
    newer = json.loads(run(seedline, env, "open", "--instance", INSTANCE, "--repo", REPO,
                           "--engine", "scripted", "--node", "mac-mini-1", "--fresh",
                           "--json").stdout)["session_id"]
    assert newer != older
    system.settle()

    result = run(seedline, env, "relocate", older, "--node", "mac-studio")

    # A valid command the service refused: exit 1, the README's usage-error code is 2.
    assert result.exit_code == 1, result.output
    assert newer in result.stderr


def test_opening_on_a_machine_never_seen_points_at_runners(seedline, env):
    result = run(seedline, env, "open", "--instance", INSTANCE, "--repo", REPO, "--engine",
                 "scripted", "--node", "ghost-node", "Hello")

    assert result.exit_code == 1, result.output
    assert "ghost-node" in result.stderr and "seedline runners" in result.stderr
    assert_plain_words(result.stderr)


def test_brief_show_says_why_no_brief_was_offered_apart_from_an_unknown_id(seedline, env):
    system_of(env).start_runner("mac-mini-1", "Mac mini")
    first = run(seedline, env, "open", "--instance", INSTANCE, "--repo", REPO, "--engine",
                "scripted", "--node", "mac-mini-1", "Add castling")
    fresh = json.loads(run(seedline, env, "open", "--instance", INSTANCE, "--repo", REPO,
                           "--engine", "scripted", "--node", "mac-mini-1", "--fresh",
                           "--json").stdout)
    clean = json.loads(run(seedline, env, "open", "--instance", INSTANCE, "--repo", REPO,
                           "--engine", "scripted", "--node", "mac-mini-1", "--clean-slate",
                           "--json").stdout)
    first_id = re.search(r"csess_[0-9a-f]+", first.stdout).group(0)

    said = {name: run(seedline, env, "brief", "show", conversation)
            for name, conversation in (("first", first_id), ("fresh", fresh["session_id"]),
                                       ("clean", clean["session_id"]), ("nope", "csess_nope"))}

    # The first open of a repo with no entries: the reply and `brief show` say why.
    assert first.exit_code == 0, first.output
    assert "No brief was offered: the repo had no entries in its timeline yet" in (
        " ".join(first.stdout.split()))
    assert fresh["no_brief"] == "force_fresh" and clean["no_brief"] == "clean_slate"
    expected = {
        "first": f"No brief was offered to {first_id}, because the repo had no entries in "
                 "its timeline yet",
        "fresh": f"No brief was offered to {fresh['session_id']}, because a fresh start was "
                 "asked for",
        "clean": f"No brief was offered to {clean['session_id']}, because the open asked for "
                 "a clean slate",
        "nope": "No conversation csess_nope was opened here; check the id",
    }
    for name, result in said.items():
        assert result.exit_code == 1, result.output
        assert expected[name] in " ".join(result.stderr.split()), (name, result.stderr)
        assert_plain_words(result.stderr)
    for name in ("first", "fresh", "clean"):
        assert "check the id" not in said[name].stderr


def test_relocate_without_node_is_a_usage_error(seedline, env):
    result = run(seedline, env, "relocate", "csess_x")
    assert result.exit_code == 2
    assert "--node" in result.output


# -- stop --------------------------------------------------------------------------------


def test_stop_ends_the_conversation_on_its_machine(seedline, env):
    runner = system_of(env).start_runner("mac-mini-1", "Mac mini")
    conversation = open_one(seedline, env)
    assert conversation in runner.live_conversations

    result = run(seedline, env, "stop", conversation, "--reason", "done for today")

    assert result.exit_code == 0, result.output
    assert f"Stopped conversation {conversation} (done for today)." in result.stdout
    assert live(seedline, env) == []
    assert conversation not in runner.live_conversations
    assert_plain_words(result.stdout)


def test_stopping_an_unknown_conversation_fails_with_the_servers_message(seedline, env):
    result = run(seedline, env, "stop", "csess_nope")
    assert result.exit_code == 1, result.output
    assert "seedline conversations" in result.stderr
    assert_plain_words(result.stderr)
    as_json = run(seedline, env, "stop", "csess_nope", "--json")
    assert json.loads(as_json.stdout)["error"]["code"] == "not_found"


def test_stopping_a_stopped_conversation_never_claims_to_have_stopped_it(seedline, env):
    system_of(env).start_runner("mac-mini-1", "Mac mini")
    conversation = open_one(seedline, env)
    first = json.loads(run(seedline, env, "stop", conversation, "--json").stdout)
    assert first["stopped"] is True

    again = run(seedline, env, "stop", conversation)
    assert "Stopped conversation" not in again.stdout
    if again.exit_code == 0:  # a gateway that replies `stopped: false` (CONTRACT 4.1)
        assert "was not running, so there was nothing to stop" in again.stdout
        as_json = json.loads(run(seedline, env, "stop", conversation, "--json").stdout)
        assert as_json["stopped"] is False
    else:  # a gateway that answers only for live conversations
        assert again.exit_code == 1 and "seedline conversations" in again.stderr
    assert_plain_words(again.output)


def test_stop_with_an_empty_reason_is_a_usage_error(seedline):
    result = seedline("stop", "csess_x", "--reason", " ")
    assert result.exit_code == 2
    assert "--reason must not be empty" in result.stderr


# -- timeline with continuity --------------------------------------------------------------


def test_timeline_shows_the_continuity_decision_at_each_opened_conversation(seedline, env):
    system_of(env).start_runner("mac-mini-1", "Mac mini")
    conversation = open_one(seedline, env)
    reading = run(seedline, env, "timeline", "--instance", INSTANCE, "--repo", REPO,
                  "--min-seq", "1")
    assert reading.exit_code == 0, reading.output
    assert f"conversation {conversation}" in reading.stdout
    assert "opened fresh: there is no earlier conversation on this repo" in reading.stdout
    as_json = json.loads(run(seedline, env, "timeline", "--instance", INSTANCE, "--repo", REPO,
                             "--json").stdout)
    assert as_json["continuity"][conversation]["reason_code"] == "no_previous"


def test_timeline_draws_each_open_with_the_decision_made_then(seedline, env):
    """A relocation used to repaint the conversation's first line with its own decision."""
    system = system_of(env)
    system.start_runner("mac-mini-1", "Mac mini")
    system.start_runner("mac-studio", "Mac Studio")
    conversation = open_one(seedline, env)
    read_until(seedline, env, lambda r: len(r["entries"]) >= 2)  # instruction and reply
    system.settle()
    relocated = run(seedline, env, "relocate", conversation, "--node", "mac-studio", "--json")
    assert relocated.exit_code == 0, relocated.output
    assert run(seedline, env, "stop", conversation).exit_code == 0
    message = run(seedline, env, "publish", "--instance", INSTANCE, "--repo", REPO,
                  "--conversation", conversation, "--kind", "chat_user", "--content",
                  "Next: a license", "--json")
    wake_seq = json.loads(message.stdout)["seq"]
    reading = read_until(seedline, env, lambda r: len(r["opens"]) >= 3
                         and all(o["outcome"] for o in r["opens"]))

    opens = reading["opens"]
    assert [(o["kind"], o["session_id"] == conversation) for o in opens] == [
        ("open", True), ("relocation", True), ("wake", False)]
    assert [o["continuity"]["reason_code"] for o in opens][:2] == ["no_previous", "other_machine"]
    assert opens[2]["after_seq"] == wake_seq
    assert all(o["outcome"] for o in opens), opens  # each as the machine answered it
    assert reading["continuity"][conversation]["reason_code"] == "no_previous"

    text = run(seedline, env, "timeline", "--instance", INSTANCE, "--repo", REPO).stdout
    rule = text.index(f"conversation {conversation}")
    first_line = text[rule:].splitlines()[1]
    assert first_line.startswith("opened fresh: there is no earlier conversation on this repo")
    assert f"outcome {opens[0]['outcome']}" in first_line
    reply = text.index("scripted reply to: Add castling")
    moved = text.index("relocated to mac-studio, fresh: the conversation moved from mac-mini-1")
    woken = text.index(f"woken by #{wake_seq}")
    assert rule < reply < moved < text.index("Next: a license") < woken
    assert_plain_words(text)


def read_until(seedline, env, done, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        result = run(seedline, env, "timeline", "--instance", INSTANCE, "--repo", REPO, "--json")
        assert result.exit_code == 0, result.output
        reading = json.loads(result.stdout)
        if done(reading) or time.monotonic() > deadline:
            return reading
        time.sleep(0.2)


# -- whole ids at 80 columns --------------------------------------------------------------


def test_ids_appear_whole_at_80_columns(seedline, env):
    machine = "the-long-named-build-machine-in-the-basement-rack-number-42"
    system_of(env).start_runner(machine, "Basement build machine")
    conversation = open_one(seedline, env, node=machine, repo="apps/a-repo-with-a-long-name/x")
    narrow = {**env, "COLUMNS": "80"}

    table = run(seedline, narrow, "conversations")
    assert table.exit_code == 0, table.output
    assert re.search(rf"\b{conversation}\b", table.stdout), table.stdout
    machines = run(seedline, narrow, "runners")
    assert machine in machines.stdout, machines.stdout
    # Words wrap whole: "conversation(s)" once came out as "conversatio" / "n(s)".
    assert "conversation(s)" in machines.stdout, machines.stdout
    status = run(seedline, narrow, "status")
    assert conversation in status.stdout and machine in status.stdout, status.stdout


# -- status ----------------------------------------------------------------------------------


def test_status_reports_everything_up_with_lag_and_what_each_machine_hosts(seedline, env):
    system_of(env).start_runner("mac-mini-1", "Mac mini")
    conversation = open_one(seedline, env)

    result = run(seedline, env, "status", "--json")
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    assert status["ok"] is True and status["problems"] == []
    assert status["durability"]["sync_interval"] == "always"
    assert status["postgres"] == {"checked": True, "up": True, "url": status["postgres"]["url"]}
    assert all(s["exists"] for s in status["streams"])
    services = {s["name"]: s for s in status["services"]}
    for name in ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway"):
        assert services[name]["up"] and services[name]["instances"] == 1, services[name]
        assert services[name]["checked_by"] == "service discovery"
        # Where its side port is, as its discovery info announces it (CONTRACT 1.2).
        assert services[name]["side_ports"][0].startswith("http://127.0.0.1:"), services[name]
    consumers = {c["consumer"]: c for c in status["consumers"]}
    assert "continuity-resolver-sessions" in consumers
    for row in consumers.values():
        assert row["lag"] == row["num_pending"] + row["num_ack_pending"] >= 0
    machine = next(m for m in status["machines"] if m["node_id"] == "mac-mini-1")
    assert machine["label"] == "Mac mini" and conversation in machine["live"]

    table = run(seedline, env, "status")
    assert table.exit_code == 0
    assert "Everything is up." in table.stdout and "sync_interval always" in table.stdout
    assert "metrics and health at http://127.0.0.1:" in table.stdout
    # Consumer names are the system's own ids, quoted as they are.
    assert_plain_words(re.sub("|".join(map(re.escape, consumers)), "", table.stdout))


def test_status_exits_1_and_names_what_is_down(seedline, nats_server, tmp_path):
    env = {"SEEDLINE_NATS_URL": nats_server.url, "SEEDLINE_NATS_MONITOR_URL":
           nats_server.monitor_url, "SEEDLINE_HOME": str(tmp_path),
           "SEEDLINE_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{free_port()}/seedline"}
    result = seedline("status", "--json", env=env)
    assert result.exit_code == 1, result.output
    status = json.loads(result.stdout)
    assert status["ok"] is False
    for name in ("timeline-writer", "continuity-resolver", "seed-composer", "runner-gateway"):
        assert any(p.startswith(f"{name} is not running: ") for p in status["problems"])
    assert "stream SEEDLINE_TIMELINE does not exist" in status["problems"]
    assert status["postgres"]["checked"] and status["postgres"]["up"] is False
    assert all("no service answers $SRV.PING" in s["checked_by"] for s in status["services"])

    table = seedline("status", env={**env, "COLUMNS": "120"})
    assert table.exit_code == 1
    assert "problem(s):" in table.stdout and "runner-gateway is not running" in table.stdout
    assert_plain_words(table.stdout)


def test_status_says_durability_is_unknown_and_fails_when_it_cannot_check_it(
        seedline, env):
    # The system is up, but this shell was not told where the monitoring endpoint is.
    blind = {**env, "SEEDLINE_NATS_MONITOR_URL": f"http://127.0.0.1:{free_port()}"}
    result = run(seedline, blind, "status", "--json")
    assert result.exit_code == 1, result.output
    status = json.loads(result.stdout)
    assert status["durability"]["known"] is False
    assert any(p.startswith("durability is unknown") for p in status["problems"])
    table = run(seedline, {**blind, "COLUMNS": "120"}, "status")
    assert table.exit_code == 1
    assert "Everything is up." not in table.stdout
    assert "durability is unknown" in table.stdout and "SEEDLINE_NATS_MONITOR_URL" in table.stdout
    # The web process is listed, running or not; never started here, it is not down.
    assert re.search(r"seedline-web\s+not running\s+never started", table.stdout), table.stdout
    assert "seedline-web is not running" not in table.stdout


def test_status_exits_1_with_the_web_down_and_says_what_is_unavailable(seedline, env):
    """The web process has run on this system (its durable consumer outlives it) and does
    not answer now: the four services are up, and a script checking the exit code is told."""
    from seedline_web.opens import PROJECTION

    async def web_was_here() -> None:
        nc = await nats.connect(env["SEEDLINE_NATS_URL"])
        try:
            await nc.jetstream().add_consumer(
                SESSIONS_STREAM, ConsumerConfig(durable_name=PROJECTION,
                                                ack_policy=AckPolicy.EXPLICIT))
        finally:
            await nc.close()

    system_of(env)._in_loop(web_was_here())
    result = run(seedline, env, "status", "--json")
    assert result.exit_code == 1, result.output
    status = json.loads(result.stdout)
    assert status["ok"] is False
    assert status["problems"] == ["seedline-web is not running: the HTTP API, the console and "
                                  "MCP over HTTP are unavailable"]
    assert status["unavailable"] == [{"process": "seedline-web", "how": "is not running",
                                      "surfaces": "the HTTP API, the console and MCP over HTTP"}]
    table = run(seedline, {**env, "COLUMNS": "200"}, "status")
    assert table.exit_code == 1
    assert "Everything is up." not in table.stdout
    assert re.search(r"seedline-web\s+down\s+not running: the HTTP API", table.stdout), table.stdout


# -- notices from the platform --------------------------------------------------------------


def test_notices_follow_prints_the_platforms_own_notice_when_a_machine_leaves(seedline, env):
    system = system_of(env)
    runner = system.start_runner("mac-mini-1", "Mac mini")
    conversation = open_one(seedline, env)
    follow = subprocess.Popen(
        [sys.executable, "-m", "seedline_cli", "notices", "--instance", INSTANCE, "--follow",
         "--count", "1", "--json"],
        env={**os.environ, **{k: v for k, v in env.items() if not k.startswith("_")}},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert "Following the notices" in follow.stderr.readline()
        system._in_loop(runner.stop())  # the machine withdraws its presence
        out, err = follow.communicate(timeout=90)
    finally:
        follow.kill()
    assert follow.returncode == 0, err
    notice = json.loads(out)
    assert notice["kind"] in ("runner_offline", "runner_restarted"), notice
    assert notice["session_id"] == conversation and notice["node_id"] == "mac-mini-1"
    assert "Mac mini" in notice["text"] and not wording_violations(notice["text"])


# -- open --request-id (CONTRACT.md 4, 1.2) ----------------------------------------------------


def test_open_always_sends_a_request_id_and_asking_again_with_it_opens_nothing_new(
    seedline, env
):
    system_of(env).start_runner("mac-mini-1", "Mac mini")
    first = run(seedline, env, "open", "--instance", INSTANCE, "--repo", REPO, "--engine",
                "scripted", "--node", "mac-mini-1", "--json")
    assert first.exit_code == 0, first.output
    opened = json.loads(first.stdout)
    events = system_of(env)._in_loop(_session_events(env, "open_requested"))
    (request_id,) = [e["request_id"] for e in events]
    assert request_id.startswith("cli-")

    again = run(seedline, env, "open", "--instance", INSTANCE, "--request-id", request_id,
                "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == opened
    assert len(system_of(env)._in_loop(_session_events(env, "open_requested"))) == 1

    unknown = run(seedline, env, "open", "--instance", INSTANCE, "--request-id", "never-sent")
    assert unknown.exit_code != 0 and "request_id" in unknown.output
    alone = run(seedline, env, "open", "--instance", INSTANCE)
    assert alone.exit_code != 0 and "--request-id" in alone.output


def test_an_open_that_times_out_names_its_request_id_and_the_command_that_asks_again():
    from seedline_cli.conversations import still_going

    text = still_going(INSTANCE, "cli-0123")
    assert "cli-0123" in text and "seedline open --instance bd43f4de --request-id cli-0123" in text
    assert "goes on" in text and not wording_violations(text)


async def _session_events(env, event_type: str) -> list[dict]:
    nc = await nats.connect(env["SEEDLINE_NATS_URL"])
    try:
        js = nc.jetstream()
        last = (await js.stream_info(subjects.SESSIONS_STREAM)).state.last_seq
        found = []
        for seq in range(1, last + 1):
            body = json.loads((await js.get_msg(subjects.SESSIONS_STREAM, seq)).data)
            if body["type"] == event_type:
                found.append(body)
        return found
    finally:
        await nc.close()
