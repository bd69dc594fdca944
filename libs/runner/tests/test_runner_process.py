"""The runner process against a real nats-server."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from importlib import metadata
from typing import Any

import pytest
from nats.js.api import StorageType
from nats.js.errors import KeyNotFoundError
from seedline_contracts import subjects
from seedline_contracts.codec import decode
from seedline_contracts.runner import RunnerPresence
from seedline_contracts.subjects import RUNNERS_BUCKET, presence_key, runner_subject

from seedline_runner.containment import ProcessGroupContainment
from seedline_runner import Checkouts, ConversationStore, Runner, run_runner
from seedline_runner.engines import (
    EngineError,
    EngineOutput,
    OpenAIChatEngine,
    ScriptedEngine,
    StartResult,
    TurnResult,
)
from seedline_runner.engines.base import announce_bound
from seedline_runner.framing import background, frame_first_prompt

pytestmark = pytest.mark.servers

NODE = "mac-mini-1"
OBSERVED_INGEST = "OBSERVED_INGEST"
BRIEF = "The previous conversation has ended and is not available. We were adding castling."
BRIEF_SHA = hashlib.sha256(BRIEF.encode()).hexdigest()
SEED = {"text": BRIEF, "sha256": BRIEF_SHA}
PROHIBITED_WORDS = re.compile(r"remember|restored|as if it never|\bsessions?\b", re.IGNORECASE)


EARLIER_REPLY = {"seq": 30, "kind": "chat_assistant", "excerpt": "earlier reply"}


def launch_body(
    session_id: str = "csess_1",
    *,
    engine: str = "scripted",
    resume: str | None = None,
    expect: dict[str, Any] | None = None,
    seed: dict[str, str] | None = None,
    instruction: str | None = None,
) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "instance_id": "bd43f4de",
        "repo": "apps/chess-academy",
        "engine": engine,
        "resume": {"engine_session_id": resume, "expect": expect} if resume else None,
        "seed": seed,
        "instruction": instruction,
    }


@pytest.fixture
async def js(nc):
    context = nc.jetstream()
    await context.add_stream(name=OBSERVED_INGEST, subjects=["seedline.ingest.>"])
    return context


@pytest.fixture
async def start_runner(nc, js):
    runners: list[Runner] = []

    async def start(engines, node_id: str = NODE, **options) -> Runner:
        runner = Runner(nc, node_id, "Your Mac mini", engines, **options)
        await runner.start()
        runners.append(runner)
        return runner

    yield start
    for runner in runners:
        await runner.stop()


@pytest.fixture
async def events(nc):
    received: list[dict[str, Any]] = []

    async def collect(msg):
        received.append(json.loads(msg.data))

    subscription = await nc.subscribe("seedline.runner.*.events", cb=collect)
    await nc.flush()
    yield received
    await subscription.unsubscribe()


async def ask(nc, verb: str, body: Any, node_id: str = NODE) -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply = await nc.request(runner_subject(node_id, verb), data, timeout=5)
    return json.loads(reply.data)


WAIT_SECONDS = 10.0


async def eventually(check) -> None:
    """Wait until ``check`` holds; the test's own assertion then says what went wrong."""
    deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
    while asyncio.get_running_loop().time() < deadline:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(0.02)


async def published(js, at_least: int) -> list[dict[str, Any]]:
    """The entries on the ingest subjects, oldest first, each with its Nats-Msg-Id."""

    async def count() -> int:
        return (await js.stream_info(OBSERVED_INGEST)).state.messages

    async def enough() -> bool:
        return await count() >= at_least

    await eventually(enough)
    entries = []
    for seq in range(1, await count() + 1):
        message = await js.get_msg(OBSERVED_INGEST, seq)
        body = json.loads(message.data)
        # Its own machine's subject, naming the entry's instance (partitionable).
        assert message.subject == subjects.ingest_runner_subject(NODE, body["instance_id"])
        msg_id = (message.headers or {}).get("Nats-Msg-Id")
        entries.append({**body, "msg_id": msg_id})
    return entries


def assert_person_facing(text: str) -> None:
    assert text and not PROHIBITED_WORDS.search(text.replace("session_id", "")), text


# Presence --------------------------------------------------------------------


async def test_presence_is_put_under_the_node_key_with_its_engines(js, start_runner, chat_standin):
    engines = {
        "scripted": ScriptedEngine(),
        "openai": OpenAIChatEngine(base_url=chat_standin.base_url, model="m"),
    }
    runner = await start_runner(engines, containment=ProcessGroupContainment("presence-test"))

    kv = await js.key_value(RUNNERS_BUCKET)
    entry = await kv.get(presence_key(NODE))
    status = await kv.status()

    assert decode(entry.value, RunnerPresence) == RunnerPresence(
        node_id=NODE,
        label="Your Mac mini",
        engines=["scripted", "openai"],
        protocol=3,
        seed_capable=True,
        stateless_engines=["openai"],
        live=[],
        instances=[],
        containment="process-group",
        version=metadata.version("seedline-runner"),
    )
    assert runner.containment.name == "process-group"
    config = status.stream_info.config
    settings = (config.max_age, config.max_msgs_per_subject, config.storage)
    assert settings == (30, 1, StorageType.FILE)


async def test_presence_is_put_again_on_every_beat(js, start_runner):
    await start_runner({"scripted": ScriptedEngine()}, presence_interval=0.1)
    kv = await js.key_value(RUNNERS_BUCKET)
    await kv.delete(presence_key(NODE))

    async def present() -> bool:
        try:
            return (await kv.get(presence_key(NODE))).value is not None
        except KeyNotFoundError:
            return False

    await eventually(present)
    assert await present()


async def test_a_clean_stop_deletes_the_presence_key(js, start_runner):
    runner = await start_runner({"scripted": ScriptedEngine()})
    kv = await js.key_value(RUNNERS_BUCKET)

    await runner.stop()

    with pytest.raises(KeyNotFoundError):
        await kv.get(presence_key(NODE))


