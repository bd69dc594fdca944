"""Launches on a runner whose engines are the real CLIs: the reply says what happened.

A runner (in the test's event loop, on a real nats-server) hosts the real claude or
codex engine; the stand-in model says which prompts reached it, so the launch reply's
``resumed_conversation`` and ``seeded`` are checked against what the model was sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil

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


def launch(engine: str, session_id: str, *, resume=None, expect=None, seed=None,
           instruction=None) -> dict:
    return {"session_id": session_id, "instance_id": "bd43f4de", "repo": REPO,
            "engine": engine,
            "resume": {"engine_session_id": resume, "expect": expect} if resume else None,
            "seed": seed, "instruction": instruction}


async def until(check, timeout: float = 60.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := check()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the engine did not answer in time")
        await asyncio.sleep(0.05)
    return value


async def replies(nc, session_id: str, at_least: int) -> list[dict]:
    """The engine's replies the runner published for one conversation, oldest first."""
    js = nc.jetstream()

    def chat_replies(bodies):
        return [b for b in bodies if b["session_id"] == session_id
                and b["kind"] == "chat_assistant"]

    async def read() -> list[dict]:
        count = (await js.stream_info("OBSERVED_INGEST")).state.messages
        return chat_replies([json.loads((await js.get_msg("OBSERVED_INGEST", n)).data)
                             for n in range(1, count + 1)])

    deadline = asyncio.get_running_loop().time() + 60.0
    while len(found := await read()) < at_least:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the engine did not answer in time")
        await asyncio.sleep(0.05)
    return found


class Events:
    """What the runner publishes on its events subject."""

    def __init__(self) -> None:
        self.seen: list[dict] = []

    async def take(self, msg) -> None:
        self.seen.append(json.loads(msg.data))

    def of(self, kind: str) -> list[dict]:
        return [event for event in self.seen if event["type"] == kind]


@pytest.fixture
async def events(nc):
    seen = Events()
    subscription = await nc.subscribe(subjects.runner_subject(NODE, "events"), cb=seen.take)
    yield seen
    await subscription.unsubscribe()


async def earlier_conversation(nc, machine, cli, events, *messages: str):
    """A first conversation of one or more messages, stopped with its runner.

    Returns its engine's id (from engine_bound) and the launch ``resume.expect`` the
    platform computes for it: the newest reply the engine produced.
    """
    name, _, standin, _ = cli
    first, *later = messages or ("add castling",)
    runner = await machine()
    await ask(nc, "launch", launch(name, "csess_1", instruction=first))
    await replies(nc, "csess_1", 1)
    for seq, message in enumerate(later, start=2):
        await ask(nc, "turn", {"session_id": "csess_1", "seq": seq, "content": message})
        await replies(nc, "csess_1", seq)
    newest = (await replies(nc, "csess_1", len(messages or (first,))))[-1]
    # The CLI streams a reply before it writes it to its own record: a stop at once
    # would leave a record without it (and rightly no resume).
    _, _, _, transcripts = cli
    await until(lambda: any(newest["content"] in t.read_text() for t in transcripts()))
    await runner.stop()
    assert standin.prompts_seen()[-1] == [first, *later]
    [bound] = [e["engine_session_id"] for e in events.of("engine_bound")
               if e["session_id"] == "csess_1"]
    expect = {"seq": 100, "kind": "chat_assistant", "excerpt": newest["content"][:200]}
    return bound, expect


def briefed(message: str) -> str:
    return background(BRIEF) + "\n\nInstruction:\n" + message


async def test_a_launch_that_really_resumes_leaves_the_brief_unread(nc, machine, cli, events):
    name, _, standin, _ = cli
    key, expect = await earlier_conversation(nc, machine, cli, events)
    await machine()

    reply = await ask(nc, "launch", launch(name, "csess_2", resume=key, expect=expect,
                                           seed=SEED, instruction="now en passant"))
    seen = await until(lambda: standin.prompts_seen()[1:])

    assert (reply["resumed_conversation"], reply["seeded"]) == (True, False)
    assert reply["engine_session_id"] == key
    assert seen == [["add castling", "now en passant"]]


