"""The secret rulesets over the labelled corpus (bench/secret_corpus.py): ruleset 2 leaves
out every secret of every form coding agents print and takes nothing beside them, and
each ruleset still redacts exactly as it did when briefs were recorded with it."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from seedline_core.brief import compose_brief
from seedline_core.brief_rows import BriefRow
from seedline_core.redaction import RULESET, find_secrets, redact

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.secret_corpus import Case, corpus  # noqa: E402

# sha256 of every corpus text redacted, in order: what a recorded brief's bytes rest on.
# A ruleset's digest never changes; a change of detectors is a new ruleset. (Pinned again,
# the rulesets unchanged, when the texts read from the lock files left the fixed corpus.)
PINNED = {
    1: "33a0b010e05b28364cf76857bb80c0c154894625c10bce78d19052ffcbe4427f",
    2: "524dd30f8e3ebd735eda3f9c12c67cb6907229a6c9d0f1b8a8cef60940420eaf",
}


def _fixed_corpus() -> list[Case]:
    """The corpus less what is read from this checkout's git history and lock files (they
    change with every commit and every dependency)."""
    return [case for case in corpus() if case.group != "negative" or case.form not in {
        "git log with full shas", "git log --oneline", "file paths", "pip hashes",
        "npm integrity"}]


def _digest(ruleset: int) -> str:
    digest = hashlib.sha256()
    for case in _fixed_corpus():
        digest.update(redact(case.text, ruleset).text.encode("utf-8") + b"\0")
    return digest.hexdigest()


@pytest.mark.parametrize("ruleset", sorted(PINNED))
def test_each_ruleset_redacts_as_it_did_when_briefs_were_recorded_with_it(ruleset: int) -> None:
    assert _digest(ruleset) == PINNED[ruleset]


POSITIVES = [case for case in corpus(transcripts=False) if case.positive]


@pytest.mark.parametrize("case", POSITIVES, ids=[case.form for case in POSITIVES])
def test_every_secret_goes_and_nothing_beside_it(case: Case) -> None:
    spans = find_secrets(case.text)
    at = [(case.text.find(s), case.text.find(s) + len(s)) for s in case.secrets]
    for lo, hi in at:
        covered = {i for span in spans for i in range(max(lo, span.start), min(hi, span.end))}
        assert len(covered) == hi - lo, f"{case.text[lo:hi]!r} is not left out whole"
    for span in spans:
        assert any(lo <= span.start and span.end <= hi for lo, hi in at), (
            f"{case.text[span.start:span.end]!r} takes what is not a secret")


def test_the_ruleset_of_new_briefs_is_the_newest() -> None:
    assert RULESET == max(PINNED)


# The forms a brief once carried to another engine verbatim, in one agent's output.
PRINTED_FORMS = {
    "aws credentials file": "aws_secret_access_key",
    "github fine-grained PAT": "gh auth login --with-token <<< [secret left out: ",
    "inline PGPASSWORD then ;": "PGPASSWORD=",
    "yaml unquoted password": "password: ",
    "redis:// URL": "redis://:[secret left out: password in a URL]@cache.internal:6379/0",
    "openai project key in code": 'client = OpenAI(api_key="[secret left out: ',
    "azure AccountKey": "AccountKey=[secret left out: azure storage key];EndpointSuffix=",
}


def test_a_brief_leaves_out_every_form_and_keeps_the_characters_around_them() -> None:
    by_form = {case.form: case for case in POSITIVES}
    cases = [by_form[form] for form in PRINTED_FORMS]
    rows = [BriefRow(n, "csess_claude", "terminal", case.text, "2026-08-17T10:00:00Z", "claude")
            for n, case in enumerate(reversed(cases), 1)][::-1]
    brief = compose_brief(rows, len(rows), len(rows))
    assert brief is not None and brief.redaction == RULESET
    for case in cases:
        for secret in case.secrets:
            assert secret not in brief.text
            assert secret[:12] not in brief.text and secret[-12:] not in brief.text
    for kept in PRINTED_FORMS.values():
        assert kept in brief.text
    # The command still reads as it was written: the `;` after the value stays.
    pgpassword = brief.text.split("PGPASSWORD=[secret left out: ", 1)[1]
    assert pgpassword.split("]", 1)[1].startswith("; psql -h db -U app\n")
    assert brief.redacted == sum(len(case.secrets) for case in cases)
    # A brief recorded with ruleset 1 replays with ruleset 1, whatever is newest.
    old = compose_brief(rows, len(rows), len(rows), redaction=1)
    assert old is not None and old.text != brief.text
    assert "aws_secret_access_key = " + by_form["aws credentials file"].secrets[1] in old.text