async def test_a_machine_hosting_nothing_puts_its_presence_half_as_often(nc, js, start_runner):
    """An idle machine's puts are most of an idle system's work: it puts every second
    interval (never past the contract's 10 s); hosting a conversation, every interval."""
    runner = await start_runner({"scripted": ScriptedEngine()}, presence_interval=0.25)
    assert runner._presence.interval == 0.5
    await asyncio.sleep(0.6)  # the first two puts after start keep the full pace
    seen, follower = await presence_puts(js)
    await asyncio.sleep(1.6)
    idle_puts = len(seen)
    await ask(nc, "launch", launch_body("csess_1"))
    assert runner._presence.interval == 0.25
    hosting_from = len(seen)
    await asyncio.sleep(1.6)
    hosting_puts = len(seen) - hosting_from
    await ask(nc, "stop", {"session_id": "csess_1", "reason": "idle"})
    follower.cancel()

    assert runner._presence.interval == 0.5
    assert 1 <= idle_puts <= 4  # every 0.5 s: three in 1.6 s (six at every 0.25 s)
    assert hosting_puts > idle_puts
    assert Runner(nc, "other", "Other", {"scripted": ScriptedEngine()},
                  presence_interval=8)._presence.interval == 10  # the contract's longest


def test_presence_more_often_than_every_ten_seconds_is_required(nc):
    with pytest.raises(ValueError):
        Runner(nc, NODE, "Your Mac mini", {"scripted": ScriptedEngine()}, presence_interval=11)


# Launch ----------------------------------------------------------------------


async def test_a_seed_on_a_cold_engine_is_spent_and_its_reply_published(
    nc, js, start_runner, events
):
    engine = ScriptedEngine(resumable=False)
    await start_runner({"scripted": engine})

    reply = await ask(nc, "launch", launch_body(seed=SEED, instruction="What were we doing?"))
    entries = await published(js, 1)

    assert reply["accepted"] is True
    assert (reply["resumed_conversation"], reply["seeded"]) == (False, True)
    assert reply["engine_session_id"]
    [entry] = entries
    assert f"seed sha256 {BRIEF_SHA}" in entry["content"]
    assert entry["content"].startswith("scripted reply to: What were we doing?")
    assert (entry["kind"], entry["engine"]) == ("chat_assistant", "scripted")
    assert entry["session_id"] == "csess_1"
    assert (entry["instance_id"], entry["repo"]) == ("bd43f4de", "apps/chess-academy")
    # Its reply ends the turn: published as the step's end mark.
    assert entry["entry_id"] == entry["msg_id"] == "csess_1:launch:end"
    assert engine.prompts == [("csess_1", frame_first_prompt(BRIEF, "What were we doing?"))]
    await eventually(lambda: events)
    assert {key: value for key, value in events[0].items() if value is not None} == {
        "type": "engine_bound",
        "session_id": "csess_1",
        "engine_session_id": reply["engine_session_id"],
        "at": events[0]["at"],
    }


async def test_a_really_resumed_engine_drops_the_seed_unread(nc, js, start_runner):
    engine = ScriptedEngine(resumable=True)
    await start_runner({"scripted": engine})
    first = await ask(nc, "launch", launch_body("csess_1", instruction="start castling"))
    await published(js, 1)
    await ask(nc, "stop", {"session_id": "csess_1", "reason": "superseded"})

    reply = await ask(
        nc,
        "launch",
        launch_body(
            "csess_2", resume=first["engine_session_id"], seed=SEED, instruction="carry on"
        ),
    )
    entries = await published(js, 2)

    assert reply["accepted"] is True
    assert (reply["resumed_conversation"], reply["seeded"]) == (True, False)
    assert reply["engine_session_id"] == first["engine_session_id"]
    assert engine.prompts[-1] == ("csess_2", "carry on")
    assert entries[1]["content"].startswith("scripted reply to: carry on")
    assert entries[1]["content"].endswith("no seed)")
    assert "(context: 8 characters" not in entries[1]["content"]


async def test_a_resume_key_on_an_engine_that_never_resumes_spends_the_seed(nc, js, start_runner):
    engine = ScriptedEngine(resumable=False)
    await start_runner({"scripted": engine})
    first = await ask(nc, "launch", launch_body("csess_1"))

    resume_key = first["engine_session_id"]
    reply = await ask(nc, "launch", launch_body("csess_2", resume=resume_key, seed=SEED))

    assert (reply["resumed_conversation"], reply["seeded"]) == (False, True)
    assert reply["engine_session_id"] != first["engine_session_id"]


async def test_without_a_seed_nothing_is_seeded(nc, start_runner):
    await start_runner({"scripted": ScriptedEngine()})

    reply = await ask(nc, "launch", launch_body())

    assert reply["accepted"] is True
    assert (reply["resumed_conversation"], reply["seeded"]) == (False, False)


async def test_a_seed_waits_for_the_first_message_when_there_is_no_instruction(
    nc, js, start_runner
):
    engine = ScriptedEngine()
    await start_runner({"scripted": engine})

    reply = await ask(nc, "launch", launch_body(seed=SEED))
    await ask(nc, "turn", {"session_id": "csess_1", "seq": 40, "content": "hello"})
    entries = await published(js, 1)

    assert reply["seeded"] is True
    assert engine.prompts == [("csess_1", frame_first_prompt(BRIEF, "hello"))]
    assert entries[0]["entry_id"] == "csess_1:turn-40:end"


async def test_a_repeated_launch_gets_the_first_reply_and_instructs_once(nc, js, start_runner):
    engine = ScriptedEngine()
    await start_runner({"scripted": engine})

    first = await ask(nc, "launch", launch_body(seed=SEED, instruction="only once"))
    again = await ask(nc, "launch", launch_body(seed=SEED, instruction="only once"))
    await ask(nc, "turn", {"session_id": "csess_1", "seq": 2, "content": "after"})
    await published(js, 2)

    assert again == first
    prompts = [prompt for _, prompt in engine.prompts]
    assert prompts == [frame_first_prompt(BRIEF, "only once"), "after"]


