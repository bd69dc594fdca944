"""schema and --help need no servers."""

from __future__ import annotations

import json
import re

from seedline_contracts.schema import json_schemas

COMMANDS = ["up", "publish", "timeline", "open", "brief", "runner", "schema", "rebuild"]


def test_schema_out_writes_one_file_per_message(seedline, tmp_path):
    result = seedline("schema", "--out", str(tmp_path / "schema"))
    assert result.exit_code == 0, result.output
    expected = json_schemas()
    written = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "schema").glob("*.json")}
    assert written == expected
    assert "TimelineEntryIn" in written and written["TimelineEntryIn"]["title"] == "TimelineEntryIn"


def test_schema_without_out_prints_all_of_them(seedline):
    result = seedline("schema")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == json_schemas()


def test_help_lists_every_command_with_one_line(seedline):
    result = seedline("--help", env={"COLUMNS": "200"})
    assert result.exit_code == 0
    listed = [
        line.strip("│ ").split()[0]
        for line in result.stdout.splitlines()
        if line.strip("│ ").split()[:1] and line.strip("│ ").split()[0] in COMMANDS
    ]
    assert sorted(listed) == sorted(COMMANDS)


def test_no_command_shows_help_as_a_usage_error(seedline):
    result = seedline()
    assert result.exit_code == 2
    assert "publish" in result.output


def test_help_text_avoids_the_words_people_should_not_read(seedline):
    texts = [seedline("--help").output]
    texts += [
        seedline(*command.split(), "--help").output for command in COMMANDS + ["rebuild timeline"]
    ]
    for text in texts:
        # Command names are exempt: the root help lists `seedline sessions`.
        words = re.sub(r"(?m)^\W*sessions\b", "", text.replace("--session", "")).lower()
        for banned in ("remember", "restored", "as if it never", "session"):
            assert banned not in words, (banned, text)