async def test_a_launch_whose_transcript_is_gone_is_briefed(nc, machine, cli, events):
    name, _, standin, transcripts = cli
    key, expect = await earlier_conversation(nc, machine, cli, events)
    for transcript in transcripts():
        transcript.unlink()
    await machine()

    reply = await ask(nc, "launch", launch(name, "csess_2", resume=key, expect=expect,
                                           seed=SEED, instruction="now en passant"))
    [[prompt]] = await until(lambda: standin.prompts_seen()[1:])

    assert (reply["resumed_conversation"], reply["seeded"]) == (False, True)
    assert reply["engine_session_id"] is None
    assert prompt == briefed("now en passant")


async def test_a_resume_refused_after_the_reply_is_lost_and_briefed_with_that_message(
    nc, machine, cli, events
):
    name, _, standin, transcripts = cli
    key, expect = await earlier_conversation(nc, machine, cli, events)
    await machine()
    # Gone after the launch was answered (resumed: the record proved it), before the turn.
    reply = await ask(nc, "launch", launch(name, "csess_2", resume=key, expect=expect, seed=SEED))
    for transcript in transcripts():
        transcript.unlink()

    await ask(nc, "turn", {"session_id": "csess_2", "seq": 7, "content": "now en passant"})
    await until(lambda: standin.prompts_seen()[1:])
    await ask(nc, "turn", {"session_id": "csess_2", "seq": 8, "content": "and promotion"})
    seen = await until(lambda: standin.prompts_seen()[2:])
    lost = await until(lambda: events.of("resume_lost"))

    assert (reply["resumed_conversation"], reply["seeded"]) == (True, False)
    # A cold engine given the brief with the very message it refused, then going on.
    assert standin.prompts_seen()[1] == [briefed("now en passant")]
    assert seen[-1] == [briefed("now en passant"), "and promotion"]
    assert [(e["session_id"], key in e["reason"]) for e in lost] == [("csess_2", True)]


# The engine's record, four ways (CONTRACT.md 3.2, 1.2) ---------------------------


def wipe_engine_folder(name: str, transcripts) -> None:
    """Every record the engine keeps (its configuration stays)."""
    # projects/<checkout>/<id>.jsonl; sessions/YYYY/MM/DD/rollout-...jsonl
    depth = 1 if name == "claude" else 3
    for folder in {transcript.parents[depth] for transcript in transcripts()}:
        shutil.rmtree(folder)


def empty_record(name: str, transcripts) -> None:
    for transcript in transcripts():
        transcript.write_text("")


def cut_before_the_last_turn(name: str, transcripts) -> None:
    for transcript in transcripts():
        lines = transcript.read_text().splitlines(keepends=True)
        cut = next(i for i, line in enumerate(lines) if LAST_MESSAGE in line)
        transcript.write_text("".join(lines[:cut]))


def leave_intact(name: str, transcripts) -> None:
    pass


LAST_MESSAGE = "now en passant"
RECORD_CASES = {
    "engine folder wiped": wipe_engine_folder,
    "record emptied": empty_record,
    "record cut before the last turn": cut_before_the_last_turn,
    "record intact": leave_intact,
}


