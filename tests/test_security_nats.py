"""Least privilege on NATS: a user per service and per runner machine, proven against a
real nats-server.

The server runs the users of seedline_devtools.nats_auth (the same generator that
writes deploy/nats-secure.conf). A runner may reach its own part of the runner
protocol and nothing else; a service publishes only the stream subjects it owns and
listens only to what it answers; the positive test runs the four services, each under
its own user, and the real Runner under its user. See RELIABILITY.md, Security.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import nats
import pytest
from nats.js import api as js_api

from seedline_contracts import subjects
from seedline_continuity_resolver.app import create_app as create_resolver
from seedline_devtools import nats_auth
from seedline_platform import natsio
from seedline_platform.replay import newest_values
from seedline_devtools.embedded import NatsProcess, nats_server_binary, start_nats
from seedline_platform.settings import Settings
from seedline_devtools.testing import request, running
from seedline_runner.checkouts import Checkouts
from seedline_runner.engines.scripted import ScriptedEngine
from seedline_runner.runner import Runner
from seedline_runner_gateway.app import create_app as create_gateway
from seedline_seed_composer.app import create_app as create_composer
from seedline_timeline_writer.app import create_app as create_writer

pytestmark = pytest.mark.servers

REPO_ROOT = Path(__file__).resolve().parents[1]
A = "mac-mini-1"
B = "linux-box.2"  # a dot: its subjects and key are escaped
SERVICES = nats_auth.services()
PASSWORDS = {"admin": "admin-secret", A: "secret-of-a", B: "secret-of-b",
             **{service: f"secret-of-{service}" for service in SERVICES}}
DENIED = 0.3  # seconds to wait for an answer that a refused request never gets


@dataclass
class Violations:
    """A connection's error callback: the permission violations the server reported."""

    seen: list[str] = field(default_factory=list)

    async def record(self, error: Exception) -> None:
        self.seen.append(str(error).lower())

    def publish(self) -> list[str]:
        return [_quoted(s) for s in self.seen if "violation for publish" in s]

    def subscribe(self) -> list[str]:
        return [_quoted(s) for s in self.seen if "violation for subscription" in s]


def _quoted(text: str) -> str:
    return text.split('"')[1]


@dataclass
class SecureNats:
    process: NatsProcess

    def service_url(self, service: str) -> str:
        user = nats_auth.service_user_name(service)
        return f"nats://{user}:{PASSWORDS[service]}@127.0.0.1:{self.process.port}"

    async def services(self, violations: Violations | None = None):
        """The operator's connection (the admin user), to set up and to watch."""
        return await nats.connect(
            f"nats://{nats_auth.ADMIN_USER}:{PASSWORDS['admin']}@127.0.0.1:{self.process.port}",
            error_cb=(violations or Violations()).record)

    async def service(self, service: str, violations: Violations | None = None):
        """Connected the way a service is: its own user and its own inbox prefix."""
        return await nats.connect(
            self.service_url(service), inbox_prefix=subjects.service_inbox_prefix(service),
            error_cb=(violations or Violations()).record)

    async def runner(self, node_id: str, violations: Violations | None = None):
        """Connected the way a runner must be: its own user and its own inbox prefix."""
        return await nats.connect(
            self.process.url,
            user=nats_auth.runner_user_name(node_id),
            password=PASSWORDS[node_id],
            inbox_prefix=subjects.runner_inbox_prefix(node_id),
            error_cb=(violations or Violations()).record,
            name=f"seedline-runner:{node_id}",
        )


@pytest.fixture
def secure_nats(tmp_path: Path):
    block = nats_auth.authorization_block(
        {service: PASSWORDS[service] for service in SERVICES},
        {A: PASSWORDS[A], B: PASSWORDS[B]}, admin_password=PASSWORDS["admin"])
    process = start_nats(tmp_path / "nats", extra=block)
    try:
        yield SecureNats(process)
    finally:
        process.stop()