async def test_an_unknown_engine_is_refused_with_a_reason_a_person_can_act_on(nc, start_runner):
    await start_runner({"scripted": ScriptedEngine()})

    reply = await ask(nc, "launch", launch_body(engine="codex"))

    assert reply["accepted"] is False
    assert "codex" in reply["reason"] and "scripted" in reply["reason"]
    assert_person_facing(reply["reason"])


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        json.dumps({"session_id": "csess_1"}).encode(),
        json.dumps(launch_body("")).encode(),
    ],
)
async def test_a_malformed_launch_is_refused_and_the_runner_carries_on(nc, start_runner, body):
    await start_runner({"scripted": ScriptedEngine()})

    refused = await ask(nc, "launch", body)
    taken = await ask(nc, "launch", launch_body())

    assert refused["accepted"] is False
    assert_person_facing(refused["reason"])
    assert taken["accepted"] is True


async def test_an_engine_that_cannot_start_refuses_the_launch(nc, start_runner):
    class Unstartable(ScriptedEngine):
        async def start(self, conversation_id, resume_key, workdir=None, expect=None):
            raise EngineError("the model is not installed")

    await start_runner({"scripted": Unstartable()})

    reply = await ask(nc, "launch", launch_body())

    assert reply["accepted"] is False
    assert "the model is not installed" in reply["reason"]


# Turns -----------------------------------------------------------------------


async def test_a_turn_delivered_twice_is_run_once(nc, js, start_runner):
    engine = ScriptedEngine()
    await start_runner({"scripted": engine})
    await ask(nc, "launch", launch_body())

    replies = [
        await ask(nc, "turn", {"session_id": "csess_1", "seq": 10, "content": "hello"}),
        await ask(nc, "turn", {"session_id": "csess_1", "seq": 10, "content": "hello"}),
        await ask(nc, "turn", {"session_id": "csess_1", "seq": 11, "content": "next"}),
    ]
    entries = await published(js, 2)

    assert replies == [{"accepted": True}] * 3
    assert engine.prompts == [("csess_1", "hello"), ("csess_1", "next")]
    assert [e["entry_id"] for e in entries] == ["csess_1:turn-10:end", "csess_1:turn-11:end"]


