"""One live engine per repo under any timing, and the contract with two copies of every
service (CONTRACT.md 4 and 6, 1.2).

What a machine runs is read from the machine itself (the runner's own list and the
`live` of its presence), sampled all through each test, never only from
`sessions.list`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from seedline_contracts import subjects
from seedline_contracts.times import now_text
from seedline_platform.tasks import cancel_and_wait
from seedline_seed_composer.app import ComposerApp
from seedline_seed_composer.handlers import Composer

pytestmark = pytest.mark.servers

REPO = "apps/chess-academy"


class Watch:
    """Samples what every machine hosts, by its own account, until stopped."""

    def __init__(self, system) -> None:
        self.system = system
        self.most_at_once = 0
        self.seen: set[str] = set()
        self._task: asyncio.Task | None = None

    async def _sample(self) -> None:
        kv = await self.system.nc.jetstream().key_value(subjects.RUNNERS_BUCKET)
        while True:
            hosted = [s for live in self.system.hosted().values() for s in live]
            present: list[str] = []
            for node_id in self.system.runners:
                with contextlib.suppress(Exception):
                    entry = await kv.get(subjects.presence_key(node_id))
                    present += json.loads(entry.value).get("live") or []
            self.seen.update(hosted)
            self.most_at_once = max(self.most_at_once, len(hosted), len(present))
            await asyncio.sleep(0.005)

    async def __aenter__(self) -> "Watch":
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc) -> None:
        await cancel_and_wait(self._task)


class ComposerPause:
    """Holds every copy of the seed-composer's decisions, as a SIGSTOP of it would."""

    def __init__(self, system) -> None:
        self.released = asyncio.Event()
        for app in [system.composer, *system.copies]:
            if isinstance(app, ComposerApp):
                compose = app.handlers[Composer.handle_decision]

                async def held(decision, msg, compose=compose):
                    await self.released.wait()
                    await compose(decision, msg)

                app.handlers[Composer.handle_decision] = held

    def release(self) -> None:
        self.released.set()

    async def __aenter__(self) -> "ComposerPause":
        return self

    async def __aexit__(self, *exc) -> None:
        # Released whatever happened: a held handler would keep the composer from stopping,
        # and a failed step would show as the test's timeout instead of its own error.
        self.release()


async def _open(system, request_id: str, timeout: float = 20.0) -> dict:
    return await system.request(subjects.API_SESSIONS_OPEN, {
        "instance_id": "bd43f4de", "repo": REPO, "engine": "scripted", "node_id": "mac-mini-1",
        "request_id": request_id}, timeout=timeout)


async def test_two_opens_while_the_composer_is_paused_never_run_two_engines(system):
    await system.start_runner()
    pause = ComposerPause(system)
    async with Watch(system) as watch, pause:
        first = asyncio.create_task(_open(system, "open-a"))
        await asyncio.sleep(3)
        second = asyncio.create_task(_open(system, "open-b"))
        await system.wait_for(lambda: _decided(system, 2), timeout=30)  # both, while held
        await asyncio.sleep(1)
        pause.release()
        a, b = await asyncio.gather(first, second)
        await asyncio.sleep(1.5)  # two presence puts after the launches
    # The later open supersedes the earlier one before its launch reached the machine.
    assert not a["ok"] and a["error"]["code"] == "superseded", a
    assert b["ok"], b
    assert watch.most_at_once == 1 and watch.seen == {b["session_id"]}
    live = (await system.request(subjects.API_SESSIONS_LIST, {}))["conversations"]
    assert [c["session_id"] for c in live] == [b["session_id"]]


async def _decided(system, n: int) -> bool:
    return len(await system.session_events("continuity_decided")) >= n


async def test_opens_that_time_out_and_are_retried_by_request_id_open_once(system):
    await system.start_runner()
    pause = ComposerPause(system)
    async with Watch(system) as watch, pause:
        first = asyncio.create_task(_open(system, "late-a"))
        await asyncio.sleep(3)
        second = await _open(system, "late-b")
        a = await first
        for reply in (a, second):
            assert reply["error"]["code"] == "timeout", reply
        assert "late-a" in a["error"]["message"] and "late-b" in second["error"]["message"]
        pause.release()
        # A person retries as told: the same request_ids, one of them with another body.
        retried_b = await _open(system, "late-b")
        retried_a = await system.request(subjects.API_SESSIONS_OPEN, {
            "instance_id": "bd43f4de", "repo": REPO, "engine": "other", "node_id": "elsewhere",
            "request_id": "late-a"}, timeout=20)
        again_b = await _open(system, "late-b")
        await asyncio.sleep(1.5)
    assert retried_b["ok"] and again_b == retried_b, (retried_b, again_b)
    assert retried_a["error"]["code"] == "superseded", retried_a
    assert watch.most_at_once == 1 and watch.seen == {retried_b["session_id"]}
    assert len(await system.session_events("open_requested")) == 2
    launched = await system.session_events("opened")
    assert [e["session_id"] for e in launched] == [retried_b["session_id"]]


async def say(system, n: int, text: str, session_id: str = "csess_person") -> None:
    body = {"entry_id": f"user-{n}", "instance_id": "bd43f4de", "repo": REPO,
            "session_id": session_id, "kind": "chat_user", "content": text, "at": now_text()}
    await system.nc.jetstream().publish(subjects.INGEST_TIMELINE, json.dumps(body).encode(),
                                        headers={"Nats-Msg-Id": body["entry_id"]})


async def test_twenty_turns_reach_the_machine_in_order_once_with_two_copies(system_copies):
    system = system_copies
    engine = await system.start_runner()
    opened = await system.open()
    assert opened["ok"], opened
    for n in range(20):
        await say(system, n, f"turn {n}")

    async def all_turns():
        return len(engine.prompts) >= 20

    await system.wait_for(all_turns, timeout=60)
    await asyncio.sleep(1)
    assert [p for _, p in engine.prompts] == [f"turn {n}" for n in range(20)]
    assert {c for c, _ in engine.prompts} == {opened["session_id"]}


async def test_a_stop_right_after_the_open_finds_it_with_two_copies(system_copies):
    system = system_copies
    await system.start_runner()
    for attempt in range(5):
        opened = await system.open()
        assert opened["ok"], opened
        stop = await system.request(subjects.API_SESSIONS_STOP,
                                    {"session_id": opened["session_id"], "reason": "done"})
        assert stop == {"ok": True, "stopped": True}, (attempt, stop)
    await system.wait_for(lambda: _nothing_hosted(system))


async def _nothing_hosted(system):
    return not any(system.hosted().values())


async def test_a_message_after_a_stop_wakes_a_conversation_with_two_copies(system_copies):
    system = system_copies
    engine = await system.start_runner()
    opened = await system.open()
    assert opened["ok"], opened
    stop = await system.request(subjects.API_SESSIONS_STOP,
                                {"session_id": opened["session_id"], "reason": "done"})
    assert stop["stopped"] is True, stop
    await say(system, 1, "Where were we?")

    async def woken():
        return [s for s, p in engine.prompts if "Where were we?" in p]

    (session_id,) = await system.wait_for(woken, timeout=30)
    assert session_id != opened["session_id"]
    await asyncio.sleep(1)
    assert system.hosted()["mac-mini-1"] == [session_id]
    assert sum("Where were we?" in p for _, p in engine.prompts) == 1