@pytest.fixture
async def connections(secure_nats):
    """Services, runner A (watched for violations) and runner B; streams and bucket created."""
    async with AsyncExitStack() as stack:
        svc = await secure_nats.services()
        stack.push_async_callback(svc.close)
        js = svc.jetstream()
        await natsio.ensure_streams(js)
        await natsio.ensure_runners_bucket(js)
        a_violations = Violations()
        a = await secure_nats.runner(A, a_violations)
        stack.push_async_callback(a.close)
        b = await secure_nats.runner(B)
        stack.push_async_callback(b.close)
        yield svc, a, a_violations, b


async def _refused(*calls) -> None:
    """Every call fails: the server dropped the request, so no answer ever came. (Some
    nats.py calls, delete_msg say, ignore the context's timeout and wait 5 s.)"""
    results = await asyncio.gather(*(asyncio.wait_for(c, DENIED + 0.5) for c in calls),
                                   return_exceptions=True)
    for result in results:
        assert isinstance(result, Exception), f"a call that should be refused answered: {result!r}"


def test_the_deploy_config_is_the_generated_one_and_nats_server_accepts_it():
    path = REPO_ROOT / "deploy" / "nats-secure.conf"
    assert path.read_text() == nats_auth.deploy_config()
    users = path.parent / nats_auth.USERS_FILE
    assert users.read_text() == nats_auth.users_file(
        {n: nats_auth.password_variable(n) for n in nats_auth.EXAMPLE_NODES})
    passwords = {"SEEDLINE_NATS_ADMIN_PASSWORD": "a"}
    passwords.update({nats_auth.password_variable(n).name: n for n in nats_auth.EXAMPLE_NODES})
    passwords.update({nats_auth.service_password_variable(s).name: s for s in SERVICES})
    base = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_NATS_")}
    ok = subprocess.run([nats_server_binary(), "-t", "-c", str(path)], env=base | passwords,
                        capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # Fails closed: a password missing from the environment stops the server from starting.
    missing = subprocess.run([nats_server_binary(), "-t", "-c", str(path)], env=base,
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode != 0 and "SEEDLINE_NATS_" in missing.stdout + missing.stderr
    assert "SEEDLINE_NATS_TIMELINE_WRITER_PASSWORD" in users.read_text()


def test_a_runners_permissions_name_only_its_own_escaped_subjects():
    perms = nats_auth.runner_permissions("build box/*>")
    token = "build~20box~2F~2A~3E"
    key = "build=20box=2F=2A=3E"
    assert perms.subscribe_allow == (
        f"seedline.runner.{token}.launch", f"seedline.runner.{token}.turn",
        f"seedline.runner.{token}.stop", f"_INBOX_{token}.>",
    )
    own = (
        f"seedline.ingest.runner.{token}", f"seedline.ingest.runner.{token}.*",
        f"seedline.runner.{token}.events",
        f"$KV.seedline_runners.{key}", "$JS.API.STREAM.INFO.KV_seedline_runners",
        f"$JS.API.DIRECT.GET.KV_seedline_runners.$KV.seedline_runners.{key}",
    )
    assert perms.publish_allow[:len(own)] == own
    # Beyond those, only the object store of saved checkouts, whose objects are sealed
    # with keys only a conversation's own launch gives a machine (CONTRACT.md 6).
    assert all("seedline_worktrees" in subject or subject == "$JS.API.STREAM.NAMES"
               for subject in perms.publish_allow[len(own):])
    assert perms.allow_responses
    # No wildcard anywhere but the tail of its own inbox, and the instance token of its
    # own ingest subject (the writer checks the entry against its launches).
    for subject in own[2:] + perms.subscribe_allow[:-1]:
        assert "*" not in subject.split(".") and ">" not in subject.split(".")


async def test_connections_without_a_known_user_and_password_are_refused(secure_nats):
    url = secure_nats.process.url
    for credentials in ({}, {"user": nats_auth.service_user_name("timeline-writer"),
                             "password": "wrong"},
                        {"user": nats_auth.runner_user_name(A), "password": PASSWORDS[B]}):
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(url, allow_reconnect=False, connect_timeout=2,
                               error_cb=Violations().record, **credentials)


async def test_a_runner_cannot_listen_to_another_runners_launches(connections):
    svc, a, violations, b = connections
    overheard = []

    async def on_b_launch(msg):
        await msg.respond(b'{"accepted": true}')

    await b.subscribe(subjects.runner_subject(B, "launch"), cb=on_b_launch)
    await b.flush()

    async def eavesdrop(msg):
        overheard.append(msg.subject)

    attempts = [subjects.runner_subject(B, "launch"), subjects.runner_subject(B, "turn"),
                "seedline.runner.*.launch", "seedline.runner.>", "seedline.>", ">"]
    for subject in attempts:
        await a.subscribe(subject, cb=eavesdrop)
    await a.flush()
    launch = {"session_id": "csess_b", "instance_id": "i", "repo": "r", "engine": "scripted",
              "resume": None, "seed": {"text": "the brief of B's conversation", "sha256": "x"},
              "instruction": "secret instruction"}
    reply = await svc.request(subjects.runner_subject(B, "launch"), json.dumps(launch).encode(), timeout=5)
    assert json.loads(reply.data) == {"accepted": True}  # B got its launch
    await a.flush()
    await asyncio.sleep(0.2)
    assert overheard == []
    assert violations.subscribe() == [s.lower() for s in attempts]


async def test_a_runner_cannot_read_the_timeline_sessions_or_briefs(connections):
    svc, a, violations, b = connections
    js = svc.jetstream()
    secret = b'{"content": "a private conversation"}'
    await js.publish("seedline.timeline.i.r.s.chat_user", secret)
    await js.publish("seedline.session.s.opened", b'{"type": "opened"}')
    overheard = []

    async def eavesdrop(msg):
        overheard.append(msg.data)

    for subject in (subjects.TIMELINE_ALL, subjects.SESSION_EVENTS_ALL, "seedline.notify.>"):
        await a.subscribe(subject, cb=eavesdrop)
    ajs = a.jetstream(timeout=DENIED)
    consumer = js_api.ConsumerConfig(durable_name="eavesdropper", ack_policy=js_api.AckPolicy.EXPLICIT)
    await _refused(
        ajs.stream_info(subjects.TIMELINE_STREAM),
        ajs.add_consumer(subjects.TIMELINE_STREAM, consumer),
        ajs.add_consumer(subjects.TIMELINE_STREAM, js_api.ConsumerConfig(
            ack_policy=js_api.AckPolicy.NONE, deliver_subject=subjects.runner_inbox_prefix(A) + ".tap")),
        ajs.pull_subscribe(subjects.TIMELINE_ALL, durable="eavesdropper", stream=subjects.TIMELINE_STREAM),
        ajs.get_msg(subjects.TIMELINE_STREAM, seq=1),
        ajs.get_msg(subjects.TIMELINE_STREAM, seq=1, direct=True),
        ajs.get_msg(subjects.SESSIONS_STREAM, seq=1, direct=True),
        ajs.streams_info(),
        a.request(subjects.API_TIMELINE_READ, b'{"instance_id": "i", "repo": "r"}', timeout=DENIED),
        a.request(subjects.API_BRIEFS_GET, b'{"session_id": "s"}', timeout=DENIED),
        a.request(subjects.API_SESSIONS_OPEN, b'{"instance_id": "i", "repo": "r"}', timeout=DENIED),
    )
    await js.publish("seedline.timeline.i.r.s.chat_assistant", secret)
    await a.flush()
    await asyncio.sleep(0.2)
    assert overheard == []
    assert len(violations.subscribe()) == 3
    refused = violations.publish()
    for api in ("$js.api.stream.info.seedline_timeline", "$js.api.consumer.create.seedline_timeline",
                "$js.api.consumer.durable.create.seedline_timeline",
                "$js.api.stream.msg.get.seedline_timeline", "$js.api.direct.get.seedline_timeline",
                "$js.api.direct.get.seedline_sessions", "$js.api.stream.list",
                "seedline.api.timeline.read", "seedline.api.briefs.get", "seedline.api.sessions.open"):
        assert any(r.startswith(api) for r in refused), (api, refused)


async def test_a_runner_cannot_forge_platform_or_other_runners_traffic(connections):
    svc, a, violations, b = connections
    heard = []

    async def listen(msg):
        heard.append(msg.subject)

    await svc.subscribe("seedline.>", cb=listen)
    await svc.flush()
    forged = [
        subjects.runner_subject(B, "events"),  # B's engine_bound / exited
        subjects.runner_subject(B, "launch"),
        "seedline.timeline.i.r.s.chat_user",  # past the writer, straight into the truth
        "seedline.session.s.opened",
        "seedline.rejected.timeline",
        "seedline.notify.i",
        "$JS.API.STREAM.CREATE.EVIL",
        subjects.INGEST_TIMELINE,  # the trusted producers' subject
        subjects.ingest_runner_subject(B),  # in B's name
    ]
    for subject in forged:
        await a.publish(subject, b"{}")
    await a.flush()
    await svc.flush()
    await asyncio.sleep(0.2)
    assert heard == []
    assert violations.publish() == [s.lower() for s in forged]


async def test_a_runner_cannot_redirect_replies_into_another_runners_inbox(connections):
    svc, a, violations, b = connections
    bjs = b.jetstream()
    await bjs.key_value(subjects.RUNNERS_BUCKET)  # B now listens on _INBOX_<B>.<random>.*
    b_before, svc_before = b.stats["in_msgs"], svc.stats["in_msgs"]
    b_inbox = subjects.runner_inbox_prefix(B)
    # A cannot listen anywhere it could learn B's (or the services') inbox.
    for subject in (f"{b_inbox}.>", "_INBOX.>", "*.>", ">"):
        await a.subscribe(subject)
    # nats-server does not check reply subjects, so A tries every way to point an
    # answer at B: a JetStream ack, an API answer, and its own events.
    replies = [f"{b_inbox}.x.y", f"{b_inbox}.*.*", f"{b_inbox}.>", b_inbox,
               f"{b_inbox}.{'A' * 22}.{'B' * 26}", "_INBOX.x.y", "_INBOX.*.*"]
    for reply in replies:
        await a.publish(subjects.INGEST_TIMELINE, b"{}", reply=reply)
        await a.publish(f"$JS.API.STREAM.INFO.{nats_auth.KV_STREAM}", b"", reply=reply)
        await a.publish(subjects.runner_subject(A, "events"), b"{}", reply=reply)
    await a.flush()
    await asyncio.sleep(0.3)
    assert b.stats["in_msgs"] == b_before and svc.stats["in_msgs"] == svc_before
    assert len(violations.subscribe()) == 4
    # B's own requests still get their own answers.
    assert (await bjs.key_value(subjects.RUNNERS_BUCKET))._name == subjects.RUNNERS_BUCKET


async def test_a_runner_puts_and_deletes_only_its_own_presence(connections):
    svc, a, violations, b = connections
    bkv = await b.jetstream().key_value(subjects.RUNNERS_BUCKET)
    b_key = subjects.presence_key(B)
    b_revision = await bkv.put(b_key, b'{"node_id": "linux-box.2", "label": "B"}')
    akv = await a.jetstream().key_value(subjects.RUNNERS_BUCKET)
    await akv.put(subjects.presence_key(A), b'{"node_id": "mac-mini-1"}')  # its own: fine
    ajs = a.jetstream(timeout=DENIED)
    denied_kv = await ajs.key_value(subjects.RUNNERS_BUCKET)
    await _refused(
        denied_kv.put(b_key, b'{"node_id": "linux-box.2", "label": "impostor"}'),
        denied_kv.delete(b_key),
        denied_kv.get(b_key),
        a.request(f"$JS.API.DIRECT.GET.{nats_auth.KV_STREAM}.$KV.{subjects.RUNNERS_BUCKET}.{b_key}",
                  b"", timeout=DENIED),
        denied_kv.keys(),
        denied_kv.watchall(),
        ajs.delete_key_value(subjects.RUNNERS_BUCKET),
    )
    await akv.delete(subjects.presence_key(A))  # its own: fine
    await a.flush()
    skv = await svc.jetstream().key_value(subjects.RUNNERS_BUCKET)
    entry = await skv.get(b_key)
    assert entry.revision == b_revision and b"impostor" not in entry.value
    refused = violations.publish()
    assert f"$kv.seedline_runners.{b_key.lower()}" in refused
    assert not any(r.endswith(subjects.presence_key(A).lower()) for r in refused)


async def test_on_a_direct_get_bucket_a_runner_reads_only_its_own_presence(secure_nats):
    # The services' bucket has no direct get today, so reads go through
    # STREAM.MSG.GET, whose body names the key and so is refused to every runner.
    # With direct get on, the key is in the subject and a runner may read its own.
    svc = await secure_nats.services()
    violations = Violations()
    a = await secure_nats.runner(A, violations)
    try:
        skv = await svc.jetstream().create_key_value(js_api.KeyValueConfig(
            bucket=subjects.RUNNERS_BUCKET, history=1, ttl=subjects.RUNNERS_TTL_SECONDS, direct=True))
        await skv.put(subjects.presence_key(B), b"B")
        akv = await a.jetstream().key_value(subjects.RUNNERS_BUCKET)
        await akv.put(subjects.presence_key(A), b"A")
        assert (await akv.get(subjects.presence_key(A))).value == b"A"
        denied = await a.jetstream(timeout=DENIED).key_value(subjects.RUNNERS_BUCKET)
        await _refused(denied.get(subjects.presence_key(B)))
        await a.flush()
        assert violations.publish() == [
            f"$js.api.direct.get.kv_seedline_runners.$kv.seedline_runners.{subjects.presence_key(B).lower()}"]
    finally:
        await a.close()
        await svc.close()


async def test_no_service_can_delete_or_purge_a_stream(secure_nats, connections):
    svc, a, violations, b = connections
    await svc.jetstream().publish("seedline.timeline.i.r.s.chat_user", b"{}")
    for service in SERVICES:
        nc = await secure_nats.service(service)
        js = nc.jetstream(timeout=DENIED)
        await _refused(
            js.delete_stream(subjects.TIMELINE_STREAM),
            js.purge_stream(subjects.SESSIONS_STREAM),
            js.delete_msg(subjects.TIMELINE_STREAM, 1),
            js.update_stream(nats_js_config(subjects.TIMELINE_STREAM)),
        )
        if service != "timeline-writer":
            # Only the writer, answering an operator's forget, removes an instance's plain
            # text from the notices, ingest and rejected streams.
            await _refused(js.delete_msg(subjects.REJECTED_STREAM, 1),
                           js.purge_stream(subjects.NOTICES_STREAM, subject="seedline.notify.x"))
        await nc.close()
    info = await svc.jetstream().stream_info(subjects.TIMELINE_STREAM)
    assert info.state.messages == 1


def nats_js_config(name: str) -> js_api.StreamConfig:
    return js_api.StreamConfig(name=name, subjects=[subjects.TIMELINE_ALL], max_msgs=1)


async def test_a_runner_under_its_own_user_completes_a_briefed_open_and_a_turn(
    secure_nats, database_url, tmp_path
):
    env = {
        "SEEDLINE_NATS_MONITOR_URL": secure_nats.process.monitor_url,
        "SEEDLINE_DATABASE_URL": database_url,
        "SEEDLINE_HOME": str(tmp_path / "home"),
        "SEEDLINE_STRICT_DURABILITY": "1",
        "SEEDLINE_LAUNCH_TIMEOUT_SECONDS": "3",
        "SEEDLINE_OPEN_TIMEOUT_SECONDS": "10",
        "SEEDLINE_HTTP_PORT": "0",
    }
    service_violations = Violations()
    a_violations = Violations()
    async with AsyncExitStack() as stack:
        for service, create in (("timeline-writer", create_writer),
                                ("continuity-resolver", create_resolver),
                                ("seed-composer", create_composer),
                                ("runner-gateway", create_gateway)):
            own = Settings.from_env({**env, "SEEDLINE_NATS_URL": secure_nats.service_url(service)})
            await stack.enter_async_context(running(create(own)))
        svc = await secure_nats.services(service_violations)
        stack.push_async_callback(svc.close)
        a = await secure_nats.runner(A, a_violations)
        stack.push_async_callback(a.close)
        engine = ScriptedEngine()
        mac, linux = two_clones(tmp_path, "apps/chess-academy")
        runner = Runner(a, A, "Mac mini", {"scripted": engine}, presence_interval=1.0,
                        checkouts=Checkouts(repos_dir=mac))
        await runner.start()
        stack.push_async_callback(runner.stop)  # a no-op once stopped below
        base = {"instance_id": "bd43f4de", "repo": "apps/chess-academy"}
        for n in range(1, 4):
            reply = await request(svc, subjects.API_TIMELINE_APPEND, {
                **base, "entry_id": f"e-{n}", "session_id": "csess_old", "kind": "chat_assistant",
                "content": f"entry number {n}", "at": "2026-08-17T10:00:00Z", "engine": "scripted"})
            assert reply["ok"], reply
        opened = await request(svc, subjects.API_SESSIONS_OPEN, {
            **base, "engine": "scripted", "node_id": A, "instruction": "What were we doing?"}, timeout=20)
        assert opened["ok"], opened
        assert opened["outcome"] == "briefed" and opened["seeded"] is True and opened["brief"]["rows"] == 3
        brief = await request(svc, subjects.API_BRIEFS_GET, {"session_id": opened["session_id"]})
        assert hashlib.sha256(brief["text"].encode()).hexdigest() == opened["brief"]["sha256"]
        # A person's message reaches the machine as a turn (turn subject, reply allowed).
        await svc.jetstream().publish(subjects.INGEST_TIMELINE, json.dumps({
            **base, "entry_id": "user-1", "session_id": opened["session_id"], "kind": "chat_user",
            "content": "and castling?"}).encode(), headers={"Nats-Msg-Id": "user-1"})

        async def answers():  # the engine's replies went through ingest (JetStream publish)
            rows = await request(svc, subjects.API_TIMELINE_READ, {**base, "session_id": opened["session_id"]})
            found = [r["content"] for r in rows["entries"] if r["kind"] == "chat_assistant"]
            return found if len(found) >= 2 else None

        found = await _wait_for(answers)
        assert f"seed sha256 {opened['brief']['sha256']}" in found[0]
        assert brief["text"] in engine.prompts[0][1] and engine.prompts[1][1] == "and castling?"
        kv = await svc.jetstream().key_value(subjects.RUNNERS_BUCKET)
        assert json.loads((await kv.get(subjects.presence_key(A))).value)["node_id"] == A
        # The engine's work moves to machine B with the conversation: A saves it to the
        # object store as it stops, B reads it there, each under its own user.
        (mac / "apps/chess-academy" / "castle.py").write_text("def castle(): ...\n")
        b_violations = Violations()
        b = await secure_nats.runner(B, b_violations)
        stack.push_async_callback(b.close)
        runner_b = Runner(b, B, "Linux box", {"scripted": ScriptedEngine()},
                          presence_interval=1.0, checkouts=Checkouts(repos_dir=linux))
        await runner_b.start()
        stack.push_async_callback(runner_b.stop)
        moved = await request(svc, subjects.API_SESSIONS_RELOCATE,
                              {"session_id": opened["session_id"], "node_id": B}, timeout=20)
        assert moved["ok"] and moved["carried"]["applied"], moved
        assert (linux / "apps/chess-academy" / "castle.py").read_text() == "def castle(): ...\n"
        stopped = await request(svc, subjects.API_SESSIONS_STOP,
                                {"session_id": opened["session_id"], "reason": "done"})
        assert stopped == {"ok": True, "stopped": True}, stopped
        await runner_b.stop()
        await runner.stop()  # deletes its presence key, publishes its events

        async def offline():
            try:
                entry = await kv.get(subjects.presence_key(A))
            except Exception:
                return True
            return not entry.value

        await _wait_for(offline)
        await a.flush()
    # The whole protocol ran without one refused publish or subscription, by
    # the runner or by any service (the server logs every violation).
    assert a_violations.seen == [] and b_violations.seen == [] and service_violations.seen == []
    assert "Violation" not in secure_nats.process.log_path.read_text()


def two_clones(tmp_path: Path, repo: str) -> tuple[Path, Path]:
    """Repos folders of two machines, each with a clone of one repo."""
    git_env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}

    def git(cwd: Path, *args: str) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=git_env)

    origin, seed = tmp_path / "origin.git", tmp_path / "seed"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(seed))
    (seed / "board.py").write_text("BOARD = 8\n")
    git(seed, "add", ".")
    git(seed, "commit", "-qm", "first")
    git(seed, "push", "-q", "origin", "main")
    folders = []
    for machine in ("mac", "linux"):
        (tmp_path / machine / repo).parent.mkdir(parents=True)
        git(tmp_path, "clone", "-q", str(origin), str(tmp_path / machine / repo))
        folders.append(tmp_path / machine)
    return folders[0], folders[1]


