"""`seedline capture`: a transcript that grows, read on from where each run stopped.

Each `--once` run is a capture that starts, publishes what is new and stops: the next
one goes on from its state file, as a restarted capture does. Real transcripts from
tests/data, a real nats-server, Postgres and timeline-writer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedline_cli.transcripts import claude, codex

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "engine_transcripts"
CLAUDE_TOOLS = DATA / "claude" / "spotter-tool-heavy.jsonl"
CODEX_CLI = DATA / "codex" / (
    "rollout-2026-12-01T09-51-42-01a23104-68fe-7733-b08a-841035ff1a5b.jsonl"
)
INSTANCE = ["--instance", "bd43f4de"]
PARSERS = {"claude": claude.parse, "codex": codex.parse}


def numbered(path: Path) -> list[tuple[int, str]]:
    return list(enumerate(path.read_text(encoding="utf-8").splitlines(), start=1))


def grow(target: Path, lines: list[str]) -> None:
    with target.open("a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))


@pytest.mark.servers
@pytest.mark.parametrize(("engine", "source", "name"), [
    ("claude", CLAUDE_TOOLS, "d6e0bada.jsonl"),
    ("codex", CODEX_CLI, CODEX_CLI.name),
])
def test_a_growing_transcript_is_captured_once_each_as_import_reads_it(
    seedline, cli_env, tmp_path, engine, source, name
):
    folder = tmp_path / "transcripts"
    folder.mkdir()
    state = tmp_path / "state.json"
    target = folder / name
    lines = source.read_text(encoding="utf-8").splitlines()
    capture = ["capture", engine, str(folder), *INSTANCE, "--repo", "chess", "--state",
               str(state), "--once"]

    assert seedline(*capture, env=cli_env).exit_code == 0  # an empty folder, first start
    cuts = [0, 3, 4, len(lines) // 2, len(lines) - 1, len(lines)]
    for start, end in zip(cuts, cuts[1:]):
        grow(target, lines[start:end])
        result = seedline(*capture, env=cli_env)
        assert result.exit_code == 0, result.output
    # Half a line, as a file being written has it, is left for later.
    expected = PARSERS[engine](numbered(source)).items
    listing = seedline.wait_for_entries(cli_env, len(expected), *INSTANCE, "--repo", "chess")

    stored = [(e["entry_id"], e["kind"], e["content"]) for e in listing["entries"]]
    assert stored == [(i.entry_id, i.kind, i.content) for i in expected]
    assert json.loads(state.read_text())["files"][str(target.resolve())]["lines"] == len(lines)
    again = seedline("import", engine, str(target), *INSTANCE, "--repo", "chess", "--json",
                     env=cli_env)
    assert (json.loads(again.stdout)["imported"], json.loads(again.stdout)["duplicates"]) == (
        0, len(expected))


@pytest.mark.servers
def test_a_half_written_line_waits_and_files_there_at_the_first_start_are_history(
    seedline, cli_env, tmp_path
):
    folder = tmp_path / "transcripts"
    folder.mkdir()
    old = folder / "old.jsonl"
    grow(old, CLAUDE_TOOLS.read_text().splitlines()[:10])
    state = tmp_path / "state.json"
    capture = ["capture", "claude", str(folder), *INSTANCE, "--repo", "chess", "--state",
               str(state), "--once"]

    assert seedline(*capture, env=cli_env).exit_code == 0
    lines = CLAUDE_TOOLS.read_text().splitlines()
    new = folder / "new.jsonl"
    new.write_text(lines[0] + "\n" + lines[1][:40])  # the second line not yet whole
    assert seedline(*capture, env=cli_env).exit_code == 0

    files = json.loads(state.read_text())["files"]
    assert files[str(old.resolve())]["lines"] == 10  # followed from its end
    assert files[str(new.resolve())]["lines"] == 1
    assert files[str(new.resolve())]["offset"] == len(lines[0]) + 1
    assert seedline.read_json(cli_env, *INSTANCE, "--repo", "chess")["entries"] == []


@pytest.mark.servers
@pytest.mark.parametrize(("engine", "name"), [
    ("claude", "claude-ea4e83c5-1f4b-48e0-9a4f-6540c484f566.jsonl"),
    ("codex", "rollout-2026-12-02T15-09-39-01a2374d-ded1-77a2-affa-6422884a6052.jsonl"),
])
def test_a_run_a_runner_made_on_this_machine_is_not_captured(
    seedline, cli_env, tmp_path, engine, name
):
    folder = tmp_path / "transcripts"
    folder.mkdir()
    capture = ["capture", engine, str(folder), *INSTANCE, "--repo", "chess", "--state",
               str(tmp_path / "state.json"), "--once"]
    assert seedline(*capture, env=cli_env).exit_code == 0
    grow(folder / name, (DATA / "runner" / name).read_text().splitlines())
    # A person's own run beside it, so that the capture is seen to publish at all.
    grow(folder / ("d6e0bada.jsonl" if engine == "claude" else CODEX_CLI.name),
         (CLAUDE_TOOLS if engine == "claude" else CODEX_CLI).read_text().splitlines())

    result = seedline(*capture, env=cli_env)
    expected = len(PARSERS[engine](numbered(CLAUDE_TOOLS if engine == "claude" else CODEX_CLI))
                   .items)
    listing = seedline.wait_for_entries(cli_env, expected, *INSTANCE, "--repo", "chess")

    assert result.exit_code == 0, result.output
    assert len(listing["entries"]) == expected
    assert {e["session_id"] for e in listing["entries"]} == {
        "d6e0bada-1959-4eec-a9d2-0bfade768d8f" if engine == "claude"
        else "01a23104-68fe-7733-b08a-841035ff1a5b"}


@pytest.mark.servers
def test_a_deleted_transcript_leaves_the_state_file(seedline, cli_env, tmp_path):
    folder = tmp_path / "transcripts"
    folder.mkdir()
    state = tmp_path / "state.json"
    capture = ["capture", "claude", str(folder), *INSTANCE, "--repo", "chess", "--state",
               str(state), "--once"]
    assert seedline(*capture, env=cli_env).exit_code == 0
    short = folder / "short.jsonl"
    grow(short, (DATA / "claude" / "spotter-short.jsonl").read_text().splitlines())
    assert seedline(*capture, env=cli_env).exit_code == 0
    assert str(short.resolve()) in json.loads(state.read_text())["files"]

    short.unlink()
    assert seedline(*capture, env=cli_env).exit_code == 0

    assert json.loads(state.read_text())["files"] == {}
