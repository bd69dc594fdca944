"""The README's promises that can drift: its first commands, its settings table, its words."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from seedline_platform.settings import SETTINGS_DOC

README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_starts_with_make_run_and_make_test():
    text = README.read_text()
    first_block = text.split("```")[1]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()[1:] if line.strip()]
    assert commands == ["make run", "make test"]


def test_the_configuration_table_matches_settings_doc():
    section = README.read_text().split("## Configuration", 1)[1]
    rows = re.findall(r"^\| `(SEEDLINE_[A-Z_]+)` \| (.*?) \| (.*?) \|$", section, re.MULTILINE)
    assert {name: (default, meaning) for name, default, meaning in rows} == SETTINGS_DOC
    assert [name for name, _, _ in rows] == list(SETTINGS_DOC)


def prose(markdown: str) -> str:
    """The README's sentences: code blocks and inline code (commands, ids, field names) removed."""
    without_blocks = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    return re.sub(r"`[^`]*`", "", without_blocks)


def test_the_readme_prose_avoids_the_words_people_should_not_read():
    text = prose(README.read_text()).lower()
    for banned in ("remember", "restored", "as if it never", "session"):
        assert banned not in text, banned


def test_prose_keeps_sentences_and_drops_code():
    assert prose("A sentence.\n```sh\nseedline sessions\n```\nRun `seedline sessions`.") == (
        "A sentence.\n\nRun ."
    )


def test_make_run_moves_its_ports_as_the_readme_says():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    root = README.parent
    # Not the make that may run this test (make check): its flags must not leak in.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", "install", "run", "NATS_PORT=5222",
         "MONITOR_PORT=9222", "WEB_PORT=9080", "ARGS=--no-runner"],
        cwd=root, capture_output=True, text=True, timeout=60, env=env)
    assert dry.returncode == 0, dry.stderr
    assert any(line.endswith(
        "seedline up --nats-port 5222 --monitor-port 9222 --web-port 9080 --no-runner")
        for line in dry.stdout.splitlines()), dry.stdout
    assert "make run NATS_PORT=5222 MONITOR_PORT=9222 WEB_PORT=9080" in README.read_text()


def test_the_tours_sample_file_publishes_every_line():
    """docs/entries.jsonl, which the tour publishes with `seedline publish --file`: every
    line is an entry the contract takes."""
    from seedline_contracts.normalise import Accepted, normalise
    from seedline_contracts.times import now_text

    sample = README.parent / "docs" / "entries.jsonl"
    assert "publish --file docs/entries.jsonl" in README.read_text()
    lines = sample.read_bytes().splitlines()
    assert len(lines) >= 3
    for line in lines:
        assert isinstance(normalise(line, now_text()), Accepted), line