class GatedEngine(ScriptedEngine):
    """Holds its first turn until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.holding = asyncio.Event()

    async def run_turn(self, conversation, prompt, emit):
        if not self.holding.is_set():
            self.holding.set()
            await self.gate.wait()
        return await super().run_turn(conversation, prompt, emit)


async def test_turns_run_in_order_one_at_a_time(nc, js, start_runner):
    engine = GatedEngine()
    await start_runner({"scripted": engine})
    launched = await ask(nc, "launch", launch_body(instruction="first"))
    await asyncio.wait_for(engine.holding.wait(), timeout=5)

    for seq in range(2, 6):
        turn = {"session_id": "csess_1", "seq": seq, "content": f"turn {seq}"}
        assert await ask(nc, "turn", turn) == {"accepted": True}
    engine.gate.set()
    entries = await published(js, 5)

    assert launched["accepted"] is True
    prompts = [prompt for _, prompt in engine.prompts]
    assert prompts == ["first", "turn 2", "turn 3", "turn 4", "turn 5"]
    assert [e["content"].split(" (")[0] for e in entries] == [
        "scripted reply to: first",
        *[f"scripted reply to: turn {seq}" for seq in range(2, 6)],
    ]


async def test_a_turn_for_a_conversation_not_running_here_is_refused(nc, start_runner):
    await start_runner({"scripted": ScriptedEngine()})

    reply = await ask(nc, "turn", {"session_id": "csess_404", "seq": 1, "content": "hi"})

    assert reply["accepted"] is False
    assert "csess_404" in reply["reason"]
    assert_person_facing(reply["reason"].replace("csess_404", ""))


@pytest.mark.parametrize(
    "body", [b"{", json.dumps({"session_id": "csess_1", "seq": "one"}).encode()]
)
async def test_a_malformed_turn_is_refused(nc, start_runner, body):
    await start_runner({"scripted": ScriptedEngine()})
    await ask(nc, "launch", launch_body())

    reply = await ask(nc, "turn", body)

    assert reply["accepted"] is False and reply["reason"]


class FailsOnce(ScriptedEngine):
    failed = False

    async def run_turn(self, conversation, prompt, emit):
        if not self.failed:
            self.failed = True
            raise EngineError("The model is overloaded.")
        return await super().run_turn(conversation, prompt, emit)


async def test_a_failing_turn_is_recorded_and_the_next_one_still_runs(nc, js, start_runner):
    await start_runner({"scripted": FailsOnce()})
    await ask(nc, "launch", launch_body(instruction="first"))
    await ask(nc, "turn", {"session_id": "csess_1", "seq": 2, "content": "second"})
    entries = await published(js, 2)

    assert (entries[0]["kind"], entries[0]["content"]) == (
        "outcome",
        "scripted could not answer this message: The model is overloaded.",
    )
    assert entries[1]["content"].startswith("scripted reply to: second")


async def test_a_brief_whose_turn_failed_goes_with_the_next_message(nc, js, start_runner):
    engine = FailsOnce()
    await start_runner({"scripted": engine})
    await ask(nc, "launch", launch_body(seed=SEED, instruction="first"))
    await ask(nc, "turn", {"session_id": "csess_1", "seq": 2, "content": "second"})
    await published(js, 2)

    assert engine.prompts == [("csess_1", frame_first_prompt(BRIEF, "second"))]


# Stop ------------------------------------------------------------------------


async def test_stop_ends_the_conversation_and_says_it_exited(nc, start_runner, events):
    runner = await start_runner({"scripted": ScriptedEngine()})
    launched = await ask(nc, "launch", launch_body())

    stopped = await ask(nc, "stop", {"session_id": "csess_1", "reason": "idle"})
    stopped_again = await ask(nc, "stop", {"session_id": "csess_1", "reason": "idle"})
    late_turn = await ask(nc, "turn", {"session_id": "csess_1", "seq": 3, "content": "hi"})

    assert (stopped, stopped_again) == ({"stopped": True, "worktree": None},
                                        {"stopped": False, "worktree": None})
    assert late_turn["accepted"] is False
    assert runner.live_conversations == []
    await eventually(lambda: any(e["type"] == "exited" for e in events))
    [exited] = [e for e in events if e["type"] == "exited"]
    assert exited["session_id"] == "csess_1"
    assert exited["engine_session_id"] == launched["engine_session_id"]


async def test_a_malformed_stop_is_answered(nc, start_runner):
    await start_runner({"scripted": ScriptedEngine()})

    reply = await ask(nc, "stop", b"nope")

    assert reply["stopped"] is False and reply["reason"]


async def test_stopping_the_runner_ends_every_conversation(nc, start_runner, events):
    runner = await start_runner({"scripted": ScriptedEngine()})
    await ask(nc, "launch", launch_body("csess_1"))
    await ask(nc, "launch", launch_body("csess_2"))

    await runner.stop()

    await eventually(lambda: len([e for e in events if e["type"] == "exited"]) == 2)
    exited = sorted(e["session_id"] for e in events if e["type"] == "exited")
    assert exited == ["csess_1", "csess_2"]


# Engines of every kind ---------------------------------------------------------


async def test_a_stateless_engine_gets_the_brief_as_history_and_the_whole_conversation_each_turn(
    nc, js, start_runner, chat_standin
):
    await start_runner({"openai": OpenAIChatEngine(base_url=chat_standin.base_url, model="m")})

    reply = await ask(
        nc, "launch", launch_body(engine="openai", seed=SEED, instruction="What now?")
    )
    await published(js, 1)
    await ask(nc, "turn", {"session_id": "csess_1", "seq": 7, "content": "And then?"})
    entries = await published(js, 2)

    assert (reply["resumed_conversation"], reply["seeded"]) == (False, True)
    assert reply["engine_session_id"] is None
    assert chat_standin.requests[0]["messages"] == [
        {"role": "user", "content": background(BRIEF)},
        {"role": "user", "content": "What now?"},
    ]
    assert len(chat_standin.requests[1]["messages"]) == 4
    assert [e["content"] for e in entries] == [
        "received 2 messages; last: What now?",
        "received 4 messages; last: And then?",
    ]
    assert {e["engine"] for e in entries} == {"openai"}


async def test_claude_that_resumes_as_asked_never_reads_the_brief(
    nc, js, start_runner, fake_claude, monkeypatch, events
):
    claude = fake_claude("faithful")
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(claude.log_path))
    claude.write_transcript("k-1", ("earlier", "earlier reply"))
    await start_runner({"claude": claude.engine()})

    body = launch_body(
        engine="claude", resume="k-1", expect=EARLIER_REPLY, seed=SEED, instruction="one"
    )
    reply = await ask(nc, "launch", body)
    await published(js, 5)
    await ask(nc, "turn", {"session_id": "csess_1", "seq": 8, "content": "two"})
    entries = await published(js, 10)

    assert (reply["resumed_conversation"], reply["seeded"]) == (True, False)
    assert reply["engine_session_id"] == "k-1"
    assert [call["prompt"] for call in claude.calls()] == ["one", "two"]
    assert [call["resume"] for call in claude.calls()] == ["k-1", "k-1"]
    assert [e["kind"] for e in entries[:5]] == [
        "chat_assistant", "command", "terminal", "chat_assistant", "outcome"
    ]
    assert entries[0]["content"] == "heard 1 earlier prompts; now: one"
    assert [e["entry_id"] for e in entries[:2]] == ["csess_1:launch:0", "csess_1:launch:1"]


async def test_claude_that_starts_another_conversation_is_briefed_with_the_same_message(
    nc, js, start_runner, fake_claude, monkeypatch, events
):
    claude = fake_claude("forgetful")
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(claude.log_path))
    claude.write_transcript("k-1", ("earlier", "earlier reply"))
    await start_runner({"claude": claude.engine()})

    body = launch_body(
        engine="claude", resume="k-1", expect=EARLIER_REPLY, seed=SEED, instruction="one"
    )
    reply = await ask(nc, "launch", body)
    entries = await published(js, 5)

    # The reply waited for the init line: it named another conversation, so no resume.
    assert (reply["resumed_conversation"], reply["seeded"]) == (False, True)
    assert reply["engine_session_id"] != "k-1"
    assert [(c["resume"], c["prompt"]) for c in claude.calls()] == [
        ("k-1", "one"),
        (None, frame_first_prompt(BRIEF, "one")),
    ]
    assert entries[0]["content"] == (
        "heard 0 earlier prompts; now: Background from the earlier conversation"
    )
    await eventually(lambda: any(e["type"] == "engine_bound" for e in events))
    assert all(e["engine_session_id"] != "k-1" for e in events if e["type"] == "engine_bound")
    assert not any(e["type"] == "resume_lost" for e in events)


# The entry point a command line wraps ----------------------------------------


async def test_run_runner_serves_until_cancelled_and_then_goes_offline(
    nats_url, nc, js, tmp_path
):
    serving = asyncio.create_task(
        run_runner(
            nats_url,
            "node-cli",
            "Demo machine",
            ["scripted"],
            presence_interval=1,
            stop_signals=False,
            state_dir=tmp_path / "state",
        )
    )

    async def present() -> bool:
        try:
            kv = await js.key_value(RUNNERS_BUCKET)
            return (await kv.get(presence_key("node-cli"))).value is not None
        except Exception:
            return False

    await eventually(present)
    reply = await ask(nc, "launch", launch_body(seed=SEED), node_id="node-cli")
    serving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await serving

    assert reply["seeded"] is True
    assert not await present()
    # What a run started again would need is kept there (the lock of this run, released).
    assert (tmp_path / "state" / "runner.lock").exists()


async def test_run_runner_takes_a_clusters_list_of_servers(nats_url, js, tmp_path):
    """SEEDLINE_NATS_URL names every server of a cluster, separated by commas, as the
    services take it: the runner connects through whichever answers."""
    from seedline_devtools.embedded import free_port

    serving = asyncio.create_task(
        run_runner(f"nats://127.0.0.1:{free_port()}, {nats_url}", "node-listed", "Listed",
                   ["scripted"], presence_interval=1, stop_signals=False,
                   state_dir=tmp_path / "state")
    )

    async def present() -> bool:
        try:
            kv = await js.key_value(RUNNERS_BUCKET)
            return (await kv.get(presence_key("node-listed"))).value is not None
        except Exception:
            return False

    try:
        await eventually(present)
        assert await present(), "the runner never put its presence through the listed servers"
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)


async def test_a_warm_conversation_in_the_store_is_not_seeded_again(
    nc, js, start_runner, chat_standin
):
    store = ConversationStore()
    store.get_or_create("csess_1").append_exchange("add castling", "castling is in")
    engine = OpenAIChatEngine(base_url=chat_standin.base_url, model="m")
    await start_runner({"openai": engine}, store=store)

    reply = await ask(
        nc, "launch", launch_body(engine="openai", seed=SEED, instruction="What now?")
    )
    await published(js, 1)

    assert reply["seeded"] is False
    assert [m["content"] for m in chat_standin.requests[0]["messages"]] == [
        "add castling",
        "castling is in",
        "What now?",
    ]


# Protocol 2: what the machine hosts, for whom, and where ------------------------


async def presence_puts(js):
    """Every presence value put from now on, decoded, in order."""
    kv = await js.key_value(RUNNERS_BUCKET)
    watcher = await kv.watch(presence_key(NODE), include_history=False)
    seen: list[RunnerPresence] = []

    async def follow():
        async for entry in watcher:
            if entry is not None and entry.value:
                seen.append(decode(entry.value, RunnerPresence))

    task = asyncio.create_task(follow())
    return seen, task


async def test_presence_lists_a_conversation_from_its_launch_until_its_stop(
    nc, js, start_runner
):
    runner = await start_runner({"scripted": ScriptedEngine()}, presence_interval=10)
    seen, follower = await presence_puts(js)

    await ask(nc, "launch", launch_body("csess_1"))
    await eventually(lambda: any(p.live == ["csess_1"] for p in seen))
    listed = list(seen)
    await ask(nc, "stop", {"session_id": "csess_1", "reason": "idle"})
    await eventually(lambda: seen and seen[-1].live == [])
    follower.cancel()

    assert runner.live_conversations == []
    assert [p.live for p in listed][-1] == ["csess_1"]
    assert seen[-1].live == [] and seen[-1].protocol == 3


async def test_the_presence_no_longer_lists_a_stopped_conversation_when_the_stop_is_answered(
    nc, js, start_runner, monkeypatch
):
    """Once the platform has a stop's reply it may launch the repo elsewhere: the machine's
    own word must not still list the conversation then, however slow its put (fault
    harness, seed 6)."""
    from seedline_runner.presence import PresenceHeartbeat

    await start_runner({"scripted": ScriptedEngine()}, presence_interval=10)
    kv = await js.key_value(RUNNERS_BUCKET)
    await ask(nc, "launch", launch_body("csess_1"))
    await eventually(lambda: _lists(kv, "csess_1"))
    beat = PresenceHeartbeat.beat

    async def slow_beat(self):
        await asyncio.sleep(0.3)  # a put through a busy cluster
        return await beat(self)

    monkeypatch.setattr(PresenceHeartbeat, "beat", slow_beat)

    await ask(nc, "stop", {"session_id": "csess_1", "reason": "relocated"})

    assert not await _lists(kv, "csess_1")


async def test_a_launch_is_answered_once_the_presence_lists_it(nc, js, start_runner, monkeypatch):
    """From the platform's view the machine's own word never leaves out a conversation it
    was told runs there, however slow its put."""
    from seedline_runner.presence import PresenceHeartbeat

    await start_runner({"scripted": ScriptedEngine()}, presence_interval=10)
    kv = await js.key_value(RUNNERS_BUCKET)
    beat = PresenceHeartbeat.beat

    async def slow_beat(self):
        await asyncio.sleep(0.3)
        return await beat(self)

    monkeypatch.setattr(PresenceHeartbeat, "beat", slow_beat)

    reply = await ask(nc, "launch", launch_body("csess_1"))

    assert reply["accepted"] is True
    assert await _lists(kv, "csess_1")


async def test_a_runner_out_of_touch_ends_its_conversations_within_its_lease_and_takes_no_launch(
    nc, js, start_runner, monkeypatch
):
    """Cut off, a machine cannot be told to stop anything, and once its presence expires
    the platform may start its conversations elsewhere: it ends them first, and refuses a
    launch the network held up until it is back in touch (fault harness, seed 7)."""
    from seedline_runner.presence import PresenceHeartbeat

    runner = await start_runner({"scripted": ScriptedEngine()}, presence_interval=0.5,
                                lease_seconds=1.5)
    await ask(nc, "launch", launch_body("csess_1"))
    assert runner.live_conversations == ["csess_1"]
    beat = PresenceHeartbeat.beat

    async def cut_off(self):
        return False  # no put lands

    monkeypatch.setattr(PresenceHeartbeat, "beat", cut_off)
    await eventually(lambda: runner.live_conversations == [])
    assert runner.live_conversations == []

    late = await ask(nc, "launch", launch_body("csess_2"))
    assert late["accepted"] is False and "out of touch" in late["reason"]

    monkeypatch.setattr(PresenceHeartbeat, "beat", beat)
    await eventually(lambda: runner._presence.out_of_touch_for() < 1.0)
    again = await ask(nc, "launch", launch_body("csess_2"))
    assert again["accepted"] is True


async def _lists(kv, session_id: str) -> bool:
    return session_id in decode((await kv.get(presence_key(NODE))).value, RunnerPresence).live


async def test_a_machine_for_some_instances_says_so_and_refuses_the_others(
    nc, js, start_runner
):
    await start_runner({"scripted": ScriptedEngine()}, instances=["team-a", "bd43f4de"])
    kv = await js.key_value(RUNNERS_BUCKET)

    presence = decode((await kv.get(presence_key(NODE))).value, RunnerPresence)
    taken = await ask(nc, "launch", launch_body("csess_1"))
    other = {**launch_body("csess_2"), "instance_id": "someone-else"}
    refused = await ask(nc, "launch", other)

    assert presence.instances == ["team-a", "bd43f4de"]
    assert taken["accepted"] is True
    assert refused["accepted"] is False
    assert "Your Mac mini" in refused["reason"] and "someone-else" in refused["reason"]
    assert_person_facing(refused["reason"])


class RecordsCheckouts(ScriptedEngine):
    def __init__(self) -> None:
        super().__init__()
        self.workdirs: list = []

    async def start(self, conversation_id, resume_key, workdir=None, expect=None):
        self.workdirs.append(workdir)
        return await super().start(conversation_id, resume_key, workdir, expect)


async def test_each_conversation_runs_in_its_repos_checkout_and_a_missing_one_is_refused(
    nc, start_runner, tmp_path
):
    (tmp_path / "repos" / "apps" / "chess-academy").mkdir(parents=True)
    elsewhere = tmp_path / "src" / "site"
    elsewhere.mkdir(parents=True)
    engine = RecordsCheckouts()
    checkouts = Checkouts(repos_dir=tmp_path / "repos", mapping={"web/site": elsewhere})
    await start_runner({"scripted": engine}, checkouts=checkouts)

    in_folder = await ask(nc, "launch", launch_body("csess_1"))
    mapped = await ask(nc, "launch", {**launch_body("csess_2"), "repo": "web/site"})
    missing = await ask(nc, "launch", {**launch_body("csess_3"), "repo": "apps/go-club"})

    assert in_folder["accepted"] is True and mapped["accepted"] is True
    assert engine.workdirs == [tmp_path / "repos" / "apps" / "chess-academy", elsewhere]
    assert missing["accepted"] is False
    assert "apps/go-club" in missing["reason"] and "Your Mac mini" in missing["reason"]
    assert_person_facing(missing["reason"])


class SaysThenWaits(ScriptedEngine):
    """Emits a first output, then holds the turn until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def run_turn(self, conversation, prompt, emit):
        await emit(EngineOutput("command", "Bash: make test"))
        await self.gate.wait()
        return await super().run_turn(conversation, prompt, emit)