async def _wait_for(probe, timeout: float = 15.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := await probe()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
    return value


async def test_a_service_publishes_only_what_it_owns_and_hears_only_what_it_answers(secure_nats):
    admin = await secure_nats.services()
    await natsio.ensure_streams(admin.jetstream())
    heard = []

    async def listen(msg):
        heard.append(msg.subject)

    await admin.subscribe("seedline.>", cb=listen)
    await admin.flush()
    forged = {  # each service, and what only another service may publish
        "seed-composer": ["seedline.timeline.i.r.s.chat_user", "seedline.session.s.opened",
                          subjects.INGEST_TIMELINE, "seedline.runner.a.launch"],
        "continuity-resolver": ["seedline.timeline.i.r.s.chat_user",
                                "seedline.session.s.stopped", "seedline.session.s.seed_composed"],
        "runner-gateway": ["seedline.timeline.i.r.s.chat_user", "seedline.session.s.open_requested",
                           "seedline.session.s.continuity_decided", subjects.INGEST_TIMELINE],
        "timeline-writer": ["seedline.session.s.opened", subjects.INGEST_TIMELINE,
                            "seedline.notify.i"],
        "seedline-web": ["seedline.timeline.i.r.s.chat_user", "seedline.session.s.opened"],
    }
    for service, subjects_of in forged.items():
        violations = Violations()
        nc = await secure_nats.service(service, violations)
        for subject in subjects_of:
            await nc.publish(subject, b"{}")
        listens = {"seed-composer": [subjects.API_SESSIONS_OPEN, subjects.TIMELINE_ALL],
                   "runner-gateway": [subjects.API_TIMELINE_APPEND],
                   "seedline-web": [subjects.API_BRIEFS_GET, "_INBOX.>"]}.get(service, [])
        for subject in listens:
            await nc.subscribe(subject)
        await nc.flush()
        await asyncio.sleep(0.2)
        assert violations.publish() == [s.lower() for s in subjects_of], service
        assert violations.subscribe() == [s.lower() for s in listens], service
        await nc.close()
    await asyncio.sleep(0.1)
    assert heard == []
    await admin.close()


async def test_the_web_lists_the_machines_online_under_its_own_user(secure_nats, connections):
    """The listing reads the bucket through a pull consumer: allowed to the web, and a
    runner's deleted key is not listed."""
    svc, _, _, _ = connections
    kv = await svc.jetstream().key_value(subjects.RUNNERS_BUCKET)
    for node in (A, B):
        await kv.put(subjects.presence_key(node), json.dumps({"node_id": node}).encode())
    await kv.delete(subjects.presence_key(B))
    violations = Violations()
    web = await secure_nats.service("seedline-web", violations)
    try:
        listed = [key async for key, _ in newest_values(web.jetstream(),
                                                             subjects.RUNNERS_BUCKET)]
    finally:
        await web.close()
    assert listed == [subjects.presence_key(A)]
    assert violations.seen == []
