"""`seedline runner`: what it checks before it connects, and what it says it serves."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from seedline_cli.main import app

NO_SERVER = {"SEEDLINE_NATS_URL": "nats://127.0.0.1:9"}


def run(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, ["runner", "--node-id", "mac-mini-1", *args],
                              env=env or NO_SERVER)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--instances", "a,,b"], "--instances takes names separated by commas"),
        (["--repos-dir", "/no/such/folder"], "--repos-dir /no/such/folder is not a folder"),
        (["--repos-map", "/no/such/map.toml"], "Cannot read --repos-map /no/such/map.toml"),
    ],
)
def test_options_that_cannot_be_used_are_refused_before_connecting(args, words):
    result = run(*args)

    assert result.exit_code == 2, result.output
    assert words in result.output


def test_a_repos_map_that_is_not_toml_says_so(tmp_path):
    broken = tmp_path / "repos.toml"
    broken.write_text('"apps/x" = ')

    result = run("--repos-map", str(broken))

    assert result.exit_code == 2
    assert "is not valid TOML" in result.output


def test_the_engines_it_can_offer_are_listed_in_its_help():
    result = CliRunner().invoke(app, ["runner", "--help"], env={"COLUMNS": "200"})

    assert "scripted, claude, codex, openai" in result.output
    for flag in ("--instances", "--repos-dir", "--repos-map", "--claude-bin", "--codex-bin"):
        assert flag in result.output