async def test_output_is_published_as_the_engine_emits_it_not_at_the_end_of_the_turn(
    nc, js, start_runner
):
    engine = SaysThenWaits()
    await start_runner({"scripted": engine})

    await ask(nc, "launch", launch_body(instruction="run the tests"))
    during = await published(js, 1)
    engine.gate.set()
    after = await published(js, 2)

    assert [(e["kind"], e["entry_id"]) for e in during] == [("command", "csess_1:launch:0")]
    assert [(e["kind"], e["entry_id"]) for e in after] == [
        ("command", "csess_1:launch:0"),
        ("chat_assistant", "csess_1:launch:end"),
    ]


async def test_a_runner_stopped_right_after_a_launch_still_says_so_and_leaves(nc, js, events):
    """Stopping cancels the launch handler mid-way; the connection must keep working, so
    the conversation's `exited` reaches the gateway and the presence key is deleted."""
    runner = Runner(nc, NODE, "Your Mac mini", {"scripted": ScriptedEngine()})
    await runner.start()
    assert (await ask(nc, "launch", launch_body()))["accepted"] is True

    await asyncio.create_task(runner.stop())  # as a signal handler would, a moment later

    await eventually(lambda: any(e["type"] == "exited" for e in events))
    kv = await js.key_value(RUNNERS_BUCKET)
    with pytest.raises(KeyNotFoundError):
        await kv.get(presence_key(NODE))
    await nc.flush(timeout=2)  # the shared connection still reads


