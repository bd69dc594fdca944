"""Exit codes and error texts: 2 for usage, 3 when the servers cannot be reached."""

from __future__ import annotations

import json
import os
import socket

import pytest

from seedline_devtools.embedded import free_port


@pytest.fixture
def closed_port_env(tmp_path) -> dict[str, str]:
    port = free_port()
    return {"SEEDLINE_NATS_URL": f"nats://127.0.0.1:{port}", "SEEDLINE_HOME": str(tmp_path)}


# The flags every single-entry publish needs, before the one each test gets wrong.
ONE_ENTRY = ("publish", "--instance", "i", "--repo", "r", "--conversation", "s")


def test_an_empty_repo_name_is_a_usage_error(seedline):
    result = seedline("timeline", "--instance", "bd43f4de", "--repo", "")
    assert result.exit_code == 2
    assert "--repo must not be empty" in result.stderr


def test_an_unknown_kind_is_a_usage_error(seedline):
    result = seedline(*ONE_ENTRY, "--kind", "chat", "--content", "x")
    assert result.exit_code == 2
    assert "--kind 'chat' is not one of chat_user" in result.stderr


def test_content_and_content_file_together_are_a_usage_error(seedline, tmp_path):
    result = seedline(
        *ONE_ENTRY, "--kind", "system", "--content", "x", "--content-file", str(tmp_path / "x.txt")
    )
    assert result.exit_code == 2
    assert "exactly one of --content and --content-file" in result.stderr


def test_file_with_entry_flags_is_a_usage_error(seedline, tmp_path):
    result = seedline("publish", "--file", str(tmp_path / "e.jsonl"), "--repo", "r")
    assert result.exit_code == 2
    assert "leave out --repo" in result.stderr


