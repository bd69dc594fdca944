"""Secrets left out of briefs (CONTRACT.md 5, 1.2): what is found, what is kept.

These pin ruleset 1, which briefs recorded with it replay with; ruleset 2, the one new
briefs use, has tests of its own (test_core_redaction_v2.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seedline_core.brief import compose_brief
from seedline_core.brief_rows import REDACTION_WINDOW, BriefRow
from seedline_core.redaction import find_secrets, marker, redact

CORPUS = Path(__file__).resolve().parents[3] / "tests/data/transcripts/corpus.jsonl"

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
GITHUB_TOKEN = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
DOTENV = f"""$ cat .env
NODE_ENV=production
AWS_SECRET_ACCESS_KEY={AWS_SECRET}
GITHUB_TOKEN={GITHUB_TOKEN}
DATABASE_URL=postgres://admin:hunter2@db.internal:5432/app
"""


def test_a_printed_env_loses_its_three_secrets_and_keeps_every_other_byte() -> None:
    redacted = redact(DOTENV, 1)
    assert redacted.text == (
        "$ cat .env\n"
        "NODE_ENV=production\n"
        f"AWS_SECRET_ACCESS_KEY={marker('assigned secret')}\n"
        f"GITHUB_TOKEN={marker('github token')}\n"
        f"DATABASE_URL=postgres://admin:{marker('password in a URL')}@db.internal:5432/app\n"
    )
    assert redacted.count == 3


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        ('curl -H "Authorization: Bearer abcdef123456" https://api', "abcdef123456",
         "authorization header"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==",
         "authorization header"),
        ("export STRIPE_API_KEY='sk_test_4eC39HqLyjWDarjtT1zdp7dc'",
         "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "assigned secret"),
        ("REDIS_PASSWORD=s3cr3t-value make run", "s3cr3t-value", "assigned secret"),
        ('config = {"api_key": "Zk29dkfj3kd9s"}', "Zk29dkfj3kd9s", "secret keyword"),
        ("key id AKIAIOSFODNN7EXAMPLE in the log", "AKIAIOSFODNN7EXAMPLE", "aws access key"),
        ("mysql://root:Tr0ub4dor@127.0.0.1/db", "Tr0ub4dor", "password in a URL"),
        ("token xoxb-123456789012-abcdefghijkl posted", "xoxb-123456789012-abcdefghijkl",
         "slack token"),
    ],
)
def test_each_kind_of_secret_is_found_and_only_it_goes(text: str, secret: str, kind: str) -> None:
    redacted = redact(text, 1)
    assert secret not in redacted.text
    assert redacted.text == text.replace(secret, marker(kind))


def test_a_private_key_block_goes_whole_even_when_the_entry_was_cut_inside_it() -> None:
    block = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQUFB\n"
    whole = f"id_ed25519:\n{block}-----END OPENSSH PRIVATE KEY-----\ndone"
    assert redact(whole, 1).text == f"id_ed25519:\n{marker('private key')}\ndone"
    assert redact(f"id_ed25519:\n{block}", 1).text == f"id_ed25519:\n{marker('private key')}"


@pytest.mark.parametrize(
    "text",
    [
        "API_KEY=$API_KEY",
        'GITHUB_TOKEN="${GITHUB_TOKEN}"',
        "SECRET_KEY=<your key here>",
        "postgres://user:${PGPASSWORD}@localhost/db",
        "Authorization: Bearer $TOKEN",
        "commit 3f1c2a9b8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b (HEAD -> main)",
        "request 123e4567-e89b-12d3-a456-426614174000 failed",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "the password field is required",
    ],
)
def test_references_placeholders_shas_and_uuids_are_kept(text: str) -> None:
    assert redact(text, 1).text == text


def test_redacting_twice_changes_nothing_more() -> None:
    once = redact(DOTENV, 1)
    twice = redact(once.text, 1)
    assert twice.text == once.text
    assert twice.count == 0


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_markers_stand_where_the_text_says(text: str) -> None:
    redacted = redact(text + "\nGITHUB_TOKEN=" + GITHUB_TOKEN, 1)
    for start, end in redacted.markers:
        assert redacted.text[start:end].startswith("[secret left out: ")
        assert redacted.text[end - 1] == "]"
    assert GITHUB_TOKEN not in redacted.text


def row(seq: int, content: str, kind: str = "terminal") -> BriefRow:
    return BriefRow(seq, "csess_old", kind, content, "2026-08-17T10:00:00Z", "claude")


def test_a_brief_counts_the_secrets_it_leaves_out_and_its_chars_what_is_sent() -> None:
    rows = [row(3, DOTENV), row(2, "cat .env", "command"), row(1, "Set up the database",
                                                                     "chat_user")]
    brief = compose_brief(rows, 3, 3, redaction=1)
    assert brief is not None
    assert brief.redacted == 3
    assert brief.stats()["redacted"] == 3
    for secret in (AWS_SECRET, GITHUB_TOKEN, "hunter2"):
        assert secret not in brief.text
    assert "postgres://admin:" in brief.text and "@db.internal:5432/app" in brief.text
    shown = redact(DOTENV, 1).text
    assert brief.chars == len(shown) + len("cat .env") + len("Set up the database")


def test_a_brief_replayed_from_before_redaction_keeps_its_bytes() -> None:
    rows = [row(1, DOTENV)]
    old = compose_brief(rows, 1, 1, redaction=None)
    assert old is not None and old.redacted == 0 and old.redaction is None
    assert AWS_SECRET in old.text
    assert compose_brief(rows, 1, 1, redaction=1).sha256 != old.sha256


@pytest.mark.parametrize("kind", ["terminal", "chat_assistant"])
def test_a_cut_never_shows_part_of_a_secret_or_splits_a_marker(kind: str) -> None:
    filler = "x" * 3990
    secret_line = f"GITHUB_TOKEN={GITHUB_TOKEN}"
    # The token straddles the 4,000-character cut at both ends of the entry.
    content = secret_line + filler if kind == "terminal" else filler + secret_line
    content = "y" * 5000 + content if kind == "terminal" else content + "y" * 5000
    brief = compose_brief([row(1, content, kind)], 1, 1, redaction=1)
    assert brief is not None
    assert GITHUB_TOKEN[:8] not in brief.text and GITHUB_TOKEN[-8:] not in brief.text
    assert "[secret left out" not in brief.text or marker("github token") in brief.text
    assert brief.redacted == brief.text.count(marker("github token"))


def test_an_entry_longer_than_the_window_is_cut_from_its_redacted_part() -> None:
    content = f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n" + "z" * (REDACTION_WINDOW * 2)
    brief = compose_brief([row(1, content, "chat_assistant")], 1, 1, redaction=1)
    assert brief is not None and AWS_SECRET not in brief.text and brief.redacted == 1
    (entry,) = brief.entries
    assert entry.chars + entry.left_out == len(content) - len(AWS_SECRET) + len(
        marker("assigned secret"))


_HEX_ID = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b")


@pytest.mark.parametrize("ruleset", [1, 2])
def test_no_commit_sha_digest_or_uuid_of_the_transcript_corpus_is_lost(ruleset: int) -> None:
    """A brief that lost the commit or the id it needed is wrong too (the corpus is 57
    real coding-agent transcripts). Ruleset 2 takes a hex value only where a setting
    named for a secret holds it (`project_token = "6da9…"`)."""
    ids = lost = 0
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        for _, content in json.loads(line):
            found = {m.group(0) for p in (_HEX_ID, _UUID) for m in p.finditer(content)}
            if not found:
                continue
            shown = redact(content, ruleset).text
            ids += len(found)
            lost += sum(1 for value in found if value not in shown
                        and not (ruleset == 2 and _held_by_secret_setting(content, value)))
    assert ids > 1000
    assert lost == 0


def _held_by_secret_setting(content: str, value: str) -> bool:
    from seedline_core.redaction_v2 import secret_name

    held = re.search(r"([\w.-]+)[\"']?\s*[:=]\s*[\"']?" + re.escape(value), content)
    return held is not None and secret_name(held.group(1))


def test_find_secrets_spans_do_not_overlap_and_are_ordered() -> None:
    text = DOTENV + 'password = "hunter2hunter2"\n' + DOTENV
    spans = find_secrets(text, 1)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))
    assert len(spans) == 7