# A resume counts only with proof (CONTRACT.md 3.2 and 6, 1.2) ---------------------

OTHER_NODE = "demo-runner"


async def entries_of(js, session_id: str, at_least: int) -> list[dict[str, Any]]:
    """The entries of one conversation on any machine's ingest subject, oldest first."""

    async def found() -> list[dict[str, Any]]:
        count = (await js.stream_info(OBSERVED_INGEST)).state.messages
        messages = [await js.get_msg(OBSERVED_INGEST, n) for n in range(1, count + 1)]
        bodies = [json.loads(message.data) for message in messages]
        return [body for body in bodies if body["session_id"] == session_id]

    async def enough() -> bool:
        return len(await found()) >= at_least

    await eventually(enough)
    return await found()


def bound_ids(events: list[dict[str, Any]], session_id: str) -> list[str]:
    return [
        e["engine_session_id"]
        for e in events
        if e["type"] == "engine_bound" and e["session_id"] == session_id
    ]


@pytest.mark.parametrize(
    ("stop_reason", "with_expect"),
    [("stopped", True), ("idle", True), ("idle", False)],
    ids=["relocate-stop-wake", "relocate-idle-stop-wake", "idle-stop-wake-without-expect"],
)
async def test_a_wake_after_a_relocation_and_a_stop_is_briefed_not_resumed_from_an_empty_store(
    nc, js, start_runner, events, stop_reason, with_expect
):
    first_machine, second_machine = ScriptedEngine(), ScriptedEngine()
    await start_runner({"scripted": first_machine}, node_id=OTHER_NODE)
    await start_runner({"scripted": second_machine})
    await ask(nc, "launch", launch_body(instruction="R1: build the parser"), node_id=OTHER_NODE)
    [r1_reply] = await entries_of(js, "csess_1", 1)
    # Relocated: stopped there, launched here with a brief and no message to run.
    await ask(nc, "stop", {"session_id": "csess_1", "reason": "relocated"}, node_id=OTHER_NODE)
    moved = await ask(nc, "launch", launch_body(seed=SEED))
    await ask(nc, "stop", {"session_id": "csess_1", "reason": stop_reason})
    await eventually(lambda: bound_ids(events, "csess_1")[1:])
    key = bound_ids(events, "csess_1")[-1]
    expect = {"seq": 2, "kind": "chat_assistant", "excerpt": r1_reply["content"][:200]}

    woken = await ask(
        nc,
        "launch",
        launch_body(
            "csess_2",
            resume=key,
            expect=expect if with_expect else None,
            seed=SEED,
            instruction="how far did we get?",
        ),
    )
    [answer] = await entries_of(js, "csess_2", 1)

    assert (moved["resumed_conversation"], moved["seeded"]) == (False, True)
    assert (woken["resumed_conversation"], woken["seeded"]) == (False, True)
    assert second_machine.prompts == [("csess_2", frame_first_prompt(BRIEF, "how far did we get?"))]
    assert f"seed sha256 {BRIEF_SHA}" in answer["content"]


