"""Launches on a runner whose engines are the real CLIs: the reply says what happened.

A runner (in the test's event loop, on a real nats-server) hosts the real claude or
codex engine; the stand-in model says which prompts reached it, so the launch reply's
``resumed_conversation`` and ``seeded`` are checked against what the model was sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json

import nats
import pytest

from seedline_contracts import subjects
from seedline_runner import Checkouts, Runner
from seedline_runner.engines import ClaudeEngine, CodexEngine
from seedline_runner.framing import background

pytestmark = pytest.mark.servers

NODE = "linux-box-1"
REPO = "apps/chess-academy"
BRIEF = "The previous conversation has ended and is not available. We were adding castling."
SEED = {"text": BRIEF, "sha256": hashlib.sha256(BRIEF.encode()).hexdigest()}


@pytest.fixture
async def nc(nats_server):
    client = await nats.connect(nats_server.url)
    # Takes what the runner publishes, as the platform's ingest stream would.
    await client.jetstream().add_stream(name="OBSERVED_INGEST", subjects=["seedline.ingest.>"])
    yield client
    await client.close()


@pytest.fixture(params=["claude", "codex"])
def cli(request):
    """The engine's name, a factory of new adapters, its stand-in model and transcripts."""
    setup = request.getfixturevalue(request.param)
    if request.param == "claude":
        def make():
            return ClaudeEngine(executable=str(setup.executable), env=setup.env,
                                claude_home=setup.home)
        transcripts = setup.transcripts
    else:
        def make():
            return CodexEngine(executable=str(setup.executable), env=setup.env,
                               codex_home=setup.home)
        transcripts = setup.rollouts
    return request.param, make, setup.standin, transcripts


@pytest.fixture
async def machine(nc, checkouts, cli):
    """Starts a runner (a new process, as far as its engine knows), stopped after."""
    name, make, _, _ = cli
    started: list[Runner] = []

    async def start() -> Runner:
        runner = Runner(nc, NODE, "Linux box", {name: make()},
                        checkouts=Checkouts(repos_dir=checkouts))
        await runner.start()
        started.append(runner)
        return runner

    yield start
    for runner in started:
        await runner.stop()


async def ask(nc, verb: str, body: dict) -> dict:
    reply = await nc.request(subjects.runner_subject(NODE, verb), json.dumps(body).encode(),
                             timeout=30)
    return json.loads(reply.data)


def launch(engine: str, session_id: str, *, resume=None, seed=None, instruction=None) -> dict:
    return {"session_id": session_id, "instance_id": "bd43f4de", "repo": REPO,
            "engine": engine, "resume": {"engine_session_id": resume} if resume else None,
            "seed": seed, "instruction": instruction}


async def until(check, timeout: float = 60.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := check()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the engine did not answer in time")
        await asyncio.sleep(0.05)
    return value


async def earlier_conversation(nc, machine, cli) -> str:
    """A first conversation, stopped with its runner; its engine's id, from engine_bound."""
    name, _, standin, _ = cli
    bound: list[str] = []

    async def on_event(msg):
        event = json.loads(msg.data)
        if event["type"] == "engine_bound":
            bound.append(event["engine_session_id"])

    events = await nc.subscribe(subjects.runner_subject(NODE, "events"), cb=on_event)
    runner = await machine()
    await ask(nc, "launch", launch(name, "csess_1", instruction="add castling"))
    await until(lambda: bound)
    await runner.stop()
    await events.unsubscribe()
    assert standin.prompts_seen() == [["add castling"]]
    return bound[0]


async def test_a_launch_that_really_resumes_leaves_the_brief_unread(nc, machine, cli):
    name, _, standin, _ = cli
    key = await earlier_conversation(nc, machine, cli)
    await machine()

    reply = await ask(nc, "launch", launch(name, "csess_2", resume=key, seed=SEED,
                                           instruction="now en passant"))
    seen = await until(lambda: standin.prompts_seen()[1:])

    assert (reply["resumed_conversation"], reply["seeded"]) == (True, False)
    assert reply["engine_session_id"] == key
    assert seen == [["add castling", "now en passant"]]


async def test_a_launch_whose_transcript_is_gone_is_briefed(nc, machine, cli):
    name, _, standin, transcripts = cli
    key = await earlier_conversation(nc, machine, cli)
    for transcript in transcripts():
        transcript.unlink()
    await machine()

    reply = await ask(nc, "launch", launch(name, "csess_2", resume=key, seed=SEED,
                                           instruction="now en passant"))
    [[prompt]] = await until(lambda: standin.prompts_seen()[1:])

    assert (reply["resumed_conversation"], reply["seeded"]) == (False, True)
    assert reply["engine_session_id"] is None
    assert prompt == background(BRIEF) + "\n\nInstruction:\nnow en passant"


async def test_a_resume_that_fails_at_the_first_turn_sends_the_brief_with_the_next(
    nc, machine, cli
):
    name, _, standin, transcripts = cli
    key = await earlier_conversation(nc, machine, cli)
    await machine()
    # Gone after the launch was answered (resumed: the transcript was there), before the turn.
    reply = await ask(nc, "launch", launch(name, "csess_2", resume=key, seed=SEED))
    for transcript in transcripts():
        transcript.unlink()

    await ask(nc, "turn", {"session_id": "csess_2", "seq": 7, "content": "now en passant"})
    await until(lambda: standin.prompts_seen()[1:])
    await ask(nc, "turn", {"session_id": "csess_2", "seq": 8, "content": "and promotion"})
    seen = await until(lambda: standin.prompts_seen()[2:])

    assert (reply["resumed_conversation"], reply["seeded"]) == (True, False)
    assert standin.prompts_seen()[1] == ["now en passant"]  # a cold engine, no earlier turns
    assert seen[-1][-1] == background(BRIEF) + "\n\nInstruction:\nand promotion"
