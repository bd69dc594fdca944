"""publish and timeline against a real nats-server, Postgres and timeline-writer."""

from __future__ import annotations

import json
import time

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
        "--conversation",
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
    assert reply == {"ok": True, "entry_id": "e-1", "seq": 1, "duplicate": False,
                     "truncated_from": None}

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
        "--conversation",
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
        "--conversation",
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
            "--conversation",
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
        "--conversation",
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
                seedline, cli_env, "--conversation", session, "--kind", "chat_user",
                "--content", text
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
            seedline, cli_env, "--conversation", session, "--kind", "chat_user",
            "--content", session
        )
    only_b = seedline.read_json(cli_env, *REPO, "--conversation", "csess_b")["entries"]
    assert [e["content"] for e in only_b] == ["csess_b"]

    empty = seedline("timeline", "--instance", "bd43f4de", "--repo", "apps/none", env=cli_env)
    assert empty.exit_code == 0
    assert "No entries for apps/none" in empty.stdout


def test_rebuild_timeline_reports_equal_digests(seedline, cli_env):
    for n in range(3):
        publish(
            seedline, cli_env, "--conversation", "csess_1", "--kind", "chat_user",
            "--content", f"m{n}"
        )

    result = seedline("rebuild", "timeline", "--json", env=cli_env)

    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    assert reply["equal"] is True and reply["rows"] == 3
    assert reply["before_digest"] == reply["after_digest"]


def test_rebuild_conversations_reports_equal_digests(seedline, cli_env):
    for n in range(3):
        publish(seedline, cli_env, "--conversation", f"csess_{n}", "--kind", "chat_user",
                "--content", f"m{n}")

    # Only the timeline-writer runs here: the projection has read nothing yet, which is
    # being behind, not drift (equal at offset 0); the rebuild then fills it.
    first = seedline("rebuild", "conversations", "--json", env=cli_env)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["equal"] is True
    again = seedline("rebuild", "conversations", "--json", env=cli_env)
    assert again.exit_code == 0, again.output
    reply = json.loads(again.stdout)
    assert reply["equal"] is True
    assert reply["before_digest"] != json.loads(first.stdout)["before_digest"]


# -- sizes, cuts and the older flag ---------------------------------------------------------


def test_content_over_the_servers_max_payload_names_both_limits_and_stores_nothing(
    seedline, cli_env, tmp_path
):
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * (5 << 20))
    result = publish(seedline, cli_env, "--conversation", "csess_1", "--kind", "terminal",
                     "--content-file", str(big))
    assert result.exit_code == 2, result.output
    assert "over this NATS server's max payload of 4.0 MiB (4,194,304 bytes)" in result.stderr
    assert "an entry keeps at most 100,000" in result.stderr
    assert "5,242,880 characters" in result.stderr
    assert seedline.read_json(cli_env, *REPO)["entries"] == []


def test_publish_says_when_content_was_cut_and_to_how_many_characters(seedline, cli_env, tmp_path):
    long = tmp_path / "long.txt"
    long.write_text("é" * 1_100_000)  # code points, not bytes, are counted
    result = publish(seedline, cli_env, "--conversation", "csess_1", "--kind", "terminal",
                     "--content-file", str(long), "--entry-id", "long-1")
    assert result.exit_code == 0, result.output
    assert "cut to 100,000 characters from 1,100,000" in result.stdout
    as_json = publish(seedline, cli_env, "--conversation", "csess_1", "--kind", "terminal",
                      "--content-file", str(long), "--entry-id", "long-2", "--json")
    assert json.loads(as_json.stdout)["truncated_from"] == 1_100_000
    again = publish(seedline, cli_env, "--conversation", "csess_1", "--kind", "terminal",
                    "--content-file", str(long), "--entry-id", "long-1", "--json")
    assert json.loads(again.stdout)["duplicate"] is True
    assert json.loads(again.stdout)["truncated_from"] is None  # the first copy stands
    stored = seedline.read_json(cli_env, *REPO)["entries"]
    assert [(e["truncated_from"], len(e["content"])) for e in stored] == [(1_100_000, 100_000)] * 2


def test_a_jsonl_file_reports_cut_lines_and_skips_a_line_over_the_max_payload(
    seedline, cli_env, tmp_path
):
    path = tmp_path / "entries.jsonl"
    path.write_text("\n".join([
        line(1), line(2, content="z" * 1_100_000), line(3, content="q" * (5 << 20)), line(4),
    ]) + "\n")
    result = seedline("publish", "--file", str(path), env=cli_env)
    assert result.exit_code == 1, result.output
    assert "1 entry was cut to 100,000 characters: line 2 (from 1,100,000)" in result.stdout
    assert "line 3:" in result.stderr and "over this NATS server's max payload" in result.stderr
    summary = json.loads(seedline("publish", "--file", str(path), "--json", env=cli_env).stdout)
    assert summary["cut"] == [{"line": 2, "truncated_from": 1_100_000}]
    assert [s["line"] for s in summary["skipped"]] == [3]
    entries = seedline.wait_for_entries(cli_env, 3, *REPO)["entries"]
    assert [e["entry_id"] for e in entries] == ["f-1", "f-2", "f-4"]