@pytest.mark.parametrize("case", list(RECORD_CASES))
async def test_only_an_intact_record_is_resumed_every_other_is_briefed_with_the_first_message(
    nc, machine, cli, events, case
):
    name, _, standin, transcripts = cli
    key, expect = await earlier_conversation(nc, machine, cli, events,
                                             "add castling", LAST_MESSAGE)
    asked_before = len(standin.prompts_seen())
    RECORD_CASES[case](name, transcripts)
    await machine()

    reply = await ask(nc, "launch", launch(name, "csess_2", resume=key, expect=expect,
                                           seed=SEED, instruction="and promotion"))
    received = (await until(lambda: standin.prompts_seen()[asked_before:]))[0]
    print(f"\n{name} | {case} | resumed={reply['resumed_conversation']} "
          f"seeded={reply['seeded']} | received {received!r}")

    if case == "record intact":
        assert (reply["resumed_conversation"], reply["seeded"]) == (True, False)
        assert received == ["add castling", LAST_MESSAGE, "and promotion"]
    else:
        assert (reply["resumed_conversation"], reply["seeded"]) == (False, True)
        assert received == [briefed("and promotion")]


async def test_engine_bound_goes_out_while_the_first_turn_is_still_waiting_on_the_model(
    nc, checkouts, claude, events
):
    # The model holds its first answer: the CLI is mid-turn, past its init line.
    claude.standin.hold_at_step = 0
    runner = Runner(nc, NODE, "Linux box", {"claude": ClaudeEngine(
        executable=str(claude.executable), env=claude.env, claude_home=claude.home)},
        checkouts=Checkouts(repos_dir=checkouts))
    await runner.start()
    try:
        await ask(nc, "launch", launch("claude", "csess_1", instruction="add castling"))
        await until(lambda: claude.standin.holding.is_set())
        bound = await until(lambda: events.of("engine_bound"))
        replies_so_far = await nc.jetstream().stream_info("OBSERVED_INGEST")
        claude.standin.release.set()
        await replies(nc, "csess_1", 1)
        # The CLI writes its transcript as it goes: on a loaded machine, after the reply.
        transcripts = await until(lambda: [t.stem for t in claude.transcripts()])
    finally:
        await runner.stop()

    [[session_id, engine_session_id]] = [[e["session_id"], e["engine_session_id"]] for e in bound]
    assert session_id == "csess_1"
    assert replies_so_far.state.messages == 0  # nothing of the turn was out yet
    assert transcripts == [engine_session_id]


async def test_a_record_that_proves_the_turn_but_the_cli_refuses_is_briefed_before_the_reply(
    nc, checkouts, codex, events
):
    def machine() -> Runner:
        engine = CodexEngine(executable=str(codex.executable), env=codex.env,
                             codex_home=codex.home)
        return Runner(nc, NODE, "Linux box", {"codex": engine},
                      checkouts=Checkouts(repos_dir=checkouts))

    first = machine()
    await first.start()
    await ask(nc, "launch", launch("codex", "csess_1", instruction="add castling"))
    [reply_entry] = await replies(nc, "csess_1", 1)
    await until(lambda: any(reply_entry["content"] in r.read_text() for r in codex.rollouts()))
    await first.stop()
    # The rollout still holds the turn, but Codex 0.171 cannot read a session_meta line
    # without its timestamp ("does not start with session metadata"): it refuses.
    [rollout] = codex.rollouts()
    lines = rollout.read_text().splitlines()
    meta = json.loads(lines[0])
    key = meta["payload"]["id"]
    del meta["payload"]["timestamp"]
    rollout.write_text("\n".join([json.dumps(meta), *lines[1:]]) + "\n")
    expect = {"seq": 5, "kind": "chat_assistant", "excerpt": reply_entry["content"]}
    second = machine()
    await second.start()
    try:
        reply = await ask(nc, "launch", launch("codex", "csess_2", resume=key, expect=expect,
                                               seed=SEED, instruction="and promotion"))
        received = await until(lambda: codex.standin.prompts_seen()[1:])
    finally:
        await second.stop()

    # The reply waited for the CLI's answer to the resume: no, so briefed with the message.
    assert (reply["resumed_conversation"], reply["seeded"]) == (False, True)
    assert reply["engine_session_id"] != key
    assert received[0] == [briefed("and promotion")]
    assert events.of("resume_lost") == []
