"""publish and timeline against a real nats-server, Postgres and timeline-writer."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.servers

REPO = ["--instance", "bd43f4de", "--repo", "apps/chess-academy"]


def publish(seedline, env, *extra: str):
    return seedline("publish", *REPO, *extra, env=env)


def line(n: int, **over) -> str:
    body = {
        "entry_id": f"f-{n}",
        "instance_id": "bd43f4de",
        "repo": "apps/chess-academy",
        "session_id": "csess_1",
        "kind": "terminal",
        "content": f"output {n}",
        "at": "2026-08-17T10:00:00Z",
    }
    body.update(over)
    return json.dumps(body)


def test_a_published_entry_reads_back_with_its_seq(seedline, cli_env):
    result = publish(
        seedline,
        cli_env,
        "--session",
        "csess_1",
        "--kind",
        "chat_user",
        "--content",
        "Add castling",
        "--entry-id",
        "e-1",
        "--at",
        "2026-08-17T12:00:00+02:00",
        "--engine",
        "claude",
        "--json",
    )
    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert reply == {"ok": True, "entry_id": "e-1", "seq": 1, "duplicate": False}

    listing = seedline.read_json(cli_env, *REPO)
    assert listing["has_more"] is False
    assert listing["entries"] == [
        {
            "seq": 1,
            "entry_id": "e-1",
            "session_id": "csess_1",
            "kind": "chat_user",
            "content": "Add castling",
            "at": "2026-08-17T10:00:00Z",
            "engine": "claude",
            "truncated_from": None,
        }
    ]


def test_publishing_the_same_entry_id_again_names_the_first_seq(seedline, cli_env):
    first = publish(
        seedline,
        cli_env,
        "--session",
        "csess_1",
        "--kind",
        "chat_user",
        "--content",
        "one",
        "--entry-id",
        "same",
    )
    again = publish(
        seedline,
        cli_env,
        "--session",
        "csess_1",
        "--kind",
        "chat_user",
        "--content",
        "two",
        "--entry-id",
        "same",
    )
    assert first.exit_code == 0 and again.exit_code == 0, again.output
    assert "Stored entry same as seq 1." in first.stdout
    assert "already stored as seq 1" in again.stdout
    assert [e["content"] for e in seedline.read_json(cli_env, *REPO)["entries"]] == ["one"]


def test_an_entry_without_entry_id_gets_a_fresh_time_ordered_one(seedline, cli_env):
    ids = []
    for text in ("first", "second"):
        result = publish(
            seedline,
            cli_env,
            "--session",
            "csess_1",
            "--kind",
            "chat_user",
            "--content",
            text,
            "--json",
        )
        assert result.exit_code == 0, result.output
        ids.append(json.loads(result.stdout)["entry_id"])
    assert len(ids[0]) == 26 and ids[0] < ids[1]


def test_content_can_come_from_a_file(seedline, cli_env, tmp_path):
    text = "line one\nline two\n"
    (tmp_path / "note.txt").write_text(text)
    result = publish(
        seedline,
        cli_env,
        "--session",
        "csess_1",
        "--kind",
        "brain",
        "--content-file",
        str(tmp_path / "note.txt"),
    )
    assert result.exit_code == 0, result.output
    assert seedline.read_json(cli_env, *REPO)["entries"][0]["content"] == text


def test_a_jsonl_file_is_published_and_its_bad_line_reported_by_number(seedline, cli_env, tmp_path):
    path = tmp_path / "entries.jsonl"
    path.write_text("\n".join([line(1), "{not json", line(3, kind="bogus"), "", line(4)]) + "\n")

    result = seedline("publish", "--file", str(path), "--json", env=cli_env)

    assert result.exit_code == 1, result.output
    assert "line 2:" in result.stderr and "not JSON" in result.stderr
    assert "line 3:" in result.stderr and "bogus" in result.stderr
    summary = json.loads(result.stdout)
    assert summary["published"] == 2
    assert [s["line"] for s in summary["skipped"]] == [2, 3]
    entries = seedline.wait_for_entries(cli_env, 2, *REPO)["entries"]
    assert [e["entry_id"] for e in entries] == ["f-1", "f-4"]


def test_a_file_larger_than_a_page_is_read_back_across_pages(seedline, cli_env, tmp_path):
    path = tmp_path / "many.jsonl"
    path.write_text("".join(line(n) + "\n" for n in range(1, 1206)))

    result = seedline("publish", "--file", str(path), "--window", "300", env=cli_env)
    assert result.exit_code == 0, result.output
    assert "Published 1205 entries" in result.stdout

    seedline.wait_for_entries(cli_env, 1, *REPO, "--before-seq", "1206", "--limit", "1")
    listing = seedline.wait_for_entries(cli_env, 1203, *REPO, "--limit", "1203")
    seqs = [e["seq"] for e in listing["entries"]]
    assert seqs == list(range(3, 1206))
    assert listing["has_more"] is True

    again = seedline("publish", "--file", str(path), "--json", env=cli_env)
    assert json.loads(again.stdout)["duplicates"] == 1205


def test_the_timeline_marks_where_each_conversation_begins(seedline, cli_env):
    for session, text in [
        ("csess_a", "Add castling"),
        ("csess_a", "Done"),
        ("csess_b", "Now en passant"),
    ]:
        assert (
            publish(
                seedline, cli_env, "--session", session, "--kind", "chat_user", "--content", text
            ).exit_code
            == 0
        )

    result = seedline("timeline", *REPO, env=cli_env)

    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.count("conversation csess_a") == 1 and text.count("conversation csess_b") == 1
    assert (
        text.index("conversation csess_a") < text.index("Done") < text.index("conversation csess_b")
    )
    assert text.index("conversation csess_b") < text.index("Now en passant")


def test_reading_one_conversation_and_an_empty_repo(seedline, cli_env):
    for session in ("csess_a", "csess_b"):
        publish(
            seedline, cli_env, "--session", session, "--kind", "chat_user", "--content", session
        )
    only_b = seedline.read_json(cli_env, *REPO, "--session", "csess_b")["entries"]
    assert [e["content"] for e in only_b] == ["csess_b"]

    empty = seedline("timeline", "--instance", "bd43f4de", "--repo", "apps/none", env=cli_env)
    assert empty.exit_code == 0
    assert "No entries for apps/none" in empty.stdout


def test_rebuild_timeline_reports_equal_digests(seedline, cli_env):
    for n in range(3):
        publish(
            seedline, cli_env, "--session", "csess_1", "--kind", "chat_user", "--content", f"m{n}"
        )

    result = seedline("rebuild", "timeline", "--json", env=cli_env)

    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert reply["equal"] is True and reply["rows"] == 3
    assert reply["before_digest"] == reply["after_digest"]


def test_rebuild_conversations_reports_equal_digests(seedline, cli_env):
    for n in range(3):
        publish(seedline, cli_env, "--session", f"csess_{n}", "--kind", "chat_user",
                "--content", f"m{n}")

    # Only the timeline-writer runs here, so the first rebuild fills an empty
    # projection (digests differ, exit 1); replaying again must change nothing.
    first = seedline("rebuild", "conversations", "--json", env=cli_env)
    assert first.exit_code == 1 and json.loads(first.stdout)["equal"] is False
    again = seedline("rebuild", "conversations", "--json", env=cli_env)
    assert again.exit_code == 0, again.output
    reply = json.loads(again.stdout)
    assert reply["equal"] is True and reply["after_digest"] == json.loads(first.stdout)["after_digest"]