async def test_a_store_without_the_expected_turn_is_no_resume(nc, js, start_runner):
    engine = ScriptedEngine()
    await start_runner({"scripted": engine})
    first = await ask(nc, "launch", launch_body("csess_1", instruction="start castling"))
    await published(js, 1)
    await ask(nc, "stop", {"session_id": "csess_1", "reason": "idle"})
    never_given = {"seq": 9, "kind": "chat_user", "excerpt": "a message it never got"}
    given = {"seq": 3, "kind": "chat_user", "excerpt": "start castling"}

    refused = await ask(
        nc, "launch",
        launch_body("csess_2", resume=first["engine_session_id"], expect=never_given, seed=SEED),
    )
    taken = await ask(
        nc, "launch",
        launch_body("csess_3", resume=first["engine_session_id"], expect=given, seed=SEED),
    )

    assert (refused["resumed_conversation"], refused["seeded"]) == (False, True)
    assert refused["engine_session_id"] != first["engine_session_id"]
    assert (taken["resumed_conversation"], taken["seeded"]) == (True, False)


async def test_a_stateless_engine_resumes_only_a_conversation_its_store_holds(
    nc, js, start_runner, chat_standin
):
    store = ConversationStore()
    store.get_or_create("csess_1").append_exchange("add castling", "castling is in")
    engine = OpenAIChatEngine(base_url=chat_standin.base_url, model="m")
    await start_runner({"openai": engine}, store=store)
    holds = {"seq": 4, "kind": "chat_assistant", "excerpt": "castling is in"}

    warm = await ask(nc, "launch", launch_body(engine="openai", resume="csess_1", expect=holds,
                                                seed=SEED))
    empty = await ask(nc, "launch", launch_body("csess_2", engine="openai", resume="csess_2",
                                                 seed=SEED))

    assert (warm["resumed_conversation"], warm["seeded"]) == (True, False)
    assert (empty["resumed_conversation"], empty["seeded"]) == (False, True)


async def test_a_resume_refused_after_the_reply_said_resumed_is_published_and_briefed_at_once(
    nc, js, start_runner, fake_claude, monkeypatch, events
):
    claude = fake_claude("strict")
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(claude.log_path))
    transcript = claude.write_transcript("k-1", ("earlier", "earlier reply"))
    await start_runner({"claude": claude.engine()})

    reply = await ask(nc, "launch", launch_body(engine="claude", resume="k-1",
                                                expect=EARLIER_REPLY, seed=SEED))
    transcript.unlink()  # gone after the reply, before the first message
    await ask(nc, "turn", {"session_id": "csess_1", "seq": 8, "content": "two"})
    entries = await published(js, 6)
    await ask(nc, "turn", {"session_id": "csess_1", "seq": 9, "content": "three"})
    await published(js, 11)

    assert (reply["resumed_conversation"], reply["seeded"]) == (True, False)
    calls = [(c["resume"], c["prompt"]) for c in claude.calls()]
    assert calls[:2] == [("k-1", "two"), (None, frame_first_prompt(BRIEF, "two"))]
    # The next message goes on in the new conversation, without the brief again.
    new_id = calls[2][0]
    assert calls[2] == (new_id, "three") and new_id not in (None, "k-1")
    await eventually(lambda: bound_ids(events, "csess_1")[1:])
    assert bound_ids(events, "csess_1") == ["k-1", new_id]
    await eventually(lambda: any(e["type"] == "resume_lost" for e in events))
    [lost] = [e for e in events if e["type"] == "resume_lost"]
    assert lost["session_id"] == "csess_1" and lost["at"]
    assert "k-1" in lost["reason"]
    assert_person_facing(lost["reason"])
    note = entries[0]
    assert note["kind"] == "outcome"
    assert "could not continue its earlier conversation" in note["content"]
    assert_person_facing(note["content"])
    assert entries[1]["content"].startswith("heard 0 earlier prompts")


async def test_a_resume_not_accepted_in_time_is_reported_not_resumed_and_briefed(
    nc, js, start_runner, fake_claude, monkeypatch, events
):
    claude = fake_claude("faithful")
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(claude.log_path))
    monkeypatch.setenv("FAKE_CLAUDE_RESUME_DELAY", "30")
    claude.write_transcript("k-1", ("earlier", "earlier reply"))
    await start_runner({"claude": claude.engine()}, resume_proof_seconds=0.5)
    body = launch_body(
        engine="claude", resume="k-1", expect=EARLIER_REPLY, seed=SEED, instruction="one"
    )

    first, again = await asyncio.gather(ask(nc, "launch", body), ask(nc, "launch", body))
    entries = await published(js, 5)

    assert first == again
    assert (first["resumed_conversation"], first["seeded"]) == (False, True)
    assert first["engine_session_id"] != "k-1"
    assert [(c["resume"], c["prompt"]) for c in claude.calls()] == [
        ("k-1", "one"),
        (None, frame_first_prompt(BRIEF, "one")),
    ]
    assert entries[0]["content"].startswith("heard 0 earlier prompts")
    assert not any(e["type"] == "resume_lost" for e in events)
    assert "k-1" not in bound_ids(events, "csess_1")