def test_the_older_session_flag_still_publishes_and_reads(seedline, cli_env):
    result = publish(seedline, cli_env, "--session", "csess_old", "--kind", "chat_user",
                     "--content", "old scripts keep working")
    assert result.exit_code == 0, result.output
    only = seedline.read_json(cli_env, *REPO, "--session", "csess_old")["entries"]
    assert [e["content"] for e in only] == ["old scripts keep working"]


# -- rejected ----------------------------------------------------------------------------


def publish_raw(env: dict, *payloads: bytes) -> None:
    import asyncio

    import nats

    async def send() -> None:
        nc = await nats.connect(env["SEEDLINE_NATS_URL"])
        js = nc.jetstream()
        for payload in payloads:
            await js.publish("seedline.ingest.timeline", payload)
        await nc.close()

    asyncio.run(send())


def wait_for_rejected(seedline, env: dict, count: int, timeout: float = 15.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        result = seedline("rejected", "--json", env=env)
        assert result.exit_code == 0, result.output
        rows = json.loads(result.stdout)["rejected"]
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def test_rejected_lists_newest_first_with_reasons_and_shows_one_whole(seedline, cli_env):
    empty = seedline("rejected", env=cli_env)
    assert empty.exit_code == 0 and "Nothing was rejected" in empty.stdout
    publish_raw(cli_env, b"{not json", b"\xff\xfe not utf-8", line(1, kind="bogus").encode())

    rows = wait_for_rejected(seedline, cli_env, 3)
    assert [r["reason_code"] for r in rows] == ["invalid_entry", "not_json", "not_json"]
    assert rows[0]["seq"] > rows[1]["seq"] > rows[2]["seq"]
    table = seedline("rejected", env={**cli_env, "COLUMNS": "200"})
    assert table.exit_code == 0
    assert "invalid_entry" in table.stdout and "kind 'bogus' is not one of" in table.stdout

    binary = seedline("rejected", "show", str(rows[1]["seq"]), env=cli_env)
    assert binary.exit_code == 0, binary.output
    assert "not UTF-8" in binary.stdout and "\\xff\\xfe not utf-8" in binary.stdout
    shown = json.loads(seedline("rejected", "show", str(rows[0]["seq"]), "--json",
                                env=cli_env).stdout)
    assert json.loads(shown["raw_text"])["kind"] == "bogus" and shown["raw_is_utf8"] is True
    limited = json.loads(seedline("rejected", "--limit", "1", "--json", env=cli_env).stdout)
    assert [r["seq"] for r in limited["rejected"]] == [rows[0]["seq"]] and limited["has_more"]

    missing = seedline("rejected", "show", "999", "--json", env=cli_env)
    assert missing.exit_code == 1
    assert json.loads(missing.stdout)["error"]["code"] == "not_found"


def test_rejected_counts_lines_refused_here_apart_from_what_the_platform_rejected(
    seedline, cli_env, tmp_path
):
    path = tmp_path / "entries.jsonl"
    path.write_text("\n".join([line(1), "{not json", line(2, kind="bogus"), line(3)]) + "\n")
    published = seedline("publish", "--file", str(path), env=cli_env)
    assert published.exit_code == 1, published.output
    assert "They were not sent" in " ".join(published.stdout.split())

    listed = seedline("rejected", env={**cli_env, "COLUMNS": "200"})
    as_json = json.loads(seedline("rejected", "--json", env=cli_env).stdout)

    assert listed.exit_code == 0, listed.output
    said = " ".join(listed.stdout.split())
    assert "every input so far was accepted" not in said
    assert "2 lines refused here by `seedline publish --file` before sending" in said
    assert "The platform rejected no input it was given" in said
    assert as_json["rejected"] == []
    assert [(r["line"], r["file"]) for r in as_json["refused_here"]] == [
        (3, str(path.resolve())), (2, str(path.resolve()))]
    # What the platform itself rejects is listed apart, under its own title.
    publish_raw(cli_env, b"{not json")
    wait_for_rejected(seedline, cli_env, 1)
    both = " ".join(seedline("rejected", env={**cli_env, "COLUMNS": "200"}).stdout.split())
    assert "1 rejected by the platform" in both and "2 lines refused here" in both
