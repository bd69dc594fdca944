"""`seedline notices --follow` as a person runs it (its own process, real nats-server), and
how `seedline stop` reads the 1.1 stop reply."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import nats
import pytest

from seedline_contracts import subjects
from seedline_contracts.codec import encode
from seedline_contracts.sessions import NotWokenNotification, StoppedIdleNotification
from seedline_core.notices import wording_violations

pytestmark = pytest.mark.servers

AT = "2026-12-01T10:00:00Z"


def follow(url: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "seedline_cli", "notices", "--instance", "bd43f4de", "--follow",
         *args],
        env={**os.environ, "SEEDLINE_NATS_URL": url, "PYTHONUNBUFFERED": "1",
             "COLUMNS": "200"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    ready = proc.stderr.readline()  # printed once its subscription is in place
    assert "Following the notices of instance bd43f4de" in ready, ready
    return proc


def send(url: str, *messages: tuple[str, bytes]) -> None:
    async def publish() -> None:
        nc = await nats.connect(url)
        for subject, body in messages:
            await nc.publish(subject, body)
        await nc.flush()
        await nc.close()

    asyncio.run(publish())


def notices_for(instance: str):
    return [
        (subjects.notify_subject(instance), encode(StoppedIdleNotification(
            session_id="csess_1", text=f"{instance}: stopped after 6 hours idle.", at=AT))),
        (subjects.notify_subject(instance), encode(NotWokenNotification(
            repo="apps/new", text=f"{instance}: no machine has worked on apps/new yet.", at=AT))),
    ]


def test_follow_prints_each_notice_of_the_instance_as_a_json_line(nats_server):
    proc = follow(nats_server.url, "--json", "--count", "2")
    try:
        send(nats_server.url, *notices_for("someone-else"), *notices_for("bd43f4de"))
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(n["kind"], n["text"].split(":")[0]) for n in lines] == [
        ("stopped_idle", "bd43f4de"), ("not_woken", "bd43f4de")]
    assert lines[0]["session_id"] == "csess_1" and lines[1]["repo"] == "apps/new"


def test_follow_prints_notices_for_a_person_and_ctrl_c_ends_it_cleanly(nats_server):
    proc = follow(nats_server.url)
    try:
        send(nats_server.url, notices_for("bd43f4de")[0])
        first = proc.stdout.readline()
        proc.send_signal(2)  # SIGINT, as Ctrl-C
        rest, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert f"{AT}  stopped_idle  csess_1  bd43f4de: stopped after 6 hours idle." in first
    assert "Traceback" not in err and not rest
    assert not wording_violations(first + err)


@pytest.fixture
def stop_answers_not_running(nats_server):
    """A responder on the stop subject that replies as CONTRACT 4.1 says for a conversation
    that is not live. It stands in for a 1.1 runner-gateway: the command under test is the
    CLI's reading of that reply."""
    import threading

    ready = threading.Event()
    done: asyncio.Event | None = None
    loop: asyncio.AbstractEventLoop | None = None

    async def serve() -> None:
        nonlocal done, loop
        loop, done = asyncio.get_running_loop(), asyncio.Event()
        nc = await nats.connect(nats_server.url)

        async def reply(msg) -> None:
            await msg.respond(b'{"ok": true, "stopped": false}')

        await nc.subscribe(subjects.API_SESSIONS_STOP, cb=reply)
        await nc.flush()
        ready.set()
        await done.wait()
        await nc.close()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield {"SEEDLINE_NATS_URL": nats_server.url}
    loop.call_soon_threadsafe(done.set)
    thread.join(10)


def test_stop_says_plainly_when_the_conversation_was_not_running(seedline,
                                                                  stop_answers_not_running):
    result = seedline("stop", "csess_1", env=stop_answers_not_running)
    assert result.exit_code == 0, result.output
    assert "Conversation csess_1 was not running, so there was nothing to stop." in result.stdout
    assert "Stopped" not in result.stdout
    as_json = json.loads(seedline("stop", "csess_1", "--json", env=stop_answers_not_running).stdout)
    assert as_json["ok"] is True and as_json["stopped"] is False


def test_kept_notices_are_printed_after_an_id_or_from_a_time(seedline, nats_server):
    from seedline_contracts.streams import NOTICES
    from seedline_platform.natsio import ensure_streams

    async def keep_and_send() -> None:
        nc = await nats.connect(nats_server.url)
        await ensure_streams(nc.jetstream(), [NOTICES])
        await nc.close()

    asyncio.run(keep_and_send())
    # Sent while nobody listened: kept all the same.
    send(nats_server.url, *notices_for("bd43f4de"), *notices_for("someone-else"),
         notices_for("bd43f4de")[0])
    env = {"SEEDLINE_NATS_URL": nats_server.url}
    every = seedline("notices", "--instance", "bd43f4de", "--json", env=env)
    assert every.exit_code == 0, every.output
    kept = [json.loads(line) for line in every.stdout.splitlines()]
    assert [n["kind"] for n in kept] == ["stopped_idle", "not_woken", "stopped_idle"]
    assert [n["id"] for n in kept] == sorted(n["id"] for n in kept)
    after = seedline("notices", "--instance", "bd43f4de", "--since", str(kept[0]["id"]),
                     "--json", env=env)
    assert [json.loads(line)["id"] for line in after.stdout.splitlines()] == [
        kept[1]["id"], kept[2]["id"]]
    since = seedline("notices", "--instance", "bd43f4de", "--since", "2000-01-01T00:00:00Z",
                     env=env)
    assert since.exit_code == 0 and f"#{kept[0]['id']}  {AT}  stopped_idle" in since.stdout
    bad = seedline("notices", "--instance", "bd43f4de", "--since", "yesterday", env=env)
    assert bad.exit_code != 0 and "RFC 3339" in bad.output
    assert not wording_violations(every.stdout + since.stdout + bad.output)
