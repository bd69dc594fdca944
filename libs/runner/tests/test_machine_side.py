"""A runner machine's own side, without servers: the join line, its configuration in the
user's config folder, the one sentence for each way a connection fails, the refusals that
stop a runner, and the service files, checked by systemd's own validator where it is and
against launchd.plist(5)'s keys."""

from __future__ import annotations

import asyncio
import plistlib
import shutil
import ssl
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from seedline_runner.connection_log import REFUSALS_BEFORE_STOP, connection_callbacks
from seedline_runner.machine import config as machine_config
from seedline_runner.machine import service
from seedline_runner.machine.check import problem_of
from seedline_runner.machine.join_line import PREFIX, JoinLine, JoinLineError, decode

LINE = JoinLine(node_id="laptop-2", label="Laptop", urls=["tls://nats.example:4222"],
                user="runner-laptop-2", password="s3cret", ca="-----BEGIN CERTIFICATE-----\n")


def test_a_join_line_is_one_shell_safe_word_that_reads_back_whole():
    text = LINE.encode()
    assert text.startswith(PREFIX) and text.isprintable()
    assert not set(text) & set(" '\"\\$`\n")
    assert decode(f"  '{text}'\n") == LINE


@pytest.mark.parametrize(("text", "words"), [
    ("hello", "This is not a join line"),
    (LINE.encode()[:-9], "cut or changed"),
    (PREFIX + "e30", "lacks what a machine needs"),  # {}
])
def test_a_line_that_cannot_be_read_says_what_to_do(text, words):
    with pytest.raises(JoinLineError, match=words) as caught:
        decode(text)
    assert "seedline machines add" in str(caught.value)


def test_the_configuration_lives_in_the_users_config_folder_of_each_system(tmp_path):
    home = {"HOME": str(tmp_path)}
    assert machine_config.config_path(home, "linux") == tmp_path / ".config/seedline/runner.toml"
    assert machine_config.config_path({**home, "XDG_CONFIG_HOME": "/x"}, "linux") == \
        Path("/x/seedline/runner.toml")
    assert machine_config.config_path(home, "darwin") == \
        tmp_path / "Library/Application Support/Seedline/runner.toml"
    assert machine_config.config_path({**home, "SEEDLINE_RUNNER_CONFIG": "/y/r.toml"},
                                      "darwin") == Path("/y/r.toml")


def test_a_joined_configuration_is_written_for_the_user_alone_and_reads_back(tmp_path):
    path = tmp_path / "seedline" / "runner.toml"
    config = machine_config.from_join_line(LINE, path, ["claude", "scripted"], "/src")
    machine_config.save(config, path)
    assert machine_config.load(path) == config
    assert config.ca_file == str(path.parent / "ca.pem")
    assert Path(config.ca_file).read_text() == LINE.ca
    for written in (path, Path(config.ca_file)):
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert machine_config.load(tmp_path / "never.toml") is None
    path.write_text("node_id = ")
    with pytest.raises(machine_config.ConfigError, match="join again"):
        machine_config.load(path)


CONFIG = machine_config.MachineConfig(
    node_id="laptop-2", label="Laptop", urls=["tls://nats.example:4222"],
    user="runner-laptop-2", password="x", ca_file="/c/ca.pem")


def _verify_error(message: str) -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, f"certificate verify failed: {message}")
    error.verify_message = message
    return error


@pytest.mark.parametrize(("errors", "kind", "words"), [
    ([Exception("nats: 'Authorization Violation'")], "credentials",
     "refused this machine's credentials (user runner-laptop-2)"),
    ([_verify_error("certificate has expired")], "clock", "this machine's clock"),
    ([_verify_error("certificate is not yet valid")], "clock", "this machine's clock"),
    ([_verify_error("self-signed certificate in certificate chain")], "ca",
     "the CA of this machine's configuration (/c/ca.pem) did not sign"),
    ([_verify_error("Hostname mismatch, certificate is not valid for 'x'")], "tls",
     "not made out for that address"),
    ([ConnectionRefusedError(111, "refused"), TimeoutError()], "unreachable",
     "Cannot reach NATS at tls://nats.example:4222 from this machine"),
])
def test_each_way_a_connection_fails_is_one_sentence_naming_its_cause(errors, kind, words):
    problem = problem_of(CONFIG, errors)
    assert problem.kind == kind and words in problem.sentence
    assert problem.sentence.endswith(".") and ". " not in problem.sentence


async def test_a_runner_stops_after_its_credentials_are_refused_again_and_again():
    stopped = []
    callbacks = connection_callbacks("n", on_refused=lambda: stopped.append(True))
    refused = Exception("nats: 'Authorization Violation'")
    for _ in range(REFUSALS_BEFORE_STOP - 1):
        await callbacks["error_cb"](refused)
    await callbacks["error_cb"](ConnectionRefusedError())  # a server away: not a refusal
    for _ in range(REFUSALS_BEFORE_STOP - 1):
        await callbacks["error_cb"](refused)
    assert stopped == []
    await callbacks["reconnected_cb"]()
    for _ in range(REFUSALS_BEFORE_STOP):
        await callbacks["error_cb"](refused)
    assert stopped == [True]


def spec(tmp_path: Path) -> service.ServiceSpec:
    executable = Path(sys.executable).parent / "seedline"  # a real one: verify checks it
    return service.ServiceSpec(str(executable), tmp_path / "my config" / "runner.toml",
                               "laptop-2", "/usr/local/bin:/usr/bin:/bin")


