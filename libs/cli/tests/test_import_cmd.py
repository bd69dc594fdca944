"""`seedline import` against a real nats-server, Postgres and timeline-writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seedline_cli.import_cmd import repo_of

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "engine_transcripts"
CLAUDE_TOOLS = DATA / "claude" / "spotter-tool-heavy.jsonl"
SESSION = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
INSTANCE = ["--instance", "bd43f4de"]


def imported(seedline, env, *args: str) -> dict:
    result = seedline("import", *args, *INSTANCE, "--json", env=env)
    assert result.exit_code in (0, 1), result.output
    return {"exit_code": result.exit_code, **json.loads(result.stdout)}


@pytest.mark.servers
def test_an_imported_session_reads_back_in_order_as_the_transcript_has_it(seedline, cli_env):
    summary = imported(seedline, cli_env, "claude", str(CLAUDE_TOOLS))
    listing = seedline.wait_for_entries(cli_env, 19, *INSTANCE, "--repo", "spotter")

    assert (summary["exit_code"], summary["imported"], summary["duplicates"]) == (0, 19, 0)
    assert summary["conversations"] == [{
        "file": str(CLAUDE_TOOLS), "session_id": SESSION, "repo": "spotter",
        "entries": 19, "imported": 19, "duplicates": 0,
    }]
    entries = listing["entries"]
    assert [e["kind"] for e in entries][:4] == ["chat_user", "command", "terminal",
                                                "chat_assistant"]
    assert entries[0]["content"] == "start phoenix in background"
    assert entries[0]["at"] == "2026-02-10T22:57:54.684Z"
    assert {(e["session_id"], e["engine"]) for e in entries} == {(SESSION, "claude")}


@pytest.mark.servers
def test_a_second_import_is_all_duplicates_and_publishes_nothing(seedline, cli_env):
    first = imported(seedline, cli_env, "claude", str(CLAUDE_TOOLS))
    seedline.wait_for_entries(cli_env, 19, *INSTANCE, "--repo", "spotter")

    second = imported(seedline, cli_env, "claude", str(CLAUDE_TOOLS))
    listing = seedline.read_json(cli_env, *INSTANCE, "--repo", "spotter")

    assert (first["imported"], second["imported"], second["duplicates"]) == (19, 0, 19)
    assert second["kinds"] == {}  # nothing new, so no kinds of new entries
    assert len(listing["entries"]) == 19
    said = seedline("import", "claude", str(CLAUDE_TOOLS), *INSTANCE, env=cli_env).stdout
    assert "Imported 0 new entries from 1 conversation(s) of spotter." in said
    assert "19 were in the timeline already" in said


@pytest.mark.servers
def test_a_folder_of_rollouts_imports_each_as_its_own_conversation(seedline, cli_env):
    summary = imported(seedline, cli_env, "codex", str(DATA / "codex"), "--repo", "chess")

    assert summary["exit_code"] == 0
    assert sorted((c["session_id"], c["entries"]) for c in summary["conversations"]) == [
        ("019e1625-789d-76c0-80ab-3724b5ddb799", 6),
        ("01a23104-68fe-7733-b08a-841035ff1a5b", 10),
    ]
    assert {c["repo"] for c in summary["conversations"]} == {"chess"}
    assert summary["imported"] == 16


@pytest.mark.servers
def test_malformed_lines_are_named_and_everything_else_is_imported(seedline, cli_env, tmp_path):
    lines = CLAUDE_TOOLS.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines[:5] + ["{not json", "[1, 2]"] + lines[5:]) + "\n")

    summary = imported(seedline, cli_env, "claude", str(broken))

    assert summary["exit_code"] == 1
    assert summary["malformed"] == [
        {"file": str(broken), "line": 6, "error": "not a JSON object"},
        {"file": str(broken), "line": 7, "error": "not a JSON object"},
    ]
    assert summary["imported"] == 19


def test_a_dry_run_reads_and_counts_without_any_server(seedline, tmp_path):
    env = {"SEEDLINE_NATS_URL": "nats://127.0.0.1:9", "SEEDLINE_HOME": str(tmp_path)}

    result = seedline("import", "claude", str(DATA / "claude"), *INSTANCE, "--dry-run", env=env)

    assert result.exit_code == 0, result.output
    assert ("Would import 46 entries from 3 conversation(s) of chess-academy, spotter"
            in result.stdout)
    assert "nothing was published" in result.stdout
    assert "the model's thinking" in result.stdout


def test_a_file_without_a_working_folder_needs_a_repo(seedline, tmp_path):
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps({
        "type": "user", "sessionId": "s-1", "uuid": "u-1", "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "content": "hello"},
    }) + "\n")
    env = {"SEEDLINE_NATS_URL": "nats://127.0.0.1:9", "SEEDLINE_HOME": str(tmp_path)}

    without = seedline("import", "claude", str(bare), *INSTANCE, "--dry-run", env=env)
    given = seedline("import", "claude", str(bare), *INSTANCE, "--repo", "apps/x",
                     "--dry-run", env=env)

    assert "no working folder recorded; give --repo" in without.stdout
    assert "Would import 1 entries from 1 conversation(s) of apps/x" in given.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["claude", "/no/such/place"], "neither a file nor a folder"),
        (["claude", "{empty}"], "holds no transcript files (*.jsonl)"),
        (["codex", "{empty}"], "holds no transcript files (rollout-*.jsonl)"),
        (["claude", "{empty}", "--instance", ""], "--instance must not be empty"),
    ],
)
def test_what_cannot_be_imported_is_a_usage_error_that_says_why(seedline, tmp_path, args, words):
    empty = tmp_path / "empty"
    empty.mkdir()
    args = [arg.replace("{empty}", str(empty)) for arg in args]
    if "--instance" not in args:
        args += INSTANCE

    result = seedline("import", *args, "--dry-run", env={"SEEDLINE_HOME": str(tmp_path)})

    assert result.exit_code == 2
    assert words in result.output


def test_the_repo_is_the_working_folders_name_or_its_path_under_the_repos_folder(tmp_path):
    (tmp_path / "src" / "apps" / "chess").mkdir(parents=True)

    assert repo_of("/home/me/code/chess-academy", None) == "chess-academy"
    assert repo_of(str(tmp_path / "src" / "apps" / "chess"), tmp_path / "src") == "apps/chess"
    assert repo_of("/elsewhere/chess", tmp_path / "src") == "chess"
    assert repo_of(None, None) is None


def test_a_dry_run_of_a_runner_machines_engine_folder_says_what_it_would_skip_and_why(
    seedline, tmp_path
):
    env = {"SEEDLINE_NATS_URL": "nats://127.0.0.1:9", "SEEDLINE_HOME": str(tmp_path)}
    runs = {
        ("claude", "claude-ea4e83c5-1f4b-48e0-9a4f-6540c484f566.jsonl"): "8 lines of a run",
        ("claude", "claude-briefed-by-an-older-runner.jsonl"): "1 Seedline briefs a runner gave",
        ("codex", "rollout-2026-12-02T15-09-39-01a2374d-ded1-77a2-affa-6422884a6052.jsonl"):
            "lines of a run a Seedline runner made (it published them live)",
    }
    for (engine, name), left_out in runs.items():
        result = seedline("import", engine, str(DATA / "runner" / name), *INSTANCE,
                          "--dry-run", env=env)

        assert result.exit_code == 0, result.output
        words = " ".join(result.stdout.split())
        assert "Would import 0 entries" in words
        assert (f"Would skip {DATA / 'runner' / name}: a Seedline runner ran this "
                "conversation and published it live") in words
        assert left_out in words.split("Would leave out: ")[1]