async def test_an_emptied_transcript_is_no_resume_and_the_brief_goes_with_the_first_message(
    nc, js, start_runner, fake_claude, monkeypatch
):
    claude = fake_claude("faithful")
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(claude.log_path))
    claude.write_transcript("k-1", ("earlier", "earlier reply")).write_text("")
    await start_runner({"claude": claude.engine()})

    reply = await ask(nc, "launch", launch_body(engine="claude", resume="k-1",
                                                expect=EARLIER_REPLY, seed=SEED,
                                                instruction="one"))
    await published(js, 5)

    assert (reply["resumed_conversation"], reply["seeded"]) == (False, True)
    assert [(c["resume"], c["prompt"]) for c in claude.calls()] == [
        (None, frame_first_prompt(BRIEF, "one"))
    ]


async def test_engine_bound_goes_out_at_the_init_line_not_at_the_end_of_the_turn(
    nc, js, start_runner, fake_claude, monkeypatch, events, tmp_path
):
    claude = fake_claude("faithful")
    gate = tmp_path / "open-the-gate"
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(claude.log_path))
    monkeypatch.setenv("FAKE_CLAUDE_GATE", str(gate))
    await start_runner({"claude": claude.engine()})

    reply = await ask(nc, "launch", launch_body(engine="claude", instruction="one"))
    await eventually(lambda: bound_ids(events, "csess_1"))
    bound_mid_turn = bound_ids(events, "csess_1")
    gate.touch()
    await published(js, 5)

    assert reply["engine_session_id"] is None  # a fresh conversation: known from its first line
    assert len(bound_mid_turn) == 1
    assert claude.transcript(bound_mid_turn[0]).exists()
    assert bound_ids(events, "csess_1") == bound_mid_turn


class NamesItselfThenWaits(ScriptedEngine):
    """An engine added later: it names its own id through the adapter seam, then works on."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def run_turn(self, conversation, prompt, emit):
        await announce_bound(emit, "own-7")
        await self.gate.wait()
        await emit(EngineOutput("chat_assistant", "done"))
        return TurnResult(engine_session_id="own-7")


async def test_any_engine_that_names_its_id_through_the_seam_is_bound_at_once(
    nc, js, start_runner, events
):
    engine = NamesItselfThenWaits()
    await start_runner({"scripted": engine})

    await ask(nc, "launch", launch_body(instruction="one"))
    await eventually(lambda: "own-7" in bound_ids(events, "csess_1"))
    engine.gate.set()
    await published(js, 1)

    assert bound_ids(events, "csess_1")[-1] == "own-7"
    assert bound_ids(events, "csess_1").count("own-7") == 1


class AcceptsTooLate(ScriptedEngine):
    """Its store proves a resume, but its first line names the id only as it is stopped."""

    async def start(self, conversation_id, resume_key, workdir=None, expect=None):
        started = await super().start(conversation_id, resume_key, workdir, expect)
        if not started.resumed:
            return started
        return StartResult(True, started.engine_session_id, acceptance_pending=True)

    async def run_turn(self, conversation, prompt, emit):
        key = self._bound[conversation.conversation_id]
        if conversation.conversation_id == "csess_2" and key == self.resumed_key:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await announce_bound(emit, key)
                raise
        return await super().run_turn(conversation, prompt, emit)


async def test_an_acceptance_after_the_reply_said_not_resumed_never_drops_the_brief(
    nc, js, start_runner, events
):
    engine = AcceptsTooLate()
    await start_runner({"scripted": engine}, resume_proof_seconds=0.3)
    first = await ask(nc, "launch", launch_body("csess_1", instruction="start castling"))
    await published(js, 1)
    await ask(nc, "stop", {"session_id": "csess_1", "reason": "idle"})
    engine.resumed_key = first["engine_session_id"]

    reply = await ask(nc, "launch", launch_body(
        "csess_2", resume=first["engine_session_id"], seed=SEED, instruction="carry on"))
    await published(js, 2)

    assert (reply["resumed_conversation"], reply["seeded"]) == (False, True)
    assert engine.prompts[-1] == ("csess_2", frame_first_prompt(BRIEF, "carry on"))
    assert first["engine_session_id"] not in bound_ids(events, "csess_2")
    assert not any(e["type"] == "resume_lost" for e in events)


# Fencing (CONTRACT.md 4, 1.2) -------------------------------------------------


async def test_a_newer_fence_ends_the_repos_older_engine_and_an_older_one_is_refused(
    nc, start_runner
):
    runner = await start_runner({"scripted": ScriptedEngine()})
    first = await ask(nc, "launch", {**launch_body("csess_1"), "fence": 5})
    assert first["accepted"] is True
    newer = await ask(nc, "launch", {**launch_body("csess_2"), "fence": 9})
    assert newer["accepted"] is True
    assert runner.live_conversations == ["csess_2"]  # one engine per repo on this machine
    older = await ask(nc, "launch", {**launch_body("csess_3"), "fence": 7})
    assert older["accepted"] is False and "later open" in older["reason"]
    assert_person_facing(older["reason"])
    other_repo = await ask(nc, "launch", {**launch_body("csess_4"), "repo": "apps/other",
                                          "fence": 1})
    assert other_repo["accepted"] is True
    assert sorted(runner.live_conversations) == ["csess_2", "csess_4"]


async def test_a_machine_started_again_keeps_the_full_pace_for_its_first_puts(monkeypatch):
    """Two puts of a machine started again tell the platform it no longer runs what its
    previous run did: they come at the full pace, hosting nothing or not; then a machine
    hosting nothing slows down, and one hosting something keeps the pace."""
    from seedline_runner import presence

    hosting = False
    paces: list[float] = []

    class Enough(Exception):
        pass

    async def sleep(seconds: float) -> None:
        paces.append(seconds)
        if len(paces) == 6:
            raise Enough

    async def beat(self) -> bool:
        nonlocal hosting
        hosting = len(paces) == 4  # a conversation is live from the fourth put to the fifth
        return True

    heartbeat = presence.PresenceHeartbeat(None, NODE, lambda: None, 0.25,
                                           hosting=lambda: hosting)
    monkeypatch.setattr(presence.PresenceHeartbeat, "beat", beat)
    monkeypatch.setattr(presence.asyncio, "sleep", sleep)
    with pytest.raises(Enough):
        await heartbeat._loop()

    assert paces == [0.25, 0.25, 0.5, 0.5, 0.25, 0.5]