def test_the_systemd_unit_restarts_the_runner_but_not_once_it_was_refused(tmp_path):
    unit = service.systemd_unit(spec(tmp_path))
    assert f"ExecStart={spec(tmp_path).executable} runner" in unit
    assert f'Environment="SEEDLINE_RUNNER_CONFIG={tmp_path}/my config/runner.toml"' in unit
    assert "Restart=always" in unit and "RestartPreventExitStatus=78" in unit
    assert "WantedBy=default.target" in unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze missing")
def test_systemd_analyze_verify_finds_nothing_to_say_of_the_unit(tmp_path):
    path = tmp_path / service.UNIT_NAME
    path.write_text(service.systemd_unit(spec(tmp_path)))
    done = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr


# launchd.plist(5): the keys this agent uses, and their types.
LAUNCHD_KEYS = {"Label": str, "ProgramArguments": list, "EnvironmentVariables": dict,
                "RunAtLoad": bool, "KeepAlive": (bool, dict), "ThrottleInterval": int,
                "ExitTimeOut": int, "ProcessType": str, "StandardOutPath": str,
                "StandardErrorPath": str}


def test_the_launchd_agent_holds_only_documented_keys_of_their_types(tmp_path):
    text = service.launchd_plist(spec(tmp_path), tmp_path)
    agent = plistlib.loads(text)
    assert set(agent) <= set(LAUNCHD_KEYS)
    for key, value in agent.items():
        assert isinstance(value, LAUNCHD_KEYS[key]), key
    assert agent["ProgramArguments"] == [spec(tmp_path).executable, "runner"]
    assert agent["ProcessType"] in ("Background", "Standard", "Adaptive", "Interactive")
    assert agent["RunAtLoad"] is True and agent["KeepAlive"] is True
    if shutil.which("plutil"):
        path = tmp_path / f"{service.AGENT_LABEL}.plist"
        path.write_bytes(text)
        assert subprocess.run(["plutil", "-lint", str(path)], timeout=60).returncode == 0


@pytest.mark.parametrize("system", ["linux", "darwin"])
def test_install_writes_the_file_and_starts_it_uninstall_stops_and_removes_it(tmp_path, system):
    ran: list[list[str]] = []

    def run(command):
        ran.append(list(command))
        return subprocess.CompletedProcess(command, 0, "", "")

    env = {"HOME": str(tmp_path)}
    done = service.install(spec(tmp_path), system, tmp_path, run, env)
    assert done.path == service.service_path(system, tmp_path, env) and done.path.exists()
    assert done.failed == []
    tool = "launchctl" if system == "darwin" else "systemctl"
    assert ran and all(command[0] == tool for command in ran)
    ran.clear()
    gone = service.uninstall(system, tmp_path, run, env)
    assert gone is not None and not done.path.exists() and ran
    assert service.uninstall(system, tmp_path, run, env) is None


def test_an_install_where_the_service_manager_is_missing_says_which_command_failed(tmp_path):
    def run(command):
        raise FileNotFoundError(command[0])

    done = service.install(spec(tmp_path), "linux", tmp_path, run, {"HOME": str(tmp_path)})
    assert done.path.exists() and done.failed[0][0][0] == "systemctl"



async def test_a_runner_closing_its_own_connection_does_not_say_it_lost_nats():
    from structlog.testing import capture_logs

    closing = False
    callbacks = connection_callbacks("n", letting_go=lambda: closing)
    with capture_logs() as logged:
        await callbacks["disconnected_cb"]()  # the server went: said
        closing = True
        await callbacks["disconnected_cb"]()  # the runner let go of it (a stop): not said
    assert [entry["event"] for entry in logged] == ["nats_disconnected"]


class SwallowsOneCancel:
    """A runner whose start loses the cancellation that lands in it, as Python 3.11's
    wait_for does when the awaited reply arrives at the same moment (a stop signal right
    after the first presence put did); then it serves until told to stop."""

    node_id = "n"

    def __init__(self) -> None:
        self.starting = asyncio.Event()
        self.stopped = False

    async def run(self, stopping: asyncio.Event | None = None) -> None:
        from seedline_runner.runner import Runner

        self.start = self._start
        self.stop = self._stop
        await Runner.run(self, stopping)

    async def _start(self) -> None:
        self.starting.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            pass  # lost, as wait_for loses it

    async def _stop(self) -> None:
        self.stopped = True


@pytest.mark.parametrize("how", ["signal", "refused"])
async def test_a_runner_stops_when_the_cancel_of_its_stop_is_lost_while_it_starts(how):
    import os
    import signal

    from seedline_runner.cli import CredentialsRefused, _serve_until_stopped

    runner, refused = SwallowsOneCancel(), asyncio.Event()
    serving = asyncio.ensure_future(
        _serve_until_stopped(runner, stop_signals=how == "signal", refused=refused))
    await asyncio.wait_for(runner.starting.wait(), 5)
    if how == "signal":
        os.kill(os.getpid(), signal.SIGTERM)  # handled by the loop while the runner serves
    else:
        refused.set()
    # Waited on without cancelling it (a cancel from outside would end it either way).
    done, _ = await asyncio.wait({serving}, timeout=5)
    assert serving in done, "the runner served on after it was told to stop"
    if how == "refused":
        with pytest.raises(CredentialsRefused):
            serving.result()
    else:
        serving.result()
    assert runner.stopped  # a clean stop
