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


def test_every_surface_says_the_contracts_version():
    """The version in the contract's title is the one the code speaks: the OpenAPI and
    AsyncAPI documents, every service's discovery entry and the MCP server."""
    import json

    from seedline_contracts import CONTRACT_VERSION
    from seedline_platform import app_base
    from seedline_web import mcp_tools

    title = COPY.read_text(encoding="utf-8").splitlines()[0]
    assert title == f"# Seedline wire contract, version {CONTRACT_VERSION}"
    for document in ("openapi.json", "asyncapi.json"):
        info = json.loads((REPO / "docs" / document).read_text(encoding="utf-8"))["info"]
        assert info["version"] == CONTRACT_VERSION, document
    assert app_base.VERSION == f"{CONTRACT_VERSION}.0"
    assert mcp_tools.SERVER_VERSION == CONTRACT_VERSION
