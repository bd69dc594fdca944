"""docs/CONTRACT.md is the published wire contract, kept in the repository so every
citation of it (README, openapi.json, asyncapi.json) resolves. It must equal the
contract the project builds to, where that is beside the repository (../shared)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COPY = REPO / "docs" / "CONTRACT.md"
# ../shared beside a clone; a worktree one folder deeper sees it at ../../shared.
PUBLISHED = [REPO.parent / "shared" / "CONTRACT.md", REPO.parents[1] / "shared" / "CONTRACT.md"]


def test_the_repository_holds_the_contract():
    text = COPY.read_text(encoding="utf-8")
    assert text.startswith("# Seedline wire contract, version ")


def test_the_copy_is_the_published_contract():
    published = next((p for p in PUBLISHED if p.is_file()), None)
    if published is None:
        pytest.skip("no published contract beside the repository (../shared/CONTRACT.md)")
    assert COPY.read_bytes() == published.read_bytes(), (
        f"docs/CONTRACT.md differs from {published}; copy it over and commit it")