def test_an_unparseable_at_is_a_usage_error(seedline):
    result = seedline(*ONE_ENTRY, "--kind", "system", "--content", "x", "--at", "yesterday")
    assert result.exit_code == 2
    assert "not an RFC 3339 time" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["timeline", "--instance", "bd43f4de", "--repo", "apps/chess-academy"],
        ["timeline", "--instance", "bd43f4de", "--repo", "apps/chess-academy", "--json"],
        ["brief", "show", "csess_1", "--json"],
        [
            "publish",
            "--instance",
            "i",
            "--repo",
            "r",
            "--conversation",
            "s",
            "--kind",
            "system",
            "--content",
            "x",
        ],
        ["open", "--instance", "i", "--repo", "r", "--engine", "scripted", "--node", "n"],
        ["rebuild", "timeline", "--json"],
        ["runner", "--node-id", "n"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_commands_exit_3_when_nats_is_not_running(seedline, closed_port_env, args):
    result = seedline(*args, env=closed_port_env)
    assert result.exit_code == 3, result.output
    url = closed_port_env["SEEDLINE_NATS_URL"]
    if "--json" in args:
        error = json.loads(result.stdout)["error"]
        assert error["code"] == "unavailable" and not result.stderr
        message = error["message"]
    else:
        message = result.stderr
    assert f"Cannot reach NATS at {url}." in message
    assert "`make run` (or `seedline up`), or set SEEDLINE_NATS_URL" in message


def test_the_nats_url_option_overrides_the_environment(seedline, closed_port_env):
    other = f"nats://127.0.0.1:{free_port()}"
    result = seedline(
        "--nats-url", other, "timeline", "--instance", "i", "--repo", "r", env=closed_port_env
    )
    assert result.exit_code == 3
    assert f"Cannot reach NATS at {other}." in result.stderr


@pytest.mark.servers
def test_a_read_with_no_timeline_writer_running_exits_3(seedline, nats_server, tmp_path):
    env = {"SEEDLINE_NATS_URL": nats_server.url, "SEEDLINE_HOME": str(tmp_path)}
    result = seedline("timeline", "--instance", "i", "--repo", "r", "--json", env=env)
    assert result.exit_code == 3
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "unavailable"
    assert error["message"].startswith("The timeline-writer is not answering: it is not "
                                       "running, or starting again; try again in a few seconds")


@pytest.mark.servers
def test_open_with_no_continuity_resolver_running_exits_3(seedline, nats_server, tmp_path):
    env = {"SEEDLINE_NATS_URL": nats_server.url, "SEEDLINE_HOME": str(tmp_path)}
    result = seedline(
        "open", "--instance", "i", "--repo", "r", "--engine", "scripted", "--node", "n", env=env
    )
    assert result.exit_code == 3
    assert "The continuity-resolver is not answering: it is not running" in result.stderr


@pytest.mark.servers
def test_a_service_seedline_up_is_restarting_is_told_as_starting_again(
        seedline, nats_server, tmp_path):
    """Under `seedline up` (its state file, kept by a live process) a service being started
    again is said to be that, not to need starting; so is a nats-server being restarted."""
    import os

    from seedline_devtools.embedded import free_port

    (tmp_path / "up-processes.json").write_text(json.dumps({
        "up_pid": os.getpid(), "updated_at": "2026-12-05T10:00:00Z", "processes": [
            {"name": "continuity-resolver", "state": "restarting", "pid": None},
            {"name": "nats-server", "state": "restarting", "pid": None}]}))
    env = {"SEEDLINE_NATS_URL": nats_server.url, "SEEDLINE_HOME": str(tmp_path)}
    opened = seedline("open", "--instance", "i", "--repo", "r", "--engine", "scripted",
                      "--node", "n", env=env)
    away = f"nats://127.0.0.1:{free_port()}"
    no_nats = seedline("conversations", env={**env, "SEEDLINE_NATS_URL": away})
    assert opened.exit_code == 3 and no_nats.exit_code == 3
    assert "The continuity-resolver is starting again; try again in a few seconds." in (
        opened.stderr)
    assert f"NATS at {away} is starting again; try again in a few seconds." in no_nats.stderr
    for said in (opened.stderr, no_nats.stderr):
        assert "make run" not in said and "not running" not in said
    # Running by the supervisor's word but not answering (paused, say): not "starting again".
    (tmp_path / "up-processes.json").write_text(json.dumps({
        "up_pid": os.getpid(), "updated_at": "2026-12-05T10:00:00Z", "processes": [
            {"name": "nats-server", "state": "running", "pid": os.getpid()}]}))
    silent = seedline("conversations", env={**env, "SEEDLINE_NATS_URL": away})
    assert silent.exit_code == 3
    assert (f"NATS at {away} did not answer in time, though `seedline up` here runs it; try "
            "again in a few seconds") in " ".join(silent.stderr.split())


def test_up_says_so_when_its_port_is_taken(seedline, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = seedline(
            "up",
            "--nats-port",
            str(port),
            "--monitor-port",
            str(free_port()),
            env={"SEEDLINE_HOME": str(tmp_path / "home")},
        )
    assert result.exit_code == 1
    assert f"Port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "--nats-port" in result.stderr
    assert not (tmp_path / "home").exists()


@pytest.mark.servers
def test_runner_with_an_unknown_engine_is_a_usage_error(seedline, nats_server, tmp_path):
    env = {"SEEDLINE_NATS_URL": nats_server.url, "SEEDLINE_HOME": str(tmp_path)}
    result = seedline("runner", "--node-id", "mac-mini-1", "--engine", "nope", env=env)
    assert result.exit_code == 2
    assert "Unknown engine 'nope'" in result.stderr


def test_a_second_runner_with_the_same_node_id_is_told_so_and_what_to_do(
        seedline, nats_server, tmp_path, monkeypatch):
    from seedline_runner.cli import default_state_dir
    from seedline_runner.pens import _lock_folder

    monkeypatch.setenv("SEEDLINE_HOME", str(tmp_path))
    held = _lock_folder(default_state_dir("mac-mini-1"))  # the first copy, running
    try:
        result = seedline("runner", "--node-id", "mac-mini-1", "--engine", "scripted",
                          env={"SEEDLINE_NATS_URL": nats_server.url,
                               "SEEDLINE_HOME": str(tmp_path)})
    finally:
        os.close(held)
    assert result.exit_code == 1
    assert "Another runner is using" in result.stderr and "another node id" in result.stderr
    assert "unexpected" not in result.stderr


def test_runner_with_an_acp_agent_without_its_command_is_a_usage_error(seedline, tmp_path):
    env = {"SEEDLINE_HOME": str(tmp_path)}
    result = seedline("runner", "--node-id", "mac-mini-1", "--engine", "acp:gemini",
                      "--acp", "gemini", env=env)
    assert result.exit_code == 2
    assert 'gemini="gemini --experimental-acp"' in result.stderr
    result = seedline("runner", "--node-id", "mac-mini-1", "--engine", "acp:gemini",
                      "--acp-permissions", "sometimes", env=env)
    assert result.exit_code == 2
    assert "--acp-permissions is checkout, allow, reject" in result.stderr


def test_runner_with_a_permission_setting_an_engine_does_not_know_is_a_usage_error(
        seedline, tmp_path):
    env = {"SEEDLINE_HOME": str(tmp_path)}
    result = seedline("runner", "--node-id", "mac-mini-1", "--engine", "claude",
                      "--claude-permission-mode", "yolo", env=env)
    assert result.exit_code == 2
    assert "The Claude Code permission mode is one of acceptEdits" in result.stderr
    result = seedline("runner", "--node-id", "mac-mini-1", "--engine", "codex",
                      "--codex-sandbox", "anywhere", env=env)
    assert result.exit_code == 2
    assert "The Codex sandbox is one of read-only, workspace-write" in result.stderr


def test_runner_gives_each_engine_its_permission_settings_defaults_included(
        seedline, tmp_path, monkeypatch):
    from seedline_cli import machine_link, runner_cmd

    given: dict = {}

    def run_runner(*args, **options):
        given.update(options)

    monkeypatch.setattr(machine_link.Link, "check", lambda self: None)
    monkeypatch.setattr(runner_cmd, "_run_runner_function", lambda: run_runner)
    env = {"SEEDLINE_HOME": str(tmp_path)}
    assert seedline("runner", "--node-id", "mac-mini-1", "--engine", "claude",
                    env=env).exit_code == 0
    assert (given["claude_permission_mode"], given["claude_allowed_tools"],
            given["codex_sandbox"], given["codex_approval"],
            given["acp_permission_policy"]) == (
        "acceptEdits", ("Bash",), "workspace-write", "never", "checkout")
    assert seedline("runner", "--node-id", "mac-mini-1", "--engine", "claude",
                    "--claude-allowed-tools", "Bash,Edit", "--codex-sandbox", "read-only",
                    env=env).exit_code == 0
    assert (given["claude_allowed_tools"], given["codex_sandbox"]) == (("Bash", "Edit"),
                                                                       "read-only")
