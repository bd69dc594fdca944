"""What a person meets off the happy path, without servers: JSON errors, any input without
a traceback, help texts in plain words."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from seedline_cli.errors import reports_errors
from seedline_cli.main import app
from seedline_core.notices import wording_violations
from seedline_devtools.embedded import free_port

from typer.main import get_command

ENTRY = ("--instance", "i", "--repo", "r", "--conversation", "c", "--kind", "system")

# The smallest arguments that get each command with --json as far as talking to NATS.
REACHES_NATS = {
    "publish": ["publish", *ENTRY, "--content", "x"],
    "timeline": ["timeline", "--instance", "i", "--repo", "r"],
    "open": ["open", "--instance", "i", "--repo", "r", "--engine", "scripted", "--node", "n"],
    "brief show": ["brief", "show", "csess_1"],
    "conversations": ["conversations"],
    "sessions": ["sessions"],
    "relocate": ["relocate", "csess_1", "--node", "n"],
    "stop": ["stop", "csess_1"],
    "runners": ["runners"],
    "status": ["status"],
    "rejected": ["rejected"],
    "rejected show": ["rejected", "show", "1"],
    "notices": ["notices", "--instance", "i", "--follow"],
    "rebuild timeline": ["rebuild", "timeline"],
    "rebuild conversations": ["rebuild", "conversations"],
}
MINE = {"seedline_cli." + m for m in (
    "publish", "timeline_cmd", "conversations", "conversations_cmd", "relocate_cmd", "stop_cmd",
    "runners_cmd", "status_cmd", "rejected_cmd", "notices_cmd", "rebuild_cmd",
)}


def commands(group=None, path=()):
    """(path, command) for every command and group of `seedline`, hidden ones too."""
    group = group or get_command(app)
    for name, command in group.commands.items():
        yield (*path, name), command
        if hasattr(command, "commands"):
            yield from commands(command, (*path, name))


def has_json(command) -> bool:
    return any("--json" in getattr(p, "opts", ()) for p in command.params)


@pytest.fixture
def closed(tmp_path) -> dict[str, str]:
    return {"SEEDLINE_NATS_URL": f"nats://127.0.0.1:{free_port()}",
            "SEEDLINE_HOME": str(tmp_path), "SEEDLINE_DATABASE_URL": ""}


def test_the_table_covers_every_command_of_the_cli_that_has_json():
    found = {
        " ".join(path) for path, command in commands()
        if has_json(command) and getattr(command.callback, "__module__", "") in MINE
    }
    assert found == set(REACHES_NATS)


@pytest.mark.parametrize("name", sorted(REACHES_NATS))
def test_with_json_an_unreachable_nats_is_a_json_error_on_stdout_with_exit_3(
    seedline, closed, name
):
    result = seedline(*REACHES_NATS[name], "--json", env=closed)
    assert result.exit_code == 3, result.output
    reply = json.loads(result.stdout)
    assert reply["ok"] is False and reply["error"]["code"] == "unavailable"
    assert f"Cannot reach NATS at {closed['SEEDLINE_NATS_URL']}" in reply["error"]["message"]
    assert result.stderr == ""


@pytest.mark.parametrize(
    "args",
    [
        ["timeline", "--json", "--instance"],
        ["timeline", "--instance", "i", "--repo", "r", "--limit", "abc", "--json"],
        ["brief", "show", "--json"],
        ["--nats-url", "nats://x", "rejected", "show", "seven", "--json"],
        ["publish", "--instance", "i", "--repo", "r", "--conversation", "c", "--kind", "bogus",
         "--content", "x", "--json"],
        ["publish", *ENTRY, "--conversation", "d", "--session", "e", "--content", "x", "--json"],
        ["notices", "--instance", "i", "--since", "soon", "--json"],
    ],
    ids=lambda args: " ".join(args[:3]),
)
def test_with_json_usage_errors_are_json_too_with_exit_2(seedline, closed, args):
    result = seedline(*args, env=closed)
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "invalid_request" and error["message"]
    assert result.stderr == ""
    assert not wording_violations(error["message"])


def test_without_json_a_usage_error_stays_text_for_a_person(seedline, closed):
    result = seedline("timeline", "--instance", "i", "--repo", "r", "--limit", "abc", env=closed)
    assert result.exit_code == 2
    assert "Invalid value for '--limit'" in result.stderr and not result.stdout


def run_cli(*args: bytes | str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """The installed command in its own process: argv can carry bytes that are not UTF-8."""
    return subprocess.run([sys.executable, "-m", "seedline_cli", *args], input=stdin,
                          capture_output=True, env={**os.environ, "SEEDLINE_NATS_URL":
                                                    f"nats://127.0.0.1:{free_port()}"})


def test_an_argument_that_is_not_utf8_is_named_without_a_traceback():
    plain = run_cli("publish", *ENTRY, "--content", b"caf\xe9")
    assert plain.returncode == 2, plain.stderr
    text = plain.stderr.decode()
    assert "The value of --content" in text and "byte 0xE9" in text and "UTF-8" in text
    assert "Traceback" not in text

    as_json = run_cli("publish", *ENTRY, "--content", b"caf\xe9", "--json")
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"]["code"] == "invalid_request"
    assert b"Traceback" not in as_json.stderr


def test_content_that_is_not_utf8_on_stdin_says_so():
    result = run_cli("publish", *ENTRY, "--content-file", "-", stdin=b"\xff\xfe latin")
    assert result.returncode == 2
    assert "--content-file - is not UTF-8 text (byte 0xFF at offset 0" in result.stderr.decode()
    assert b"Traceback" not in result.stderr


@pytest.mark.parametrize(
    "target, expected",
    [
        ("folder", "is a folder; give a file, or - for stdin"),
        ("missing.txt", "Cannot read --content-file {path}: No such file or directory."),
        ("latin1.txt", "is not UTF-8 text (byte 0xE9 at offset 3"),
    ],
)
def test_a_content_file_that_cannot_be_used_says_why(seedline, closed, tmp_path, target,
                                                      expected):
    (tmp_path / "folder").mkdir()
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9")
    path = tmp_path / target
    result = seedline("publish", *ENTRY, "--content-file", str(path), env=closed)
    assert result.exit_code == 2, result.output
    assert expected.format(path=path) in result.stderr


def test_a_jsonl_file_that_is_a_folder_says_so(seedline, closed, tmp_path):
    result = seedline("publish", "--file", str(tmp_path), env=closed)
    assert result.exit_code == 2
    assert "is a folder; give a JSONL file" in result.stderr


def test_notices_since_something_that_is_neither_an_id_nor_a_time_says_what_it_takes(seedline,
                                                                                      closed):
    result = seedline("notices", "--instance", "bd43f4de", "--since", "yesterday", env=closed)
    assert result.exit_code == 2
    assert "a notice's id" in result.stderr and "RFC 3339" in result.stderr


def test_an_unexpected_failure_is_one_sentence_not_a_traceback(capsys):
    @reports_errors
    def broken(json_out: bool = False):
        raise KeyError("surprise")

    for as_json in (False, True):
        with pytest.raises(Exception) as exited:
            broken(json_out=as_json)
        assert getattr(exited.value, "exit_code", None) == 1
    captured = capsys.readouterr()
    assert "Something unexpected went wrong (KeyError: 'surprise')" in captured.err
    assert json.loads(captured.out)["error"]["code"] == "internal_error"
    assert "Traceback" not in captured.err + captured.out


def test_every_help_text_is_in_plain_words(seedline):
    texts = {"seedline": seedline("--help", env={"COLUMNS": "200"}).output}
    for path, command in commands():
        if command.hidden:
            continue
        result = seedline(*path, "--help", env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        texts[" ".join(path)] = result.output
    assert {"conversations", "status", "rejected", "rejected show", "notices"} <= set(texts)
    for name, text in texts.items():
        assert not wording_violations(text), (name, wording_violations(text))


def test_the_older_names_still_work_but_are_not_shown(seedline):
    root = seedline("--help", env={"COLUMNS": "200"}).output
    assert "conversations" in root and " sessions " not in root
    alias = seedline("sessions", "--help", env={"COLUMNS": "200"})
    assert alias.exit_code == 0 and "List the live conversations" in alias.output
    for command in ("publish", "timeline"):
        text = seedline(command, "--help", env={"COLUMNS": "200"}).output
        assert "--conversation" in text and "--session" not in text


def test_a_name_with_a_control_character_is_refused_before_anything_is_sent(seedline, closed):
    result = seedline("timeline", "--instance", "i", "--repo", "r", "--conversation", "x\ty",
                      env=closed)
    assert result.exit_code == 2
    assert "--conversation contains a control character; remove it." in result.stderr


def test_up_on_a_data_folder_it_cannot_create_says_so(seedline, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    result = seedline("up", "--nats-port", str(free_port()), "--monitor-port", str(free_port()),
                      env={"SEEDLINE_HOME": str(blocked / "home")})
    assert result.exit_code == 1
    assert f"Cannot use {blocked / 'home'} as the data folder" in result.stderr
    assert "SEEDLINE_HOME" in result.stderr
